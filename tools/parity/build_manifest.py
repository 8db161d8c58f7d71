#!/usr/bin/env python3
"""Writes a first bindings/parity.toml, or brings an existing one up to date.

For every SW_API function of the public header (and, in their own section,
of strideweave_testing.h) it looks for the function's use in each binding,
through that binding's call convention (see scan.py), and names the public
method that reaches it:
  python  the facade function or method calling `N.sw_x` or a native.i
          helper that calls sw_x (a private helper is followed to its public
          callers in the same module);
  java    the org.strideweave method calling `Native.sw_x` / `Native::sw_x`
          or a native.i helper that calls sw_x (private methods followed to
          their public callers in the same class);
  rust    the safe crate's method mentioning `sys::sw_x` (a handle type's
          retain/release: its Clone/Drop).
A function it cannot place gets `omitted: unreviewed`, which check_parity.py
rejects until a person writes the reason.

With an existing manifest, entries already there are kept as written (they
were reviewed); only functions new to the header are added, entries of
functions gone from the header are dropped, and `omitted: unreviewed`
entries are looked up again. --fresh ignores the existing manifest.

Usage: build_manifest.py [--fresh] [--stdout]
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scan  # noqa: E402

UNREVIEWED = "omitted: unreviewed"
# The error plumbing every helper of an interface file calls: placed by hand.
PLUMBING = {"sw_error_code", "sw_error_message", "sw_error_free", "sw_error_create"}


class Scope:
    def __init__(self, path: Path, qual: str, public: str | None, line: int):
        self.path = path
        self.qual = qual  # name inside its file, e.g. "Tensor.sum"
        self.public = public  # public dotted/path name, or None if private
        self.private = qual  # its full name, public or not
        self.line = line
        self.refs: set[str] = set()  # header functions reached, helpers' bodies included
        self.strong: set[str] = set()  # named directly, or a helper named after them
        self.names: set[str] = set()
        self.owner_public: str | None = None  # the public class of a private method

    @property
    def leaf(self) -> str:
        return re.split(r"[.:]+", self.qual)[-1]


def _pick(func: str, scopes: list[Scope]) -> tuple[Scope | str, Scope | None] | None:
    """The best public scope reaching `func`, and the private scope it calls
    on the way when that scope's file, not the public one's, calls `func`.
    Scopes naming the function itself (or a helper named after it) come
    before scopes reaching it only through a helper's body; direct callers
    before private callers followed to their callers in the same file, before
    a private method's public class, before callers in other files."""
    for attr in ("strong", "refs"):
        picked = _pick_in(func, scopes, attr)
        if picked:
            return picked
    return None


def _pick_in(func, scopes, attr):
    direct = [s for s in scopes if func in getattr(s, attr)]
    if not direct:
        return None
    public = [s for s in direct if s.public]
    if public:
        return _best(func, public), None
    by_file = defaultdict(list)
    for s in scopes:
        by_file[s.path].append(s)
    for same_file in (True, False):
        if not same_file:
            for s in direct:
                if s.owner_public:
                    return s.owner_public, s
        parent: dict[int, Scope] = {}
        frontier = direct
        seen = set(id(s) for s in direct)
        for _ in range(4):
            nxt = []
            for s in frontier:
                pool = by_file[s.path] if same_file else scopes
                for other in pool:
                    if id(other) not in seen and s.leaf in other.names:
                        seen.add(id(other))
                        parent[id(other)] = s
                        nxt.append(other)
            public = [s for s in nxt if s.public]
            if public:
                best = _best(func, public)
                hop = parent[id(best)]
                return best, (None if func in _file_refs(best, scopes) else hop)
            if not nxt:
                break
            frontier = nxt
    return None


def _best(func: str, scopes: list[Scope]) -> Scope:
    return max(scopes, key=lambda s: (_similarity(func, s.leaf), -len(s.public), -s.line))


def _file_refs(scope: Scope, scopes: list[Scope]) -> set[str]:
    return set().union(*(s.refs for s in scopes if s.path == scope.path))


def _similarity(func: str, leaf: str) -> int:
    words = set(func.removeprefix("sw_").split("_"))
    leaf_words = set(re.sub(r"([a-z])([A-Z])", r"\1_\2", leaf).lower().strip("_").split("_"))
    return len(words & leaf_words) * 2 - len(leaf_words - words)


def _strong(binding: scan.Binding, attrs) -> set[str]:
    out = set()
    for a in attrs:
        if a in binding.known:
            out.add(a)
        for f in binding.helpers.get(a, ()):
            if set(a.split("_")) <= set(f.removeprefix("sw_").split("_")):
                out.add(f)
    return out


# ---------------------------------------------------------------------------
# Python


def python_exports() -> dict[tuple[str, str], str]:
    pkg = scan.PYTHON_PACKAGE
    exports: dict[tuple[str, str], str] = {}
    for init, prefix in ((pkg / "carriers/__init__.py", "strideweave.carriers"), (pkg / "__init__.py", "strideweave")):
        base = "carriers" if "carriers" in prefix else ""
        for node in ast.walk(ast.parse(init.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                module = (node.module or "")
                if base and node.level == 1:
                    module = f"{base}.{module}"
                for alias in node.names:
                    exports[(module, alias.name)] = f"{prefix}.{alias.asname or alias.name}"
    for path in pkg.rglob("*.py"):
        mod = _py_module(path)
        if mod == "":
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.Assign):
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            exports.setdefault((mod, t.id), f"strideweave.{t.id}")
        elif not any(part.startswith("_") for part in mod.split(".")):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                    exports.setdefault((mod, node.name), f"strideweave.{mod}.{node.name}")
    return exports


def _py_module(path: Path) -> str:
    rel = path.relative_to(scan.PYTHON_PACKAGE).with_suffix("")
    parts = rel.parts[:-1] if rel.parts[-1] == "__init__" else rel.parts
    return ".".join(parts)


def python_attached(exports) -> dict[tuple[str, str], str]:
    """Module functions a module installs on an exported class
    (`Tensor.__dlpack__ = f`, or `T = Tensor; T.add_, T.sub_ = add_, sub_`):
    (module, function) -> the public method name."""
    attached = {}
    for path in scan.PYTHON_PACKAGE.rglob("*.py"):
        mod = _py_module(path)
        tree = ast.parse(path.read_text())
        classes = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    classes[alias.asname or alias.name] = alias.name
            elif isinstance(node, ast.ClassDef):
                classes[node.name] = node.name
        public_classes = {}
        for local, name in classes.items():
            for (m, n), pub in exports.items():
                if n == name and pub.count(".") >= 1 and name[:1].isupper():
                    public_classes.setdefault(local, pub)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Name) \
                    and isinstance(node.targets[0], ast.Name) and node.value.id in public_classes:
                public_classes[node.targets[0].id] = public_classes[node.value.id]
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:
                pairs = []
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs = list(zip(target.elts, node.value.elts))
                else:
                    pairs = [(target, node.value)]
                for t, v in pairs:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                            and t.value.id in public_classes:
                        if isinstance(v, ast.Name):
                            attached.setdefault((mod, v.id), f"{public_classes[t.value.id]}.{t.attr}")
                        elif isinstance(v, ast.Attribute):
                            attached.setdefault(("*", v.attr), f"{public_classes[t.value.id]}.{t.attr}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                    and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in public_classes:
                loop = [n for n in ast.walk(tree) if isinstance(n, ast.For) and node in ast.walk(n)]
                if loop and isinstance(loop[0].iter, ast.Tuple):
                    for e in loop[0].iter.elts:
                        if isinstance(e, ast.Name):
                            attached.setdefault((mod, e.id), f"{public_classes[node.args[0].id]}.{e.id}")
    return attached


def python_scopes(binding: scan.Binding) -> list[Scope]:
    exports = python_exports()
    attached = python_attached(exports)
    scopes = []
    for path in binding.files:
        text = path.read_text()
        mod = _py_module(path)
        tree = ast.parse(text)
        aliases = {"native", "_native"} | set(re.findall(r"\bimport\s+_?native\s+as\s+(\w+)", text))

        def collect(node, scope):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute):
                    scope.names.add(sub.attr)
                    if isinstance(sub.value, ast.Name) and sub.value.id in aliases:
                        scope.refs |= binding._resolve([sub.attr])
                        scope.strong |= _strong(binding, [sub.attr])
                elif isinstance(sub, ast.Name):
                    scope.names.add(sub.id)

        def public_name(top: str, member: str | None) -> str | None:
            if member is None and ((mod, top) in attached or ("*", top) in attached):
                return attached.get((mod, top)) or attached[("*", top)]
            base = exports.get((mod, top))
            if base is None:
                return None
            if member is None:
                return base
            if member.startswith("_") and not (member.startswith("__") and member.endswith("__")):
                return None
            return f"{base}.{member}"

        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                s = Scope(path, node.name, public_name(node.name, None), node.lineno)
                collect(node, s)
                scopes.append(s)
            elif isinstance(node, ast.ClassDef):
                rest = Scope(path, node.name, public_name(node.name, None), node.lineno)
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        s = Scope(path, f"{node.name}.{item.name}", public_name(node.name, item.name), item.lineno)
                        s.owner_public = public_name(node.name, None)
                        collect(item, s)
                        scopes.append(s)
                    elif isinstance(item, ast.Assign) and isinstance(item.targets[0], ast.Name):
                        member = item.targets[0].id
                        s = Scope(path, f"{node.name}.{member}", public_name(node.name, member), item.lineno)
                        collect(item, s)
                        scopes.append(s)
                    else:
                        collect(item, rest)
                scopes.append(rest)
            else:
                targets = []
                if isinstance(node, ast.Assign):
                    targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    targets = [node.target.id]
                name = targets[0] if targets else "<module>"
                s = Scope(path, name, public_name(name, None) if targets else None, node.lineno)
                collect(node, s)
                scopes.append(s)
    for s in scopes:
        s.private = ".".join(p for p in ("strideweave", _py_module(s.path), s.qual) if p)
    return scopes


# ---------------------------------------------------------------------------
# Java

_JAVA_KEYWORDS = {"if", "for", "while", "switch", "catch", "synchronized", "try", "return", "new", "else", "do"}


def java_scopes(binding: scan.Binding) -> list[Scope]:
    scopes = []
    for path in binding.files:
        code = scan.strip_c_comments(path.read_text())
        # stack entries: (kind, name, public, depth)
        stack: list[tuple[str, str, bool, int]] = []
        current: Scope | None = None
        method_depth = None
        depth = 0
        stmt_start = 0
        i = 0
        while i < len(code):
            c = code[i]
            if c == "{":
                head = code[stmt_start:i]
                depth += 1
                m_cls = re.search(r"\b(class|interface|enum|record)\s+(\w+)[^{]*$", head)
                m_meth = re.search(r"([\w<>\[\], ?.]*)\s\b(\w+)\s*\(([^()]|\([^()]*\))*\)\s*(throws [\w., ]+)?\s*$", head)
                if current is None and m_cls:
                    public = bool(re.search(r"\bpublic\b", head)) and all(p for _, _, p, _ in stack)
                    stack.append(("class", m_cls.group(2), public, depth))
                elif current is None and stack and m_meth and m_meth.group(2) not in _JAVA_KEYWORDS \
                        and not re.search(r"\bnew\s+[\w.<>]+\s*\([^)]*\)\s*$", head):
                    cls = ".".join(n for _, n, _, _ in stack)
                    public = bool(re.search(r"\b(public|protected)\b", head)) and all(p for _, _, p, _ in stack)
                    name = m_meth.group(2)
                    qual = f"{cls}.{name}"
                    current = Scope(path, qual, f"org.strideweave.{qual}" if public else None,
                                    code.count("\n", 0, i) + 1)
                    current.start = i
                    if all(p for _, _, p, _ in stack):
                        current.owner_public = f"org.strideweave.{cls}"
                    method_depth = depth
                    scopes.append(current)
                stmt_start = i + 1
            elif c == "}":
                if current is not None and depth == method_depth:
                    current = None
                    method_depth = None
                if stack and stack[-1][3] == depth:
                    stack.pop()
                depth -= 1
                stmt_start = i + 1
            elif c == ";":
                stmt_start = i + 1
            i += 1
        # Second pass: refs and names per method, by line ranges.
        _fill_ranges(code, [s for s in scopes if s.path == path], binding)
    for s in scopes:
        s.private = f"org.strideweave.{s.qual}"
    return scopes


def _fill_ranges(code, scopes, binding):
    for s in scopes:
        text = code[s.start:scan._matching_brace(code, s.start)]
        s.refs = binding.refs_in_text(text)
        s.strong = _strong(binding, re.findall(r"\b(?:Native|NativeJNI)\s*(?:\.|::)\s*(\w+)", text))
        s.names = set(re.findall(r"\b(\w+)\b", text)) - {s.leaf}


# ---------------------------------------------------------------------------
# Rust


def rust_exports() -> dict[str, str]:
    """Item name -> public path."""
    lib = scan.strip_c_comments((scan.RUST_SOURCES / "lib.rs").read_text())
    exports = {}
    for m in re.finditer(r"pub use (\w+)::\{?([^;}]*)\}?;", lib):
        for name in re.split(r"\s*,\s*", m.group(2).strip()):
            if name:
                exports[name] = f"strideweave::{name}"
    if re.search(r"pub mod testing\b", lib):
        test = scan.strip_c_comments((scan.RUST_SOURCES / "testing.rs").read_text())
        for m in re.finditer(r"pub (?:fn|struct|enum|trait)\s+(\w+)", test):
            exports.setdefault(m.group(1), f"strideweave::testing::{m.group(1)}")
    return exports


def rust_scopes(binding: scan.Binding) -> list[Scope]:
    exports = rust_exports()
    scopes = []
    for path in binding.files:
        code = scan.strip_c_comments(path.read_text())
        # handle!(Name, sys::raw, retain, release)
        for m in re.finditer(r"\bhandle!\(\s*(\w+)\s*,\s*[\w:]+\s*,\s*(sw_\w+)\s*,\s*(sw_\w+)\s*,?\s*\)", code):
            name, retain, release = m.groups()
            line = code.count("\n", 0, m.start()) + 1
            pub = exports.get(name)
            for func, method in ((retain, "clone"), (release, "drop")):
                s = Scope(path, f"{name}::{method}", f"{pub}::{method}" if pub else None, line)
                s.refs = s.strong = {func} & binding.known
                scopes.append(s)
        depth = 0
        stmt_start = 0
        impl_stack: list[tuple[str, int]] = []
        current = None
        method_depth = None
        starts = []
        for i, c in enumerate(code):
            if c == "{":
                head = code[stmt_start:i]
                depth += 1
                m_impl = re.search(r"\bimpl\b(?:<[^{]*?>)?\s+(?:([\w:<>']+)\s+for\s+)?([\w:]+)(?:<[^{]*>)?[^{]*$", head)
                m_fn = re.search(r"\b(pub(?:\([\w ]+\))?\s+)?(?:const\s+)?(?:unsafe\s+)?(?:extern\s+\"C\"\s+)?fn\s+(\w+)", head)
                if current is None and m_fn:
                    owner = impl_stack[-1][0] if impl_stack else None
                    trait = impl_stack[-1][2] if impl_stack else None
                    name = m_fn.group(2)
                    is_pub = (m_fn.group(1) or "").strip() == "pub" or trait is not None
                    if owner:
                        qual = f"{owner}::{name}"
                        pub = exports.get(owner)
                        public = f"{pub}::{name}" if (pub and is_pub) else None
                    else:
                        qual = name
                        public = exports.get(name) if is_pub else None
                    current = Scope(path, qual, public, code.count("\n", 0, i) + 1)
                    method_depth = depth
                    scopes.append(current)
                    starts.append((current, i))
                elif current is None and m_impl:
                    impl_stack.append((m_impl.group(2).split("::")[-1], depth, m_impl.group(1)))
                stmt_start = i + 1
            elif c == "}":
                if current is not None and depth == method_depth:
                    start = [p for s, p in starts if s is current][0]
                    body = code[start:i]
                    current.refs = current.strong = binding.refs_in_text(body)
                    current.names = set(re.findall(r"\b(\w+)\b", body))
                    current = None
                    method_depth = None
                if impl_stack and impl_stack[-1][1] == depth:
                    impl_stack.pop()
                depth -= 1
                stmt_start = i + 1
            elif c == ";":
                stmt_start = i + 1
    for s in scopes:
        s.private = f"strideweave::{s.path.stem}::{s.qual}"
    return scopes


# ---------------------------------------------------------------------------


def detect() -> tuple[list[str], list[str], dict[str, dict[str, str]]]:
    main, testing = scan.all_header_functions()
    known = set(main) | set(testing)
    found: dict[str, dict[str, str]] = {f: {} for f in main + testing}
    bindings = scan.bindings(known)
    for lang, make in (("python", python_scopes), ("java", java_scopes), ("rust", rust_scopes)):
        scopes = make(bindings[lang])
        for func in main + testing:
            if func in PLUMBING:
                continue
            picked = _pick(func, scopes)
            if picked is not None:
                s, via = picked
                name = s if isinstance(s, str) else s.public
                found[func][lang] = name if via is None else f"{name} via {via.private}"
    return main, testing, found


def render(main, testing, entries) -> str:
    out = [
        "# Which function of the C header each binding wraps.",
        "#",
        "# One table per SW_API function of include/strideweave/strideweave.h",
        "# ([functions.*]) and of include/strideweave/strideweave_testing.h",
        "# ([testing.*]). For python, java and rust, the value is either the",
        "# public wrapper that calls the function, or \"omitted: <reason>\".",
        "# tools/parity/check_parity.py checks this file against the header and",
        "# the bindings' sources; see docs/bindings.md.",
        "",
    ]
    for section, names in (("functions", main), ("testing", testing)):
        for name in names:
            out.append(f"[{section}.{name}]")
            for lang in scan.LANGUAGES:
                value = entries.get(name, {}).get(lang, UNREVIEWED)
                out.append(f"{lang} = {_toml_string(value)}")
            out.append("")
    return "\n".join(out)


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fresh", action="store_true", help="ignore the existing manifest")
    parser.add_argument("--stdout", action="store_true", help="print instead of writing bindings/parity.toml")
    args = parser.parse_args()

    main_funcs, testing_funcs, found = detect()
    old: dict[str, dict[str, str]] = {}
    if scan.MANIFEST.exists() and not args.fresh:
        data = tomllib.loads(scan.MANIFEST.read_text())
        for section in ("functions", "testing"):
            old.update(data.get(section, {}))
    entries = {}
    added = unplaced = 0
    for func in main_funcs + testing_funcs:
        entry = {}
        for lang in scan.LANGUAGES:
            kept = old.get(func, {}).get(lang)
            if kept and kept != UNREVIEWED:
                entry[lang] = kept
            elif found[func].get(lang):
                entry[lang] = found[func][lang]
            else:
                entry[lang] = UNREVIEWED
                unplaced += 1
        if func not in old:
            added += 1
        entries[func] = entry
    text = render(main_funcs, testing_funcs, entries)
    if args.stdout:
        sys.stdout.write(text)
    else:
        scan.MANIFEST.write_text(text)
        dropped = sorted(set(old) - set(entries))
        print(f"{scan.MANIFEST.relative_to(scan.ROOT)}: {len(entries)} functions, {added} new, "
              f"{len(dropped)} dropped, {unplaced} entries left 'omitted: unreviewed'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
