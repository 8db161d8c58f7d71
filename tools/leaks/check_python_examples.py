#!/usr/bin/env python3
"""Runs each Python example (examples/python/*.py, small sizes) under
valgrind's memcheck against the release build and fails on any invalid
access or definitely lost block whose stack passes through StrideWeave
(libstrideweave or the package's _native extension). CPython, NumPy and
libc keep some memory for the process's lifetime by design; only what the
library and its bindings allocate, read or write is judged.

    python3 tools/leaks/check_python_examples.py [--build DIR] [--keep-xml DIR]

Prints one line per example and "leaks: N examples, N errors".
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Each example at a size that runs in seconds natively (minutes under valgrind).
EXAMPLES = {
    "moe_offload.py": ["--experts", "6", "--topk", "2", "--dim", "8", "--tokens", "2", "--batches", "3", "--quiet"],
    "train_projection.py": ["--rows", "8", "--width", "4", "--per-step", "2", "--steps", "3"],
    "moe_layer.py": ["--tokens", "4", "--dim", "4", "--hidden", "8", "--experts", "4", "--steps", "2", "--quiet"],
    "mixtral_experts.py": ["--experts", "3", "--layer", "0"],
}
# mixtral_offload.py imports PyTorch (its peer and reference), which valgrind
# cannot run in minutes; its StrideWeave calls are those of the examples above
# plus sw_tiled_expert_matmul, which the ASan+UBSan suites cover.
OURS = ("libstrideweave", "_native")
# SWIG's generated runtime, at interpreter teardown, creates its global
# variable-link object anew from SWIG_Python_DestroyModule and never frees it
# (24 bytes, once per process; SWIG issue swig/swig#2037). It is not code of
# this project; leaks allocated under that frame are counted apart.
SWIG_TEARDOWN = "SWIG_Python_DestroyModule"


def ours(frame):
    obj = frame.findtext("obj") or ""
    return any(tag in os.path.basename(obj) for tag in OURS)


def judge(xml_path):
    """The errors whose stacks pass through StrideWeave, as text, and the
    number of leaks from SWIG's module teardown left aside."""
    found = []
    swig = 0
    root = ET.parse(xml_path).getroot()
    for error in root.iter("error"):
        kind = error.findtext("kind") or ""
        if kind.startswith("Leak_") and kind != "Leak_DefinitelyLost":
            continue
        frames = [f for stack in error.findall("stack") for f in stack.findall("frame")]
        if not any(ours(f) for f in frames):
            continue
        if kind.startswith("Leak_") and any(f.findtext("fn") == SWIG_TEARDOWN for f in frames):
            swig += 1
            continue
        what = error.findtext("what") or (error.find("xwhat").findtext("text") if error.find("xwhat") is not None else "")
        top = [f"{f.findtext('fn') or '?'} ({os.path.basename(f.findtext('obj') or '?')})" for f in frames[:8]]
        found.append(f"{kind}: {what}\n    " + "\n    ".join(top))
    return found, swig


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--keep-xml")
    args = parser.parse_args(argv)
    valgrind = shutil.which("valgrind")
    if not valgrind:
        print("leaks: valgrind is not installed (tools/install_deps.sh installs it)")
        return 1
    package = pathlib.Path(args.build) / "bindings" / "python"
    if not (package / "strideweave").is_dir():
        print(f"leaks: the Python package is not built ({package})")
        return 1
    env = dict(os.environ, PYTHONPATH=str(package), PYTHONMALLOC="malloc")
    errors = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, example_args in EXAMPLES.items():
            xml_path = pathlib.Path(args.keep_xml or tmp) / (name + ".xml")
            xml_path.parent.mkdir(parents=True, exist_ok=True)
            cmd = [valgrind, "--tool=memcheck", "--leak-check=full", "--show-leak-kinds=definite",
                   "--errors-for-leak-kinds=definite", "--xml=yes", f"--xml-file={xml_path}",
                   sys.executable, str(ROOT / "examples" / "python" / name), *example_args]
            r = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"leaks {name}: the example failed under valgrind (exit {r.returncode})")
                print(r.stdout[-2000:] + r.stderr[-4000:])
                errors += 1
                continue
            found, swig = judge(xml_path)
            errors += len(found)
            print(f"leaks {name:22s} {len(found)} errors in StrideWeave (valgrind memcheck: invalid accesses, "
                  f"definite leaks); {swig} in SWIG's module teardown (swig/swig#2037)")
            for f in found:
                print("  " + f)
    print(f"leaks: {len(EXAMPLES)} examples, {errors} errors")
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
