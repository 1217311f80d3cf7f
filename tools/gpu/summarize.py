#!/usr/bin/env python3
"""The summary table of tools/gpu/check.sh: each step's outcome with its test counts, the encode
rooflines of every codec by size, and the top-k selection against CUB's radix sort and torch.topk.

usage: summarize.py OUT_DIR STEPS_FILE   (STEPS_FILE: one "step|status|seconds" line per step)
"""
import json
import re
import sys
from pathlib import Path


def json_lines(path):
    rows = []
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return rows


def gtest_counts(path):
    if not path.exists():
        return ""
    text = path.read_text(errors="replace")
    counts = []
    for label in ("PASSED", "FAILED", "SKIPPED"):
        found = re.findall(r"^\[\s*%s\s*\] (\d+) tests?" % label, text, re.M)
        counts.append("%s %s" % (found[-1] if found else "0", label.lower()))
    return ", ".join(counts)


def size_name(n):
    return "2^%d" % (n.bit_length() - 1) if n & (n - 1) == 0 else str(n)


def fmt(value, digits=3):
    return "-" if value is None else "%.*f" % (digits, value)


def table(rows):
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def main():
    out, steps_file = Path(sys.argv[1]), Path(sys.argv[2])
    bench = json_lines(out / "bench.jsonl")
    measured = [r for r in bench if "error" not in r]
    torch_rows = [r for r in json_lines(out / "torch_topk.jsonl") if "torch_topk_gbps" in r]
    details = {
        "kernels_tests": gtest_counts(out / "kernels_tests.log"),
        "cuda_tests": gtest_counts(out / "cuda_tests.log"),
    }
    # Each log holds the summaries of its steps in the order they ran.
    for log_name, steps in (("racecheck", ("racecheck", "racecheck_staged")),
                            ("memcheck", ("memcheck_staged", "memcheck"))):
        log = out / (log_name + ".log")
        if log.exists():
            found = re.findall(r"(?:ERROR|RACECHECK) SUMMARY: .*", log.read_text(errors="replace"))
            for step, summary in zip(steps, found):
                details[step] = summary
    if bench:
        unsupported = sorted({r["codec"] for r in bench if "error" in r and "n" not in r})
        failed = [r for r in bench if "error" in r and "n" in r]
        details["bench"] = "%d rows, %d failed%s" % (
            len(measured), len(failed),
            ", no CUDA codec: " + " ".join(unsupported) if unsupported else "")
    if torch_rows:
        t = torch_rows[-1]
        details["torch_topk"] = "%.1f GB/s at n=%s, k=%d" % (
            t["torch_topk_gbps"], size_name(t["n"]), t["k"])

    rows = [("step", "status", "s", "detail")]
    for line in steps_file.read_text().splitlines():
        step, status, seconds = line.split("|")
        rows.append((step, status, seconds, details.get(step, "")))
    print(table(rows))

    if measured:
        sizes = sorted({r["n"] for r in measured})
        specs = []
        for r in measured:
            if (r["codec"], r["param"]) not in specs:
                specs.append((r["codec"], r["param"]))
        by_key = {(r["codec"], r["param"], r["n"]): r for r in measured}
        rows = [("encode roofline", "param") + tuple(size_name(n) for n in sizes) +
                ("passes", "GB/s@max")]
        for codec, param in specs:
            cells = [by_key.get((codec, param, n)) for n in sizes]
            last = next((c for c in reversed(cells) if c), {})
            rows.append((codec, param) + tuple(fmt(c and c["roofline"], 2) for c in cells) +
                        (fmt(last.get("passes"), 0), fmt(last.get("encode_gbps"), 1)))
        print()
        print(table(rows))

        topk = [r for r in measured if r["codec"] == "topk" and "select_vs_cub" in r]
        if topk:
            torch_by_n = {t["n"]: t["torch_topk_gbps"] for t in torch_rows}
            rows = [("topk", "param", "n", "k/k*", "select GB/s", "vs CUB sort", "vs torch.topk")]
            for r in topk:
                vs_torch = (r["select_only_gbps"] / torch_by_n[r["n"]]
                            if r["n"] in torch_by_n else None)
                rows.append((r["codec"], r["param"], size_name(r["n"]), fmt(r["k_ratio"]),
                             fmt(r["select_only_gbps"], 1), fmt(r["select_vs_cub"], 2),
                             fmt(vs_torch, 2)))
            print()
            print(table(rows))

            rows = [("topk select phases", "param", "n", "pass roofline", "pass", "compact",
                     "choose", "frame")]
            for r in topk:
                if "share_pass" in r:
                    rows.append((r["codec"], r["param"], size_name(r["n"]),
                                 fmt(r["pass_roofline"], 2)) +
                                tuple(fmt(r[f"share_{phase}"], 2)
                                      for phase in ("pass", "compact", "choose", "frame")))
                elif "phases_error" in r:
                    print(f"{r['param']} {size_name(r['n'])}: phases not timed: {r['phases_error']}")
            if len(rows) > 1:
                print()
                print(table(rows))


if __name__ == "__main__":
    main()
