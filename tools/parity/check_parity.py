#!/usr/bin/env python3
"""Checks bindings/parity.toml against the C header and the bindings.

Fails when
  - an SW_API function of strideweave.h or strideweave_testing.h has no
    entry (or one missing a language), or sits in the wrong section;
  - an entry names a function the headers no longer declare;
  - an entry is "omitted" without a reason (or still "omitted: unreviewed");
  - an entry names a wrapper, but no source file of that binding both calls
    the function (through the binding's call convention, see scan.py) and
    mentions the wrapper's last name; for "W via H", the file calling the
    function must mention H's last name, and some file must mention both W's
    and H's last names.
Prints a per-language summary, then "parity: ok" or the problems.

Usage: check_parity.py [manifest]
"""
from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scan  # noqa: E402

UNREVIEWED = "omitted: unreviewed"


def leaf(name: str) -> str:
    """The last name of a dotted or ::-separated path, without call parens."""
    name = name.strip().removesuffix("()")
    return re.split(r"\.|::", name)[-1]


def owner(name: str) -> str:
    parts = re.split(r"\.|::", name.strip())
    return parts[-2] if len(parts) > 1 else ""


def main() -> int:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else scan.MANIFEST
    problems: list[str] = []
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        print(f"parity: cannot read {path}: {e}")
        return 1

    main_funcs, testing_funcs = scan.all_header_functions()
    known = set(main_funcs) | set(testing_funcs)
    sections = {"functions": main_funcs, "testing": testing_funcs}
    unknown_sections = set(data) - set(sections)
    for name in sorted(unknown_sections):
        problems.append(f"unknown section [{name}]")

    bindings = scan.bindings(known)
    files: dict[str, list[tuple[Path, str, set[str]]]] = {}
    for lang, binding in bindings.items():
        rows = []
        for p in binding.files:
            text = p.read_text()
            rows.append((p, text, binding.refs_in_text(text, p)))
        files[lang] = rows

    def mentions(text: str, word: str) -> bool:
        return re.search(r"(?<![\w$])" + re.escape(word) + r"(?![\w$])", text) is not None

    def rust_handle(text: str, type_name: str, func: str) -> bool:
        pattern = r"\bhandle!\(\s*(?:///[^\n]*\n\s*)*" + re.escape(type_name) + r"\s*,[^)]*\b" + re.escape(func) + r"\b"
        return re.search(pattern, text) is not None

    def wrapper_ok(lang: str, func: str, value: str) -> str | None:
        wrapper, _, via = (part.strip() for part in value.partition(" via "))
        rows = files[lang]
        calling = [(p, text) for p, text, refs in rows if func in refs]
        if not calling:
            return f"{func}: {lang} names {wrapper}, but no {lang} source calls {func}"
        if via:
            if not any(mentions(text, leaf(via)) for _, text in calling):
                return f"{func}: {lang} names {via}, but no {lang} file calling {func} mentions {leaf(via)}"
            if not any(mentions(text, leaf(wrapper)) and mentions(text, leaf(via)) for _, text, _ in rows):
                return f"{func}: {lang} names {wrapper} via {via}, but no {lang} file mentions both"
            return None
        for _, text in calling:
            if mentions(text, leaf(wrapper)):
                return None
            if lang == "rust" and leaf(wrapper) in ("clone", "drop") and rust_handle(text, owner(wrapper), func):
                return None
        where = ", ".join(str(p.relative_to(scan.ROOT)) for p, _ in calling[:3])
        return f"{func}: {lang} names {wrapper}, but the files calling {func} ({where}) never mention {leaf(wrapper)}"

    counts = {lang: [0, 0] for lang in scan.LANGUAGES}
    for section, funcs in sections.items():
        entries = data.get(section, {})
        other = "testing" if section == "functions" else "functions"
        for func in funcs:
            entry = entries.get(func)
            if entry is None:
                if func in data.get(other, {}):
                    problems.append(f"{func}: listed under [{other}], but it is declared in "
                                    f"{'strideweave_testing.h' if section == 'testing' else 'strideweave.h'}")
                else:
                    problems.append(f"{func}: declared in the header but has no entry in {path.name}")
                continue
            for lang in scan.LANGUAGES:
                value = entry.get(lang)
                if not isinstance(value, str) or not value.strip():
                    problems.append(f"{func}: no {lang} entry")
                    continue
                if value.startswith("omitted"):
                    counts[lang][1] += 1
                    reason = value.removeprefix("omitted").lstrip(":").strip()
                    if not value.startswith("omitted:") or not reason or value == UNREVIEWED:
                        problems.append(f"{func}: {lang} is omitted without a reason ({value!r})")
                    continue
                counts[lang][0] += 1
                problem = wrapper_ok(lang, func, value)
                if problem:
                    problems.append(problem)
            for key in sorted(set(entry) - set(scan.LANGUAGES)):
                problems.append(f"{func}: unknown key {key!r}")
        for func in entries:
            if func not in known:
                problems.append(f"{func}: has an entry but is no longer declared in the headers")

    print("; ".join(f"{lang}: {w} wrapped, {o} omitted" for lang, (w, o) in counts.items()))
    if problems:
        for p in problems:
            print(f"  {p}")
        print(f"parity: {len(problems)} problem{'s' if len(problems) != 1 else ''}")
        return 1
    print("parity: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
