#!/usr/bin/env python3
"""Checks that the library exports exactly the functions its headers declare.

    check_exports.py LIBRARY MAP HEADER:NODE [HEADER:NODE ...]

Each public header's SW_API functions must be listed, explicitly, under its
version node in the linker version script MAP, and nothing else may be;
the built LIBRARY must export each of them, at that version, and no other
function. Prints every difference and exits 1 if there is one.
"""
import re
import subprocess
import sys


def declared(header):
    text = open(header).read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"^\s*#.*$", " ", text, flags=re.M)  # the SW_API definitions themselves
    return set(re.findall(r"\bSW_API\b[^;{(]*?\b(sw_\w+)\s*\(", text, flags=re.S))


def version_script(path):
    text = re.sub(r"/\*.*?\*/", " ", open(path).read(), flags=re.S)
    nodes = {}
    for name, body in re.findall(r"(\w+)\s*\{(.*?)\}\s*[\w\s]*;", text, flags=re.S):
        glob = body.split("local:")[0].replace("global:", "")
        symbols = [s.strip() for s in glob.split(";") if s.strip()]
        nodes[name] = set(symbols)
    return nodes


def exported(library):
    out = subprocess.run(["nm", "-D", "--defined-only", "--with-symbol-versions", library], check=True,
                         capture_output=True, text=True).stdout
    symbols = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[1] not in "TtWw":
            continue
        name, _, version = parts[2].partition("@")
        symbols[name] = version.lstrip("@")
    return symbols


def main(argv):
    if len(argv) < 4:
        print(__doc__)
        return 2
    library, map_path, pairs = argv[1], argv[2], argv[3:]
    nodes = version_script(map_path)
    symbols = exported(library)
    problems = []
    wanted = {}
    for pair in pairs:
        header, node = pair.rsplit(":", 1)
        decl = declared(header)
        listed = nodes.get(node, set())
        for name in sorted(decl - listed):
            problems.append(f"{name}: declared in {header} but not listed under {node} in {map_path}")
        for name in sorted(listed - decl):
            problems.append(f"{name}: listed under {node} in {map_path} but not declared in {header}")
        for name in decl:
            wanted[name] = node
    for node in set(nodes) - {p.rsplit(':', 1)[1] for p in pairs}:
        problems.append(f"{map_path}: version node {node} belongs to no header")
    for name, node in sorted(wanted.items()):
        if name not in symbols:
            problems.append(f"{name}: declared but not exported by {library}")
        elif symbols[name] != node:
            problems.append(f"{name}: exported at version {symbols[name] or '(none)'}, expected {node}")
    for name in sorted(set(symbols) - set(wanted)):
        if name.startswith("sw_") or not name.startswith("_"):
            problems.append(f"{name}: exported by {library} but declared in no public header")
    for p in problems:
        print(p)
    print(f"exports: {len(wanted)} functions declared, {len(symbols)} exported, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
