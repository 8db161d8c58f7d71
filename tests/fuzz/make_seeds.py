#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/corpus/<target>/seed-*).

    python3 tests/fuzz/make_seeds.py

Deterministic: the same files every run. Inputs that fuzzing found worth
keeping (crash regressions, new coverage) live beside the seeds under other
names and are never rewritten. Needs the zstd command for the frame seeds.
"""
import os
import random
import struct
import subprocess

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus")


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def layouts():
    texts = {
        "rank1": "8:1",
        "nested": "(4,(2,2)):(1,(4,8))",
        "matrix": "(2,3):(1,2)",
        "scalar": "():()",
        "negative": "(3,4):(-1,3)",
        "deep": "((2,2),(3,3)):((1,2),(4,12))",
        "broadcast": "(0,4):(1,0)",
        "overflow": "(2,2):(9223372036854775807,1)",
        "huge-extent": "9223372036854775807:0",
        "depth": "(" * 40 + "2" + ")" * 40 + ":" + "(" * 40 + "1" + ")" * 40,
        "incongruent": "(2,(3,4)):(1,2)",
        "spaces": " ( 2 , 3 ) : ( 1 , 2 ) ",
        "trailing": "(2,3):(1,2)x",
    }
    for name, t in texts.items():
        write("layout_parse", name, t)


def binary(target, cases, count, length, seed):
    rng = random.Random(seed)
    for case in range(cases):
        for i in range(count):
            body = bytes(rng.randrange(256) for _ in range(length))
            write(target, f"case{case}-{i}", bytes([case]) + body)


def frames():
    # Valid frames (checksummed, and not) of 64 bytes, the size of a full
    # frame of the target's carrier; replace mode takes them whole.
    content = bytes((i * 37 + (i >> 3)) & 0xFF for i in range(64))
    for name, flags in {"checksum": ["--check"], "no-checksum": ["--no-check"]}.items():
        r = subprocess.run(["zstd", "-q", "-c", *flags], input=content, capture_output=True, check=True)
        # level, frame index, 0 (replace mode), then the frame
        write("zstd_frame", "replace-" + name, bytes([0, 0, 0]) + r.stdout)
    rng = random.Random(7)
    for i in range(6):
        patches = [rng.randrange(256) for _ in range(20)]
        write("zstd_frame", f"patch-{i}", bytes([0, i % 3, 1, 3]) + bytes(patches))


def main():
    layouts()
    binary("layout_build", 5, 3, 48, 1)
    binary("tile_values", 3, 4, 64, 2)
    binary("descriptors", 8, 3, 48, 3)
    binary("device", 2, 6, 96, 4)
    binary("tiled", 1, 12, 120, 5)
    frames()


if __name__ == "__main__":
    main()
