#!/usr/bin/env python3
"""The runtime's layers as a build fact.

    layers.py farm FARM_DIR RUNTIME_DIR LAYER...
        Makes FARM_DIR hold links to exactly the given layer folders of
        RUNTIME_DIR (base, core, carriers/host, ...), so a compiler whose
        include path is FARM_DIR finds those layers' headers and no others.
        Idempotent (configure time).

    layers.py check RUNTIME_DIR NAME=USES...
        Reads every #include of RUNTIME_DIR's sources and fails, naming each,
        on an include of a layer the file's layer may not use (NAME=a,b,c:
        layer NAME may include a, b and c besides itself; a layer not listed
        may include anything, the C API). The build refuses such an include
        too (the farms); this names all of them at once, with the rule.
"""
import os
import re
import sys


def layer_of(path):
    parts = path.split("/")
    if parts[0] == "carriers" and len(parts) > 2:
        return parts[0] + "/" + parts[1]
    return parts[0]


def farm(out, runtime, layers):
    os.makedirs(out, exist_ok=True)
    wanted = set()
    for layer in layers:
        link = os.path.join(out, layer)
        wanted.add(os.path.normpath(link))
        os.makedirs(os.path.dirname(link), exist_ok=True)
        target = os.path.join(os.path.abspath(runtime), layer)
        if not os.path.isdir(target):
            raise SystemExit(f"layers.py: no layer folder {target}")
        if os.path.islink(link) and os.readlink(link) == target:
            continue
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(target, link)
    # Links left from an earlier configuration with other layers go.
    for dirpath, dirnames, filenames in os.walk(out):
        for name in dirnames + filenames:
            p = os.path.normpath(os.path.join(dirpath, name))
            if os.path.islink(p) and p not in wanted:
                os.remove(p)
    return 0


def check(runtime, rules):
    allowed = {}
    for rule in rules:
        name, _, uses = rule.partition("=")
        allowed[name] = {u for u in uses.split(",") if u} | {name}
    problems = []
    files = 0
    for dirpath, _, filenames in os.walk(runtime):
        for f in sorted(filenames):
            if not f.endswith((".cpp", ".hpp", ".h", ".inc")):
                continue
            path = os.path.relpath(os.path.join(dirpath, f), runtime)
            src = layer_of(path)
            if src not in allowed:
                continue
            files += 1
            for n, line in enumerate(open(os.path.join(dirpath, f)), 1):
                m = re.match(r'\s*#\s*include\s*"([^"]+)"', line)
                if not m or m.group(1).startswith("strideweave/") or "/" not in m.group(1):
                    continue
                if ".." in m.group(1).split("/"):
                    problems.append(f"{path}:{n}: includes {m.group(1)} by a relative path; "
                                    "name the layer folder instead")
                    continue
                dst = layer_of(m.group(1))
                if dst not in allowed[src]:
                    problems.append(f"{path}:{n}: layer {src} includes {m.group(1)} of layer {dst}; "
                                    f"{src} may include only {', '.join(sorted(allowed[src]))}")
    for p in problems:
        print(p)
    print(f"layers: {files} files of {len(allowed)} layers checked, {len(problems)} upward include(s)")
    return 1 if problems else 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "farm":
        return farm(argv[2], argv[3], argv[4:])
    if len(argv) >= 3 and argv[1] == "check":
        return check(argv[2], argv[3:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
