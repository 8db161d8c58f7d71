#!/usr/bin/env python3
"""Checks that the documentation's references point at something real.

Reads README.md, TESTING.md, CONTRIBUTING.md, docs/*.md, bindings/*/README.md
and tools/**/README.md, and checks:

  links     every relative link and image of the page ([text](target),
            ![alt](target), [label]: target, <a href>, <img src>): the file or
            folder it names must be in the repository, and a #anchor must be
            the slug of a heading of the target page (GitHub's rules: lower
            case, punctuation dropped, spaces to hyphens, -1, -2 for repeats),
            or an explicit <a id/name>. A link out of the repository (../..
            past its root) is broken. Links with a scheme (https:, mailto:)
            are not followed.
  paths     repository paths named in code spans (`runtime/api/api_ops.cpp`,
            `bash tools/build.sh build`): each whitespace-separated word of a
            span that looks like a repository path is looked up. It looks like
            one when it contains a '/' and either ends in an extension that
            some file of the repository has, or starts with a top-level folder
            of the repository. Words with placeholders or variables (<name>,
            NAME, $VAR, ...), URLs, absolute and home paths, and paths git
            ignores (build trees, results/) are not checked. Globs (*, ?,
            {a,b}) must match at least one file. A path may be written
            relative to the repository, to the page's folder, or as the tail
            of a repository path (`carriers/tiled/experts.hpp` under
            runtime/); a path that leaves the repository is broken.

Fenced code blocks and HTML comments are not read. The repository's files are
those git lists (tracked, or new and not ignored) that exist on disk; without
git, the files on disk outside build trees.

Prints each broken reference as FILE:LINE: message, then one line
"links: N checked, N broken"; exits 1 when any is broken.
"""

import argparse
import fnmatch
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[2]

# Extensions counted as a file's even when no file of the repository has them
# yet (a page may name a new kind of file); outputs (.so, .jar, .png, .csv)
# are deliberately absent: a path with them is checked only when it starts
# with a top-level folder.
EXTRA_EXTENSIONS = {"md", "txt", "json", "yml", "yaml", "cfg", "ini", "in"}


def doc_files(root):
    names = ["README.md", "TESTING.md", "CONTRIBUTING.md"]
    out = [root / n for n in names if (root / n).is_file()]
    out += sorted((root / "docs").glob("*.md"))
    out += sorted((root / "bindings").glob("*/README.md"))
    out += sorted(p for p in (root / "tools").rglob("README.md"))
    return out


class Repo:
    def __init__(self, root):
        self.root = root
        self.files = set()
        self.use_git = False
        try:
            top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"],
                                 capture_output=True, check=True, text=True).stdout.strip()
            if Path(top).resolve() != root.resolve():
                raise OSError("not the root of a git work tree")
            res = subprocess.run(
                ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                capture_output=True, check=True)
            names = [n for n in res.stdout.decode("utf-8", "surrogateescape").split("\0") if n]
            self.files = {n for n in names if (root / n).is_file()}
            self.use_git = True
        except (OSError, subprocess.CalledProcessError):
            for dirpath, dirnames, filenames in os.walk(root):
                rel = Path(dirpath).relative_to(root)
                dirnames[:] = [d for d in dirnames if not d.startswith(".") and not self._build_dir(rel / d)]
                filenames = [f for f in filenames if not self._build_dir(rel / f)]
                for f in filenames:
                    self.files.add((rel / f).as_posix())
        self.dirs = {""}
        for f in self.files:
            parts = f.split("/")
            for i in range(1, len(parts)):
                self.dirs.add("/".join(parts[:i]))
        self.top_dirs = {d for d in self.dirs if d and "/" not in d}
        self.extensions = {f.rsplit(".", 1)[1] for f in self.files if "." in f.rsplit("/", 1)[-1]}
        self.extensions |= EXTRA_EXTENSIONS
        self._ignored = {}
        self._headings = {}

    def _build_dir(self, rel):
        """Without git: whether a path falls under a pattern of the root's
        .gitignore (a pattern ending in '/' names folders only)."""
        if not hasattr(self, "_patterns"):
            self._patterns = []
            gitignore = self.root / ".gitignore"
            if gitignore.is_file():
                for line in gitignore.read_text(encoding="utf-8", errors="replace").splitlines():
                    line = line.strip()
                    if line and not line.startswith(("#", "!")):
                        self._patterns.append((line.strip("/"), line.endswith("/")))
        parts = Path(rel).parts
        is_dir = (self.root / rel).is_dir()
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            folder = i < len(parts) or is_dir
            for pat, folders_only in self._patterns:
                if folders_only and not folder:
                    continue
                if fnmatch.fnmatch(prefix if "/" in pat else parts[i - 1], pat):
                    return True
        return False

    def exists(self, rel):
        return rel in self.files or rel in self.dirs

    def is_dir(self, rel):
        return rel in self.dirs

    def ignored(self, rel):
        """Whether git ignores the path (a build output, not a repository path)."""
        if rel in self._ignored:
            return self._ignored[rel]
        if self.use_git:
            res = subprocess.run(["git", "-C", str(self.root), "check-ignore", "-q", "--", rel],
                                 capture_output=True)
            ignored = res.returncode == 0
        else:
            ignored = self._build_dir(Path(rel))
        self._ignored[rel] = ignored
        return ignored

    def anchors(self, rel):
        if rel not in self._headings:
            text = (self.root / rel).read_text(encoding="utf-8", errors="replace")
            self._headings[rel] = page_anchors(text)
        return self._headings[rel]


# --- reading a page -------------------------------------------------------

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def prose_lines(text):
    """Yields (line number, line) outside fenced code blocks, with HTML
    comments blanked out."""
    fence = None
    in_comment = False
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not line.strip()[len(m.group(1)):].strip():
                fence = None
            continue
        if m and not in_comment:
            fence = m.group(1)
            continue
        out = []
        i = 0
        while i < len(line):
            if in_comment:
                end = line.find("-->", i)
                if end < 0:
                    i = len(line)
                else:
                    in_comment = False
                    i = end + 3
            else:
                start = line.find("<!--", i)
                if start < 0:
                    out.append(line[i:])
                    i = len(line)
                else:
                    out.append(line[i:start])
                    in_comment = True
                    i = start + 4
        yield n, "".join(out)


CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", heading)      # images
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)          # links
    text = re.sub(r"\[([^\]]*)\]\[[^\]]*\]", r"\1", text)         # reference links
    text = re.sub(r"<[^>]+>", "", text)                            # HTML tags
    text = text.replace("`", "")
    text = re.sub(r"(\*\*|__)(.+?)\1", r"\2", text)                # strong
    text = re.sub(r"(?<!\w)([*_])(.+?)\1(?!\w)", r"\2", text)      # emphasis
    text = text.strip().lower()
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in " -" or cat[0] in "LMN" or cat == "Pc":
            out.append("-" if ch == " " else ch)
    return "".join(out)


ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
HTML_ANCHOR = re.compile(r"<a\s[^>]*?(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)


def page_anchors(text):
    anchors = set()
    counts = {}

    def add(heading):
        base = slug(heading)
        k = counts.get(base, 0)
        counts[base] = k + 1
        anchors.add(base if k == 0 else f"{base}-{k}")

    prev = None
    for _, line in prose_lines(text):
        m = ATX.match(line)
        if m:
            add(m.group(2) or "")
            prev = None
            continue
        if SETEXT.match(line) and prev and prev.strip() and not prev.startswith((" " * 4, "\t")) \
                and not re.match(r"^ {0,3}([-*+]|\d+[.)])\s", prev):
            add(prev.strip())
            prev = None
            continue
        for a in HTML_ANCHOR.findall(line):
            anchors.add(a)
        prev = line
    return anchors


# [text](target "title"), ![alt](target); the text may hold one level of [].
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]"
                         r"\(\s*(<[^>]*>|[^)\s]*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_LINK = re.compile(r"<(?:a|img|source)\s[^>]*?(?:href|src)\s*=\s*[\"']([^\"']+)[\"']", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


# --- checking -------------------------------------------------------------

class Checker:
    def __init__(self, repo, verbose=False):
        self.repo = repo
        self.verbose = verbose
        self.checked = 0
        self.broken = []

    def fail(self, doc, line, message):
        self.broken.append(f"{doc}:{line}: {message}")

    def resolve(self, doc_dir, target):
        """The repository-relative path of a link target, or None when it
        leaves the repository."""
        if target.startswith("/"):
            path = os.path.normpath(target.lstrip("/"))
        else:
            path = os.path.normpath(os.path.join(doc_dir, target)) if doc_dir else os.path.normpath(target)
        if path == ".":
            return ""
        if path == ".." or path.startswith("../") or os.path.isabs(path):
            return None
        return path

    def check_link(self, doc, doc_dir, line, target):
        if target.startswith("<") and target.endswith(">"):
            target = target[1:-1]
        if not target or SCHEME.match(target):
            return
        self.checked += 1
        if self.verbose:
            print(f"{doc}:{line}: link {target}")
        path_part, _, anchor = target.partition("#")
        path_part = unquote(path_part.split("?", 1)[0])
        anchor = unquote(anchor)
        if path_part:
            rel = self.resolve(doc_dir, path_part)
            if rel is None:
                self.fail(doc, line, f"link '{target}' leaves the repository")
                return
            if not self.repo.exists(rel):
                self.fail(doc, line, f"link '{target}': no file or folder {rel or '.'} in the repository")
                return
        else:
            rel = doc
        if not anchor:
            return
        if self.repo.is_dir(rel):
            readme = f"{rel}/README.md" if rel else "README.md"
            if readme not in self.repo.files:
                return
            rel = readme
        if rel.endswith(".md"):
            if anchor not in self.repo.anchors(rel):
                self.fail(doc, line, f"link '{target}': no heading of {rel} has the anchor #{anchor}")
        elif not re.fullmatch(r"L\d+(-L\d+)?", anchor):
            self.fail(doc, line, f"link '{target}': #{anchor} is not a line anchor of {rel}")

    # words of a code span that look like repository paths
    PLACEHOLDER = re.compile(r"[<>$~@%]|\.\.\.|…|://|\b[A-Z][A-Z0-9_]{2,}\b(?![.(])")
    GLOB = re.compile(r"[*?\[{]")

    def path_candidates(self, span):
        for word in span.split():
            word = word.strip("'\",;()")
            if "=" in word:
                word = word.rsplit("=", 1)[1]
            word = re.sub(r"(:\d+(-\d+)?)+$", "", word)   # file.c:12
            word = word.rstrip(".,:;")
            if "/" not in word or word.startswith(("/", "-")) or self.PLACEHOLDER.search(word):
                continue
            first = word.split("/", 1)[0]
            last = word.rstrip("/").rsplit("/", 1)[-1]
            ext = last.rsplit(".", 1)[1] if "." in last.strip(".") else ""
            if first == "..":
                yield word
                continue
            if first == ".":
                word = word[2:]
                if "/" not in word:
                    continue
                first = word.split("/", 1)[0]
            if first in self.repo.top_dirs or (ext and ext in self.repo.extensions):
                yield word

    def check_path(self, doc, doc_dir, line, word):
        repo = self.repo
        shown = word
        if word.startswith(".."):
            rel = self.resolve(doc_dir, word)
            if rel is None:
                self.checked += 1
                self.fail(doc, line, f"path '{word}' is outside the repository")
                return
            word = rel
        clean = word.rstrip("/")
        if repo.ignored(clean):
            return
        self.checked += 1
        if self.verbose:
            print(f"{doc}:{line}: path {shown}")
        if self.GLOB.search(clean):
            patterns = [clean]
            while any("{" in p for p in patterns):
                expanded = []
                for p in patterns:
                    m = re.search(r"\{([^{}]*)\}", p)
                    if not m:
                        expanded.append(p)
                        continue
                    for alt in m.group(1).split(","):
                        expanded.append(p[:m.start()] + alt + p[m.end():])
                patterns = expanded
            every = repo.files | repo.dirs
            for p in patterns:
                bases = [p, f"{doc_dir}/{p}" if doc_dir else p, f"*/{p}"]
                if not any(fnmatch.filter(every, b) for b in bases):
                    self.fail(doc, line, f"path '{shown}': nothing in the repository matches {p}")
                    return
            return
        candidates = [clean, os.path.normpath(f"{doc_dir}/{clean}") if doc_dir else clean]
        if any(repo.exists(c) for c in candidates):
            return
        tail = "/" + clean
        if any(f.endswith(tail) for f in repo.files) or any(d.endswith(tail) for d in repo.dirs):
            return
        self.fail(doc, line, f"path '{shown}' is not in the repository")

    def check_page(self, path):
        rel = path.relative_to(self.repo.root).as_posix()
        doc_dir = os.path.dirname(rel)
        text = path.read_text(encoding="utf-8", errors="replace")
        for n, line in prose_lines(text):
            spans = [m.group(2) for m in CODE_SPAN.finditer(line)]
            bare = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
            for m in INLINE_LINK.finditer(bare):
                self.check_link(rel, doc_dir, n, m.group(1))
            m = REF_DEF.match(bare)
            if m:
                self.check_link(rel, doc_dir, n, m.group(1))
            for m in HTML_LINK.finditer(bare):
                self.check_link(rel, doc_dir, n, m.group(1))
            for span in spans:
                for word in self.path_candidates(span.strip()):
                    self.check_path(rel, doc_dir, n, word)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this file's)")
    parser.add_argument("-v", "--verbose", action="store_true", help="list every reference checked")
    parser.add_argument("files", nargs="*", type=Path, help="pages to check (default: every page listed above)")
    args = parser.parse_args()
    root = args.root.resolve()
    repo = Repo(root)
    pages = [(p if p.exists() else root / p).resolve() for p in args.files] if args.files else doc_files(root)
    checker = Checker(repo, args.verbose)
    for page in pages:
        checker.check_page(page)
    for b in checker.broken:
        print(b)
    print(f"links: {checker.checked} checked, {len(checker.broken)} broken")
    return 1 if checker.broken else 0


if __name__ == "__main__":
    sys.exit(main())
