#!/usr/bin/env python3
"""The table of tools/gpu/compare_bench.sh: for each bench row (codec, param, n) and variant, the
encode roofline of every round and the medians of the roofline, the encode GB/s, the copy
reference, the top-k selection alone and its first pass's roofline.

usage: compare_summary.py OUT_DIR NAME[:KEY=VALUE,...]...   (compare_bench.sh's variants;
       OUT_DIR/NAME.jsonl: the bench lines of a variant, whose keys are left out of its rows' param
       so that the variants' rows of one spec meet)
"""
import statistics
import sys
from pathlib import Path

from summarize import fmt, json_lines, size_name, table

FIELDS = ("roofline", "encode_gbps", "memcpy_gbps", "select_only_gbps", "pass_roofline")


def median(rows, field):
    values = [r[field] for r in rows if field in r]
    return statistics.median(values) if values else None


def without_keys(param, keys):
    return ",".join(item for item in param.split(",") if item and item not in keys)


def main():
    out, variants = Path(sys.argv[1]), sys.argv[2:]
    names = [variant.partition(":")[0] for variant in variants]
    rows_of = {}  # (codec, param, n) -> {name: [rows in round order]}
    for variant in variants:
        name, _, keys = variant.partition(":")
        for row in json_lines(out / (name + ".jsonl")):
            if "error" in row:
                what = " ".join(str(row[key]) for key in ("codec", "param") if key in row)
                print(f"{name}: {what or 'bench'}: {row['error']}")
                continue
            key = (row["codec"], without_keys(row["param"], keys.split(",")), row["n"])
            rows_of.setdefault(key, {}).setdefault(name, []).append(row)
    header = ("codec", "param", "n", "variant", "rooflines by round") + tuple(
        "median " + field for field in FIELDS)
    lines = [header]
    for (codec, param, n), by_name in rows_of.items():
        for name in names:
            rows = by_name.get(name, [])
            rounds = " ".join(fmt(r["roofline"], 3) for r in rows) or "-"
            lines.append((codec, param, size_name(n), name, rounds) +
                         tuple(fmt(median(rows, field), 3) for field in FIELDS))
    print(table(lines))


if __name__ == "__main__":
    main()
