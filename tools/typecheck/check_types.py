#!/usr/bin/env python3
"""Type-checks the Python that uses strideweave against the package's stubs.

mypy (with tools/typecheck/mypy.ini: function bodies checked whether
annotated or not) runs over the Python examples (examples/python/*.py), the
main demo (tools/hf_demo.py), tools/typecheck/surface.py (what the stubs
promise, as assert_type lines) and every Python code block of the README and
docs/ as the docs check runs it (a fragment inside its harness, a block after
those it continues), with the package as the build tree holds it and installs
it: build/bindings/python/strideweave, its .pyi stubs beside the modules and
py.typed (or the directory $STRIDEWEAVE_PYTHONPATH names). Errors in the
stubs themselves are reported too.

Prints mypy's report (a docs block is named FILE_LINE.py after the page and
the line of its fence) and exits with mypy's status: 0 when there is no
error. Options: --no-docs (the files only), extra arguments go to mypy.
"""
import argparse
import glob
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "docs"))
import check_docs  # noqa: E402

FILES = sorted(glob.glob(str(ROOT / "examples" / "python" / "*.py"))) + [
    str(ROOT / "tools" / "hf_demo.py"), str(ROOT / "tools" / "typecheck" / "surface.py")]


def docs_programs(out_dir):
    """Writes every checked Python block of the README and docs/ as the
    program the docs check runs; returns their paths."""
    pages = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
    paths = []
    for page in pages:
        for block, what, program in check_docs.page_programs(str(page), ["python"]):
            if what != "program":
                continue
            name = f"{page.relative_to(ROOT).as_posix().replace('/', '_').replace('.', '_')}_{block.line}.py"
            path = pathlib.Path(out_dir) / name
            path.write_text(program)
            paths.append(str(path))
    return paths


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-docs", action="store_true", help="skip the docs' code blocks")
    args, mypy_args = parser.parse_known_args(argv)
    package = os.environ.get("STRIDEWEAVE_PYTHONPATH") or str(ROOT / "build" / "bindings" / "python")
    stubs = pathlib.Path(package) / "strideweave" / "__init__.pyi"
    if not stubs.exists():
        print(f"typecheck: no {stubs}: build the package first (bash tools/build.sh build)", file=sys.stderr)
        return 2
    env = dict(os.environ, MYPYPATH=package)
    with tempfile.TemporaryDirectory(prefix="strideweave-typecheck-") as tmp:
        files = FILES + ([] if args.no_docs else docs_programs(tmp))
        cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "tools" / "typecheck" / "mypy.ini"),
               *mypy_args, *files]
        print(f"typecheck: mypy over {len(files)} files against {package}", flush=True)
        return subprocess.run(cmd, cwd=tmp, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
