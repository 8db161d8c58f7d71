#!/usr/bin/env python3
"""Checks that the SWIG interface files hold typemaps and directives only.

The bindings' hand-written native code lives in C files the compiler sees
(bindings/python/native/*.c, bindings/java/native/*.c), declared in a header
the interface file %includes (native/module.h); an interface file keeps what
only SWIG can say. In every *.i file of the repository this fails on:

  - an %inline block, and any %header, %wrapper, %runtime, %begin or bare
    %{ ... %} block holding more than preprocessor lines (#include, #define)
    and comments;
  - an %extend or %native directive;
  - a brace block outside a typemap (a function body SWIG would see);
  - a C function definition anywhere, typemap and %init code included.

Code inside %typemap bodies, the statements of %init and the foreign-language
text of %pragma (Java's jniclasscode, say) is allowed: typemaps are what the
interface file is for.

Usage: check_interface_files.py [ROOT | FILE.i ...]; --self-test checks the
checker on examples of each rule. Prints one line per finding and exits 1
when there is one.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DECLARATION_ONLY = {"%header", "%wrapper", "%runtime", "%begin", ""}
FORBIDDEN_DIRECTIVES = ("%inline", "%extend", "%native")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "else", "do", "case", "defined"}
# A C function definition: a return type and a name at the start of a line,
# a parameter list, then its body.
FUNCTION_DEF = re.compile(
    r"(?m)^[ \t]*((?:[A-Za-z_]\w*[ \t\*]+)+\**)([A-Za-z_]\w*)[ \t]*\(([^;{}()]|\([^;{}()]*\))*\)[ \t\n]*\{")


def blank_out(text: str) -> str:
    """The text with comments and string and character literals replaced by
    spaces (newlines kept, so offsets and line numbers still hold)."""
    out = list(text)
    i, n = 0, len(text)

    def wipe(a: int, b: int) -> None:
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            wipe(i, j)
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
        elif text[i] in "\"'":
            quote, j = text[i], i + 1
            while j < n and text[j] != quote and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            wipe(i + 1, j - 1)
            i = j
        else:
            i += 1
    return "".join(out)


def owner(code: str, at: int) -> str:
    """The directive a block opening at `at` belongs to: the first word of
    the text before it on its line or, for a block alone on its line, of the
    previous non-blank line when that is a directive still waiting for its
    body ("" for a block of its own)."""
    line_start = code.rfind("\n", 0, at) + 1
    head = code[line_start:at].strip()
    if not head:
        before = code[:line_start].rstrip()
        head = before[before.rfind("\n") + 1:].strip() if before else ""
        if not head.startswith("%") or head.endswith(("%}", "}", ";", '"', "'", "%enddef")):
            head = ""
    word = re.match(r"%?\w*", head)
    return word.group(0) if word else ""


def function_definitions(code: str) -> list[tuple[int, str]]:
    found = []
    for m in FUNCTION_DEF.finditer(code):
        name = m.group(2)
        words = re.findall(r"\w+", m.group(1))
        if name in KEYWORDS or not words or words[-1] in KEYWORDS or words[0] in KEYWORDS:
            continue
        found.append((m.start(2), name))
    return found


def check_text(text: str, label: str) -> list[str]:
    code = blank_out(text)
    problems: list[str] = []

    def line(at: int) -> int:
        return code.count("\n", 0, at) + 1

    def report(at: int, what: str) -> None:
        problems.append(f"{label}:{line(at)}: {what}; hand-written C goes in the binding's native/*.c, "
                        f"declared in native/module.h (docs/architecture.md)")

    for m in re.finditer(r"(?<![\w%])(%inline|%extend|%native)\b", code):
        report(m.start(), f"{m.group(1)} directive")
    i, n, depth = 0, len(code), 0
    while i < n:
        if code.startswith("%{", i):
            end = code.find("%}", i + 2)
            end = n if end < 0 else end
            body_at, body = i + 2, code[i + 2:end]
            kind = owner(code, i)
            if kind in FORBIDDEN_DIRECTIVES:
                pass  # reported above
            elif kind == "%typemap" or kind == "%init":
                for at, name in function_definitions(body):
                    report(body_at + at, f"function {name} defined in {kind} code")
            elif kind == "%pragma":
                pass  # the target language's own text
            else:
                for k, text_line in enumerate(body.split("\n")):
                    stripped = text_line.strip()
                    if stripped and not stripped.startswith("#"):
                        at = body_at + sum(len(x) + 1 for x in body.split("\n")[:k])
                        report(at, f"C code in a {kind or 'bare'} %{{ %}} block (only preprocessor lines belong there)")
                        break
            i = end + 2
        elif code[i] == "{":
            j, depth = i, 0
            while j < n:
                if code[j] == "{":
                    depth += 1
                elif code[j] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            kind = owner(code, i)
            if kind == "%typemap":
                for at, name in function_definitions(code[i:j + 1]):
                    report(i + at, f"function {name} defined in typemap code")
            elif kind not in FORBIDDEN_DIRECTIVES:
                report(i, "a brace block outside a typemap")
            i = j + 1
        else:
            i += 1
    return problems


def interface_files(root: Path) -> list[Path]:
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "*.i"], capture_output=True, text=True,
                                check=True).stdout.split()
        return [root / name for name in listed]
    except (OSError, subprocess.CalledProcessError):
        return sorted(p for p in root.rglob("*.i") if not any(part.startswith("build") for part in p.parts))


SELF_TEST = {
    # (interface text, number of findings)
    "typemaps": ("%module m\n%{\n#include \"module.h\"\n%}\n"
                 "%typemap(out) int %{ if ($1) { fail(); } %}\n"
                 "%typemap(in) long (long v) { if (f($input, &v) < 0) SWIG_fail; $1 = v; }\n"
                 "%define SW(T)\n%typemap(in) T* %{ $1 = 0; %}\n%enddef\n"
                 "%pragma(java) jniclasscode = %{\n  static { load(); }\n  private NativeJNI() {}\n%}\n"
                 "%init %{\n  register_all(1);\n%}\n"
                 "/* int f(void) { return 0; } */\n%include \"native/module.h\"\nint g(int x);\n", 0),
    "inline": ("%module m\n%inline %{\nint f(void) { return 1; }\n%}\n", 1),
    "bare block": ("%module m\n%{\n#include <x.h>\nstatic int f(void) {\n  return 1;\n}\n%}\n", 1),
    "header block": ("%header %{\nstatic int x;\n%}\n", 1),
    "function in typemap": ("%typemap(in) int %{\nstatic int helper(int a) { return a; }\n$1 = helper($input);\n%}\n", 1),
    "function in init": ("%init %{\nvoid setup(void) {\n}\n%}\n", 1),
    "bare function": ("%module m\nint f(int x) {\n  return x;\n}\n", 1),
    "extend": ("%extend point {\n  int norm() { return 0; }\n}\n", 1),
}


def self_test() -> int:
    bad = 0
    for name, (text, expected) in SELF_TEST.items():
        got = check_text(text, name)
        if len(got) != expected:
            bad += 1
            print(f"self-test {name}: {len(got)} findings, expected {expected}: {got}")
    print(f"self-test: {len(SELF_TEST) - bad} of {len(SELF_TEST)} examples as expected")
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--self-test"]:
        return self_test()
    if argv and all(a.endswith(".i") for a in argv):
        files, root = [Path(a) for a in argv], Path.cwd()
    else:
        root = Path(argv[0]).resolve() if argv else ROOT
        files = interface_files(root)
    if not files:
        print("interface files: none found")
        return 1
    problems: list[str] = []
    for path in files:
        try:
            label = str(path.resolve().relative_to(root))
        except ValueError:
            label = str(path)
        problems += check_text(path.read_text(), label)
    for problem in problems:
        print(problem)
    print(f"interface files: {len(files)} checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
