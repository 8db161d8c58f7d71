#!/usr/bin/env python3
"""The ABI gate: compares the built library with the committed baseline.

    check_abi.py LIBRARY BASELINE HEADERS_DIR
    check_abi.py --write-baseline LIBRARY BASELINE HEADERS_DIR

Describes LIBRARY with abidw (Debian's abigail-tools) exactly as
tools/abi/update_baseline.sh describes the baseline (the exported functions
and the types of the public headers), then compares the two with abidiff.
Any change to what the baseline holds fails: a removed function, a changed
signature, a struct that lost, moved or gained a field, an enum that changed.
Added functions pass (printed). Exits 77 (a skip) when abigail-tools is not
installed, and fails when the library has no debug information to describe.
To change the ABI on purpose, run tools/abi/update_baseline.sh and commit
abi/libstrideweave.abi with the change.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The one description of the ABI, for the baseline and the check alike.
ABIDW_FLAGS = ["--no-show-locs", "--no-corpus-path", "--drop-private-types", "--exported-interfaces-only",
               "--type-id-style", "hash"]


def describe(abidw, library, headers, out):
    r = subprocess.run([abidw, *ABIDW_FLAGS, "--headers-dir", headers, "--out-file", out, library],
                       capture_output=True, text=True)
    if r.returncode:
        print(r.stdout + r.stderr)
        raise SystemExit(f"abidw could not describe {library} (exit {r.returncode})")
    if "<function-decl" not in open(out).read():
        raise SystemExit(f"{library} has no debug information to describe: build it with -g (meson -Ddebug=true)")


def main(argv):
    write = len(argv) == 5 and argv[1] == "--write-baseline"
    if write:
        argv = argv[:1] + argv[2:]
    if len(argv) != 4:
        print(__doc__)
        return 2
    library, baseline, headers = argv[1:]
    abidw, abidiff = shutil.which("abidw"), shutil.which("abidiff")
    if not abidw or not abidiff:
        print("SKIP: abidw/abidiff are not installed (Debian package abigail-tools)")
        return 77
    if write:
        describe(abidw, library, headers, baseline)
        print(f"{baseline} written from {library}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        current = os.path.join(tmp, "current.abi")
        describe(abidw, library, headers, current)
        r = subprocess.run([abidiff, "--no-show-locs", baseline, current], capture_output=True, text=True)
    report = r.stdout + r.stderr
    print(report, end="")
    if r.returncode & 3:
        print(f"abidiff could not compare {library} with {baseline} (exit {r.returncode})")
        return 1
    removed = changed = added = 0
    for kind, counts in re.findall(r"^(Functions|Variables|Function symbols|Variable symbols) changes summary: (.*)$",
                                   report, flags=re.M):
        removed += sum(int(n) for n in re.findall(r"(\d+) Removed", counts))
        changed += sum(int(n) for n in re.findall(r"(\d+) Changed", counts))
        added += sum(int(n) for n in re.findall(r"(\d+) Added", counts))
    if removed or changed:
        print(f"ABI: {removed} removed and {changed} changed against the baseline. If that is intended, run "
              "tools/abi/update_baseline.sh and commit abi/libstrideweave.abi with the change.")
        return 1
    print(f"ABI: compatible with the baseline ({added} added)" if added else "ABI: identical to the baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
