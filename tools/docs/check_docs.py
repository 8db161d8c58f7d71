#!/usr/bin/env python3
"""Compiles and runs the code blocks of the documentation.

Reads README.md and docs/*.md, takes every fenced block whose language is c,
python, java or rust, and checks it:

  c       compiled with the build tree's pkg-config file
          (PKG_CONFIG_PATH=build/meson-uninstalled pkg-config --cflags --libs
          strideweave) and -Wl,-rpath to build/runtime, then run;
  python  run with build/bindings/python on PYTHONPATH;
  java    compiled with javac against the Maven build's jar
          (bindings/java/target/strideweave-<version>.jar) and run with java;
          without the jar every java block is skipped ("SKIP: java docs: no
          jar");
  rust    compiled with rustc against the strideweave crate that cargo builds
          in bindings/rust (CARGO_TARGET_DIR, default bindings/rust/target:
          cargo only checks that it is up to date), linked with the build
          tree's library, then run.

Each program runs in a scratch directory of its own (files it writes go
there), with a time limit.

What a block is, and what it promises, is written in the page itself:

  * By default a block is a whole program: C and Rust with a main function,
    Java a class with a main method (a public class is written to a file of
    its name), Python a script.

  * An HTML comment on the line right before the opening fence gives a
    directive (several may share one comment, separated by ';'):

      <!-- docs-check: skip (REASON) -->
          The block is not checked; the report says why. For blocks that only
          show a declaration or a signature.

      <!-- docs-check: harness NAME -->
          The block is a whole program with one line holding the comment
          "@snippet" ("/* @snippet */", "// @snippet", "# @snippet"), in
          which the fragments of NAME run. It is checked through them, not
          on its own (it may use names its fragments define).

      <!-- docs-check: fragment of NAME -->
          The block is a fragment: the program checked is harness NAME with
          the line holding "@snippet" replaced by the block. The harness is a
          block of the same language on the same page, shown to the reader
          (a page usually puts it in a <details> element after the text).

      <!-- docs-check: continues -->
          The block continues the previous checked block of the same language
          on the page: the program checked is that block's program followed
          by this block (Python; for sessions that build on each other).

      <!-- docs-check: excerpt of PATH -->
          The block is an excerpt of the program PATH (relative to the
          repository), which the test command builds and runs: every line of
          code of the block must appear in PATH, in the same order. Lines are
          compared without their comments (/* */ on one line, //, #) and
          with white space collapsed; lines that are only a comment, and
          blank lines, are not looked for.

  * Output: when the first thing after the closing fence, blank lines and at
    most one line of text ending with ':' (such as "It prints:") aside, is a
    ```text or ```console block, the program's standard output must equal
    that block exactly.

Prints one line per block, "docs ok FILE:LINE LANG", "docs FAILED FILE:LINE
LANG: why" followed by the compiler's or the program's output, or "docs SKIP
FILE:LINE LANG: reason", and a closing line "docs: N passed, N failed, N
skipped". Exits non-zero when a block failed.

Options: --lang c,python,java,rust (the languages to check), --file PATH
(repeatable: only these pages), --keep (leave the scratch directories),
-v (print each program's output).
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LANGS = ("c", "python", "java", "rust")
OUTPUT_LANGS = ("text", "console")
TIMEOUT = 300

FENCE = re.compile(r"^(\s*)(```+)\s*([A-Za-z0-9_+\-.,]*)\s*$")
DIRECTIVE = re.compile(r"^\s*<!--\s*docs-check:\s*(.*?)\s*-->\s*$")


class Block:
    def __init__(self, path, line, lang, info, text):
        self.path, self.line, self.lang, self.info, self.text = path, line, lang, info, text
        self.directives = []
        self.expected = None  # promised standard output, or None

    @property
    def where(self):
        return f"{os.path.relpath(self.path, ROOT)}:{self.line}"


def parse_page(path):
    """The fenced blocks of a page, with their directives and promised output."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, info = m.group(1), m.group(2), m.group(3)
        start = i
        body = []
        i += 1
        while i < len(lines) and not (lines[i].strip() == ticks and lines[i].startswith(indent)):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        lang = info.split(",")[0].lower()
        block = Block(path, start + 1, lang, info, "\n".join(body) + "\n")
        if start > 0:
            d = DIRECTIVE.match(lines[start - 1])
            if d:
                block.directives = [part.strip() for part in d.group(1).split(";") if part.strip()]
        block.end = i  # index of the line after the closing fence
        blocks.append(block)
    # Promised output: a text/console block right after a code block.
    for k, block in enumerate(blocks):
        if block.lang not in LANGS or k + 1 == len(blocks):
            continue
        nxt = blocks[k + 1]
        if nxt.lang not in OUTPUT_LANGS:
            continue
        between = [l.strip() for l in lines[block.end:nxt.line - 1] if l.strip()]
        if not between or (len(between) == 1 and between[0].endswith(":")):
            block.expected = nxt.text
    return blocks


def directive(block, name):
    """The argument of directive `name` of a block, True for a bare one, or None."""
    for d in block.directives:
        if d == name:
            return True
        if d.startswith(name + " "):
            return d[len(name):].strip()
    return None


def page_programs(path, langs):
    """What each code block of a page in one of `langs` asks to be checked:
    (block, "program", the whole program it is checked as: a harness with
    the fragment in place, or the blocks it continues then it), (block,
    "skip", reason), (block, "excerpt", path) or (block, "fail", why).
    Harness blocks are checked through their fragments only."""
    blocks = parse_page(path)
    harnesses = {}
    for b in blocks:
        h = directive(b, "harness")
        if isinstance(h, str):
            harnesses[(b.lang, h)] = b
    last_program = {}
    for b in blocks:
        if b.lang not in LANGS or b.lang not in langs:
            continue
        if isinstance(directive(b, "harness"), str):
            continue
        reason = directive(b, "skip")
        if reason is not None:
            yield b, "skip", reason.strip("()") if isinstance(reason, str) else "marked skip"
            continue
        excerpt = directive(b, "excerpt of")
        if isinstance(excerpt, str):
            yield b, "excerpt", excerpt
            continue
        program = b.text
        of = directive(b, "fragment of")
        if isinstance(of, str):
            h = harnesses.get((b.lang, of))
            if h is None:
                yield b, "fail", f"no {b.lang} harness '{of}' on the page"
                continue
            lines = h.text.split("\n")
            marks = [k for k, l in enumerate(lines) if "@snippet" in l]
            if len(marks) != 1:
                yield b, "fail", f"harness '{of}' has {len(marks)} '@snippet' lines, not one"
                continue
            indent = re.match(r"\s*", lines[marks[0]]).group(0)
            snippet = [indent + l if l else l for l in b.text.rstrip("\n").split("\n")]
            program = "\n".join(lines[:marks[0]] + snippet + lines[marks[0] + 1:])
        elif directive(b, "continues") is True:
            if b.lang not in last_program:
                yield b, "fail", "continues, but no block of its language comes before it"
                continue
            program = last_program[b.lang] + b.text
        last_program[b.lang] = program
        yield b, "program", program


def run(cmd, cwd, env=None, timeout=TIMEOUT):
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout} s: {' '.join(cmd)}"
    except OSError as e:
        return 127, "", f"{cmd[0]}: {e}"
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


class Checker:
    def __init__(self, args):
        self.args = args
        self.build = os.path.join(ROOT, "build")
        self.passed = self.failed = self.skipped = 0
        self.scratch = tempfile.mkdtemp(prefix="docs-check.")
        self.counter = 0
        self._c_flags = None
        self._rust = None
        self._jar = None

    # ---- reporting ------------------------------------------------------

    def ok(self, block, note=""):
        self.passed += 1
        print(f"docs ok {block.where} {block.lang}{note}", flush=True)

    def fail(self, block, why, detail=""):
        self.failed += 1
        print(f"docs FAILED {block.where} {block.lang}: {why}", flush=True)
        if detail.strip():
            for l in detail.rstrip().split("\n")[-60:]:
                print(f"    {l}")
        sys.stdout.flush()

    def skip(self, block, reason):
        self.skipped += 1
        print(f"docs SKIP {block.where} {block.lang}: {reason}", flush=True)

    def workdir(self):
        self.counter += 1
        d = os.path.join(self.scratch, f"b{self.counter}")
        os.makedirs(d)
        return d

    # ---- toolchains -----------------------------------------------------

    def c_flags(self):
        if self._c_flags is None:
            env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(self.build, "meson-uninstalled"))
            code, out, err = run(["pkg-config", "--cflags", "--libs", "strideweave"], ROOT, env)
            if code != 0:
                self._c_flags = ("error", err or out)
            else:
                self._c_flags = ("ok", out.split() + [f"-Wl,-rpath,{os.path.join(self.build, 'runtime')}"])
        return self._c_flags

    def rust(self):
        """(status, rustc arguments or the reason)."""
        if self._rust is not None:
            return self._rust
        # As the test command: rustup's toolchain first; rustc from beside cargo,
        # so that it reads the metadata cargo's rustc wrote.
        path = os.pathsep.join([os.path.expanduser("~/.cargo/bin"), os.environ.get("PATH", "")])
        cargo = shutil.which("cargo", path=path)
        rustc = cargo and os.path.join(os.path.dirname(cargo), "rustc")
        if not cargo or not os.path.exists(rustc):
            self._rust = ("skip", "no cargo")
            return self._rust
        crate_dir = os.path.join(ROOT, "bindings", "rust")
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(self.build, "meson-uninstalled"),
                   LD_LIBRARY_PATH=os.path.join(self.build, "runtime"))
        env.setdefault("CARGO_TARGET_DIR", os.path.join(crate_dir, "target"))
        code, out, err = run([cargo, "build", "--locked", "--all-features", "--lib", "-p", "strideweave",
                              "--message-format=json"], crate_dir, env, timeout=1800)
        if code != 0:
            self._rust = ("error", "cargo build of bindings/rust/strideweave failed:\n" + err[-4000:])
            return self._rust
        rlib = None
        for line in out.splitlines():
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("reason") == "compiler-artifact" and msg.get("target", {}).get("name") == "strideweave":
                rlib = next((f for f in msg.get("filenames", []) if f.endswith(".rlib")), rlib)
        if not rlib:
            self._rust = ("error", "cargo reported no rlib of strideweave")
            return self._rust
        deps = os.path.dirname(rlib)
        if os.path.basename(deps) != "deps":  # the copy cargo puts beside deps/
            deps = os.path.join(deps, "deps")
        runtime = os.path.join(self.build, "runtime")
        self._rust = ("ok", [rustc, "--edition", "2021", "-L", f"dependency={deps}", "--extern", f"strideweave={rlib}",
                             "-L", f"native={runtime}", "-C", f"link-arg=-Wl,-rpath,{runtime}"])
        return self._rust

    def jar(self):
        if self._jar is None:
            jars = [j for j in sorted(glob.glob(os.path.join(ROOT, "bindings", "java", "target", "strideweave-*.jar")))
                    if not re.search(r"-(sources|javadoc|tests)\.jar$", j)]
            have = shutil.which("javac") and shutil.which("java")
            self._jar = jars[-1] if jars and have else ""
            if not self._jar:
                print("SKIP: java docs: no jar" + ("" if have else " (no javac/java)"), flush=True)
        return self._jar

    # ---- programs -------------------------------------------------------

    def finish(self, block, code, out, err, what):
        if code != 0:
            self.fail(block, f"{what} exited with status {code}", out + err)
            return
        if self.args.verbose and out:
            print("".join(f"    | {l}\n" for l in out.rstrip("\n").split("\n")), end="")
        if block.expected is not None and out != block.expected:
            self.fail(block, "the output differs from what the page promises",
                      "expected:\n" + block.expected + "got:\n" + out + (err and "stderr:\n" + err))
            return
        self.ok(block, " (output as promised)" if block.expected is not None else "")

    def check_c(self, block, program):
        status, flags = self.c_flags()
        if status != "ok":
            self.fail(block, "pkg-config found no strideweave in build/meson-uninstalled", flags)
            return
        d = self.workdir()
        src = os.path.join(d, "doc.c")
        with open(src, "w") as f:
            f.write(program)
        cc = os.environ.get("CC", "cc")
        code, out, err = run([cc, "-std=c11", "-Wall", "-Werror", "-o", "doc", src] + flags, d)
        if code != 0:
            self.fail(block, "does not compile", out + err)
            return
        code, out, err = run([os.path.join(d, "doc")], d)
        self.finish(block, code, out, err, "the program")

    def check_python(self, block, program):
        d = self.workdir()
        src = os.path.join(d, "doc.py")
        with open(src, "w") as f:
            f.write(program)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [os.path.join(self.build, "bindings", "python")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        code, out, err = run([sys.executable, src], d, env)
        self.finish(block, code, out, err, "the script")

    def check_java(self, block, program):
        jar = self.jar()
        if not jar:
            self.skip(block, "no jar (bindings/java/target/strideweave-*.jar)")
            return
        m = re.search(r"^\s*(?:public\s+)?(?:final\s+)?class\s+(\w+)", program, re.M)
        if not m:
            self.fail(block, "not a whole class (no class declaration)")
            return
        name = m.group(1)
        pkg = re.search(r"^\s*package\s+([\w.]+)\s*;", program, re.M)
        d = self.workdir()
        src = os.path.join(d, name + ".java")
        with open(src, "w") as f:
            f.write(program)
        classes = os.path.join(d, "classes")
        code, out, err = run(["javac", "-d", classes, "-cp", jar, src], d)
        if code != 0:
            self.fail(block, "does not compile", out + err)
            return
        main = (pkg.group(1) + "." if pkg else "") + name
        code, out, err = run(["java", "--enable-native-access=ALL-UNNAMED", "-cp", jar + os.pathsep + classes, main], d)
        self.finish(block, code, out, err, "the program")

    def check_rust(self, block, program):
        status, rustc = self.rust()
        if status == "skip":
            self.skip(block, rustc)
            return
        if status != "ok":
            self.fail(block, "no strideweave crate to compile against", rustc)
            return
        d = self.workdir()
        src = os.path.join(d, "doc.rs")
        with open(src, "w") as f:
            f.write(program)
        code, out, err = run(rustc + ["-o", os.path.join(d, "doc"), src], d)
        if code != 0:
            self.fail(block, "does not compile", out + err)
            return
        code, out, err = run([os.path.join(d, "doc")], d)
        self.finish(block, code, out, err, "the program")

    @staticmethod
    def code_line(line, lang):
        line = re.sub(r"/\*.*?\*/", " ", line)
        line = re.sub(r"//.*$" if lang != "python" else r"#.*$", "", line)
        if lang != "python" and line.strip().startswith(("/*", "*")):
            line = ""
        return " ".join(line.split())

    def check_excerpt(self, block, path):
        full = os.path.join(ROOT, path)
        try:
            with open(full, encoding="utf-8") as f:
                source = [self.code_line(l, block.lang) for l in f.read().split("\n")]
        except OSError as e:
            self.fail(block, f"excerpt of {path}: {e.strerror}")
            return
        at = 0
        for line in block.text.split("\n"):
            s = self.code_line(line, block.lang)
            if not s:
                continue
            try:
                at = source.index(s, at) + 1
            except ValueError:
                self.fail(block, f"line not found in {path} (in order): {line.strip()}")
                return
        self.ok(block, f" (excerpt of {path})")

    # ---- pages ----------------------------------------------------------

    def check_page(self, path):
        for b, what, arg in page_programs(path, self.args.langs):
            if what == "skip":
                self.skip(b, arg)
            elif what == "fail":
                self.fail(b, arg)
            elif what == "excerpt":
                self.check_excerpt(b, arg)
            else:
                getattr(self, "check_" + b.lang)(b, arg)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lang", default=",".join(LANGS), help="comma-separated: c,python,java,rust")
    parser.add_argument("--file", action="append", help="a page to check (repeatable); default README.md and docs/*.md")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directories")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each program's output")
    args = parser.parse_args(argv)
    args.langs = [l.strip() for l in args.lang.split(",") if l.strip()]
    unknown = [l for l in args.langs if l not in LANGS]
    if unknown:
        parser.error(f"unknown language(s): {', '.join(unknown)}")
    pages = args.file or [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    checker = Checker(args)
    try:
        for page in pages:
            checker.check_page(os.path.abspath(page))
    finally:
        if args.keep:
            print(f"scratch directories kept in {checker.scratch}")
        else:
            shutil.rmtree(checker.scratch, ignore_errors=True)
    print(f"docs: {checker.passed} passed, {checker.failed} failed, {checker.skipped} skipped")
    return 1 if checker.failed else 0


if __name__ == "__main__":
    sys.exit(main())
