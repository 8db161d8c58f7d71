#!/usr/bin/env python3
"""Checks the op table (runtime/ops/op_table.def) against the public header
and the bindings that hold their own lists of the ops.

- include/strideweave/strideweave.h writes sw_unary_op_t, sw_binary_op_t and
  sw_reduce_op_t out; each must list exactly the table's public ops, in the
  table's order, with the values 1, 2, 3, ... (the runtime's static_asserts
  check the order and the values of the ops the table has; this check also
  catches a value added to the header and not to the table).
- the bindings name each public op of their own: every code of the table
  must appear in the Python package (bindings/python/strideweave/) and in the
  Rust binding's op enums (bindings/rust/strideweave/src/ops.rs: the arms of
  UnaryOp, BinaryOp, ScalarOp and ReduceOp's to_raw), and the Java binding's
  Ops enums (Ops.Unary, Ops.Binary, Ops.Reduce) must have a constant of the
  code's name with its value (SW_BINARY_SUB = 2: `SUB(2)`, or
  `ADD(Native::sw_add, 1)` for an op with a function of its own).

Usage: check_op_table.py [SOURCE_ROOT]; exits 1 naming each mismatch.
"""
import pathlib
import re
import sys

JAVA_ENUMS = {"SW_UNARY_OPS": "Unary", "SW_BINARY_OPS": "Binary", "SW_REDUCE_OPS": "Reduce"}

LISTS = {
    "SW_UNARY_OPS": "sw_unary_op_t",
    "SW_BINARY_OPS": "sw_binary_op_t",
    "SW_REDUCE_OPS": "sw_reduce_op_t",
}


def table_codes(text, macro):
    """The CODE column of one public list of op_table.def, in order."""
    m = re.search(r"#define\s+" + macro + r"\(X\)((?:[^\n]*\\\n)*[^\n]*)", text)
    if not m:
        raise SystemExit(f"op_table.def: no list {macro}")
    rows = re.findall(r"X\(\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*\)", m.group(1))
    return [code for _, _, code, _ in rows]


def header_enum(text, name):
    """(symbol, value) of each value of a public enum but its FORCE32."""
    m = re.search(r"typedef\s+enum\s+" + name + r"\s*\{(.*?)\}\s*" + name + r"\s*;", text, re.S)
    if not m:
        raise SystemExit(f"strideweave.h: no enum {name}")
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    body = re.sub(r"//[^\n]*", "", body)
    out = []
    for sym, val in re.findall(r"(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)", body):
        if not sym.endswith("_FORCE32"):
            out.append((sym, int(val, 0)))
    return out


def mentions(root, paths, symbol):
    pat = re.compile(r"\b" + symbol + r"\b")
    return any(pat.search(p.read_text()) for p in paths)


def java_enum_body(text, name):
    """The constants of `public enum NAME {` in Ops.java (up to its first `;`)."""
    m = re.search(r"public\s+enum\s+" + name + r"\s*\{(.*?);", re.sub(r"/\*.*?\*/", "", text, flags=re.S), re.S)
    return m.group(1) if m else ""


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
    table = (root / "runtime/ops/op_table.def").read_text()
    header = (root / "include/strideweave/strideweave.h").read_text()
    python = sorted((root / "bindings/python/strideweave").rglob("*.py"))
    rust = [root / "bindings/rust/strideweave/src/ops.rs"]
    java = (root / "bindings/java/src/main/java/org/strideweave/Ops.java").read_text()
    errors = []
    for macro, enum in LISTS.items():
        codes = table_codes(table, macro)
        values = header_enum(header, enum)
        if [s for s, _ in values] != codes:
            errors.append(f"{enum}: the header lists {[s for s, _ in values]}, op_table.def's {macro} {codes}")
        for i, (sym, val) in enumerate(values):
            if val != i + 1:
                errors.append(f"{enum}: {sym} = {val}, expected {i + 1} (the values run 1, 2, 3, ...)")
        for code in codes:
            if not mentions(root, python, code):
                errors.append(f"{code}: not named in bindings/python/strideweave/ (a function per op, _surface.py)")
            if not mentions(root, rust, code):
                errors.append(f"{code}: not named in bindings/rust/strideweave/src/ops.rs (the op enums' to_raw)")
        java_body = java_enum_body(java, JAVA_ENUMS[macro])
        for sym, val in values:
            const = sym.split("_", 2)[2]
            if not re.search(r"\b" + const + r"\((?:Native::\w+,\s*)?" + str(val) + r"\)", java_body):
                errors.append(f"{sym}: no constant {const}({val}) in Ops.{JAVA_ENUMS[macro]} "
                              "(bindings/java/src/main/java/org/strideweave/Ops.java)")
    for e in errors:
        print("op_table:", e)
    if errors:
        return 1
    print(f"op_table: {', '.join(LISTS.values())} match op_table.def; the bindings name every op")
    return 0


if __name__ == "__main__":
    sys.exit(main())
