"""What the header declares and where each binding calls it.

Shared by build_manifest.py (which writes a first manifest from it) and
check_parity.py (which checks bindings/parity.toml against it). Everything
here reads source text only; nothing is built or imported.

A binding "references" a header function when its sources call it through
the binding's call convention:
  python  `N.sw_x(...)` on the SWIG layer (`from ._lib import native as N`),
          or `N.helper(...)` where `helper` is a function declared in
          bindings/python/native/module.h (which native.i wraps) whose body
          in bindings/python/native/*.c calls sw_x;
  java    `Native.sw_x(...)` or `Native::sw_x` (or NativeJNI), or `Native.helper(...)` where
          `helper` is a function declared in bindings/java/native/module.h
          (which native.i wraps) whose body in bindings/java/native/*.c
          calls sw_x;
  rust    `sw_x` in the code of the safe crate (`sys::sw_x`,
          `t::sw_x` for the testing hooks, or the retain/release pair of a
          `handle!` declaration).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "include/strideweave/strideweave.h"
TESTING_HEADER = ROOT / "include/strideweave/strideweave_testing.h"
MANIFEST = ROOT / "bindings/parity.toml"
LANGUAGES = ("python", "java", "rust")

PYTHON_PACKAGE = ROOT / "bindings/python/strideweave"
PYTHON_NATIVE_I = ROOT / "bindings/python/native.i"
PYTHON_NATIVE_DIR = ROOT / "bindings/python/native"
JAVA_SOURCES = ROOT / "bindings/java/src/main/java"
JAVA_NATIVE_I = ROOT / "bindings/java/native.i"
JAVA_NATIVE_DIR = ROOT / "bindings/java/native"
RUST_SOURCES = ROOT / "bindings/rust/strideweave/src"


def strip_c_comments(text: str) -> str:
    """C/C++/Java/Rust comments and string literals blanked out, keeping
    line breaks so offsets still map to lines."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append('"' + " " * (min(j, n) - i - 1) + '"')
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'\n])'", text[i:i + 4]):
            j = text.find("'", i + 1 + (text[i + 1] == "\\")) + 1
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def header_functions(path: Path) -> list[str]:
    """The SW_API functions of a header, in declaration order."""
    text = strip_c_comments(path.read_text())
    names = []
    for m in re.finditer(r"\bSW_API\b([^;{]*?)\b(sw_\w+)\s*\(", text):
        if m.group(2) not in names:
            names.append(m.group(2))
    return names


def all_header_functions() -> tuple[list[str], list[str]]:
    return header_functions(HEADER), header_functions(TESTING_HEADER)


# ---------------------------------------------------------------------------
# SWIG interface files: the helpers each language module writes in C


def swig_helpers(path: Path, known: set[str]) -> dict[str, set[str]]:
    """Functions an interface file exposes from its %inline blocks, each with
    the header functions its body calls (through the file's static helpers
    too)."""
    text = strip_c_comments(path.read_text())
    bodies: dict[str, str] = {}
    exposed: set[str] = set()
    for block in re.finditer(r"(%inline\s*)?%\{(.*?)%\}", text, re.S):
        inline = bool(block.group(1))
        code = block.group(2)
        for name, static, body in _c_functions(code):
            bodies[name] = bodies.get(name, "") + body
            if inline and not static:
                exposed.add(name)
    return _helper_refs(bodies, exposed, known)


def c_module_helpers(declarations: Path, sources: list[Path], known: set[str]) -> dict[str, set[str]]:
    """Functions a header an interface file %includes declares, defined in
    plain C sources, each with the header functions its body calls (through
    the sources' other functions too)."""
    bodies: dict[str, str] = {}
    for source in sources:
        for name, _static, body in _c_functions(strip_c_comments(source.read_text())):
            bodies[name] = bodies.get(name, "") + body
    header = strip_c_comments(declarations.read_text())
    declared = set(re.findall(r"\b(\w+)\s*\([^;{}()]*\)\s*;", header))
    return _helper_refs(bodies, declared & bodies.keys(), known)


def _helper_refs(bodies: dict[str, str], exposed: set[str], known: set[str]) -> dict[str, set[str]]:
    direct = {name: set(re.findall(r"\b(sw_\w+)\b", body)) & known for name, body in bodies.items()}
    calls = {name: set(re.findall(r"\b(\w+)\s*\(", body)) & bodies.keys() for name, body in bodies.items()}
    # Function pointers passed to a local helper count as calls too.
    for name, body in bodies.items():
        calls[name] |= set(re.findall(r"\b(\w+)\b", body)) & bodies.keys()
    closed: dict[str, set[str]] = {}
    for name in bodies:
        seen, todo, refs = {name}, [name], set()
        while todo:
            cur = todo.pop()
            refs |= direct[cur]
            for callee in calls[cur] - seen:
                seen.add(callee)
                todo.append(callee)
        closed[name] = refs
    return {name: closed[name] for name in exposed}


def python_helpers(known: set[str]) -> dict[str, set[str]]:
    """The helpers of strideweave._native: native/module.h's functions (and
    any %inline function native.i itself defines)."""
    helpers = c_module_helpers(PYTHON_NATIVE_DIR / "module.h", sorted(PYTHON_NATIVE_DIR.glob("*.c")), known)
    helpers.update(swig_helpers(PYTHON_NATIVE_I, known))
    return helpers


def java_helpers(known: set[str]) -> dict[str, set[str]]:
    """The helpers of org.strideweave.Native: native/module.h's functions (and
    any %inline function native.i itself defines)."""
    helpers = c_module_helpers(JAVA_NATIVE_DIR / "module.h", sorted(JAVA_NATIVE_DIR.glob("*.c")), known)
    helpers.update(swig_helpers(JAVA_NATIVE_I, known))
    return helpers


def _c_functions(code: str):
    """(name, is_static, body) of each top-level function definition."""
    depth, i, stmt_start = 0, 0, 0
    while i < len(code):
        c = code[i]
        if c == "{":
            if depth == 0:
                head = code[stmt_start:i]
                m = re.search(r"\b(\w+)\s*\(([^;]*)\)\s*$", head, re.S)
                end = _matching_brace(code, i)
                if m and m.group(1) not in ("if", "for", "while", "switch", "sizeof"):
                    yield m.group(1), bool(re.search(r"\bstatic\b", head)), code[i:end]
                i = end
                stmt_start = i
                continue
            depth += 1
        elif c == ";" and depth == 0:
            stmt_start = i + 1
        elif c == "#" and depth == 0:
            j = code.find("\n", i)
            j = len(code) if j < 0 else j
            while code[j - 1] == "\\" and j < len(code):
                j = code.find("\n", j + 1)
                j = len(code) if j < 0 else j
            i = j
            stmt_start = i
            continue
        i += 1


def _matching_brace(code: str, open_at: int) -> int:
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(code)


# ---------------------------------------------------------------------------
# Per-file references, through each binding's call convention


@dataclass
class Binding:
    language: str
    files: list[Path]
    helpers: dict[str, set[str]] = field(default_factory=dict)
    known: set[str] = field(default_factory=set)

    def refs_in_text(self, text: str, path: Path | None = None) -> set[str]:
        if self.language == "python":
            return self._refs_python(text)
        if self.language == "java":
            return self._refs_java(text)
        return self._refs_rust(text)

    def _resolve(self, names) -> set[str]:
        out = set()
        for name in names:
            if name in self.known:
                out.add(name)
            out |= self.helpers.get(name, set())
        return out

    def _refs_python(self, text: str) -> set[str]:
        aliases = {"native", "_native"} | set(re.findall(r"\bimport\s+_?native\s+as\s+(\w+)", text))
        code = python_code_only(text)
        pattern = r"\b(?:%s)\.(\w+)" % "|".join(sorted(map(re.escape, aliases)))
        return self._resolve(re.findall(pattern, code))

    def _refs_java(self, text: str) -> set[str]:
        code = strip_c_comments(text)
        return self._resolve(re.findall(r"\b(?:Native|NativeJNI)\s*(?:\.|::)\s*(\w+)", code))

    def _refs_rust(self, text: str) -> set[str]:
        code = strip_c_comments(text)
        return set(re.findall(r"\b(sw_\w+)\b", code)) & self.known

    def file_refs(self) -> dict[Path, set[str]]:
        return {p: self.refs_in_text(p.read_text(), p) for p in self.files}


def python_code_only(text: str) -> str:
    """Python source with comments and string literals (docstrings
    included) blanked out."""
    import io
    import tokenize

    lines = text.splitlines(keepends=True)
    blank = [list(line) for line in lines]
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.COMMENT, tokenize.STRING):
                (r0, c0), (r1, c1) = tok.start, tok.end
                for r in range(r0, r1 + 1):
                    row = blank[r - 1]
                    a = c0 if r == r0 else 0
                    b = c1 if r == r1 else len(row)
                    for k in range(a, b):
                        if row[k] != "\n":
                            row[k] = " "
    except (tokenize.TokenError, IndentationError):
        return text
    return "".join("".join(row) for row in blank)


def bindings(known: set[str]) -> dict[str, Binding]:
    return {
        "python": Binding("python", sorted(PYTHON_PACKAGE.rglob("*.py")), python_helpers(known), known),
        "java": Binding("java", sorted(JAVA_SOURCES.rglob("*.java")), java_helpers(known), known),
        "rust": Binding("rust", sorted(RUST_SOURCES.rglob("*.rs")), {}, known),
    }
