#!/usr/bin/env python3
"""`gradgate bench allreduce --transport tcp dpdk` on its veth pair: the rows and the clean-up.

Runs the bench over both transports with codecs none and top-k, and checks that there is a row
for every transport, codec and size, with a positive time and gateway CPU time, the wire ratio
of each codec, the DPDK rows measured against TCP, and that the bench's network namespaces are
gone afterwards. Then on a pair limited to 400 Mbit/s (--link-mbit, tc tbf): uncompressed
all-reduces take at least the link's time, fp16 ones (half the bytes) clearly less. Needs root
and ip (network namespaces); exits 77 otherwise.

Usage: bench_veth.py --gradgate BUILD/cli/gradgate
"""
import argparse
import json
import subprocess
import sys

from netns_link import namespaces_unavailable

CODECS = ["none", "topk:density=0.01"]
SIZES = [1048576, 16777216]


def check_rows(rows):
    """The failures (empty: passed)."""
    failures = []
    for transport in ("tcp", "dpdk"):
        for codec in CODECS:
            for size in SIZES:
                found = [row for row in rows if (row["transport"], row["codec"], row["bytes"]) ==
                         (transport, codec, size)]
                if len(found) != 1:
                    failures.append(f"{len(found)} rows for {transport} {codec} {size}")
                    continue
                row = found[0]
                if row["link"] != "veth" or row["reference"] != "tcp-gateways-veth":
                    failures.append(f"link or reference: {row}")
                if not row["seconds"] > 0 or not row["gateway_cpu_seconds"] > 0:
                    failures.append(f"no time or no gateway CPU time: {row}")
                if codec == "none" and not 0.99 <= row["wire_ratio"] <= 1.01:
                    failures.append(f"wire ratio of none not 1: {row}")
                if codec != "none" and not row["wire_ratio"] < 0.05:
                    failures.append(f"wire ratio of top-k 1% not < 0.05: {row}")
                if transport == "tcp" and row["vs_reference"] != 1.0:
                    failures.append(f"the reference's own ratio is not 1: {row}")
    return failures


RATE_MBIT = 400
RATE_SIZE = 4194304


def check_rate_rows(rows):
    """The failures of the rate-limited run (empty: passed)."""
    failures = []
    ideal = RATE_SIZE * 8 / (RATE_MBIT * 1e6)
    for codec in ("none", "fp16"):
        found = [row for row in rows if row["codec"] == codec]
        if len(found) != 1:
            failures.append(f"{len(found)} rows for {codec} on the rate-limited link")
            continue
        row = found[0]
        if (row["link"] != f"veth@{RATE_MBIT}mbit" or
                row["reference"] != "uncompressed-ring-at-link-rate" or
                abs(row["reference_seconds"] - ideal) > 1e-9):
            failures.append(f"link or reference of the rate-limited run: {row}")
        if codec == "none" and not row["vs_reference"] >= 0.95:
            failures.append(f"uncompressed faster than the link allows (no rate limit?): {row}")
        if codec == "fp16" and not row["vs_reference"] < 0.9:
            failures.append(f"fp16 saves no time on a {RATE_MBIT} Mbit/s link: {row}")
    return failures


def run_bench(gradgate, *arguments):
    """(rows, failures, pid) of one bench run."""
    command = [gradgate, "bench", "allreduce", *arguments, "--min-seconds", "0.3", "--json"]
    bench = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = bench.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        bench.terminate()
        stdout, stderr = bench.communicate()
    print(stdout, end="")
    failures = [] if bench.returncode == 0 else [f"exit code {bench.returncode}: {stderr}"]
    return [json.loads(line) for line in stdout.splitlines() if line], failures, bench.pid


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gradgate", required=True)
    args = parser.parse_args()
    unavailable = namespaces_unavailable("bench_veth")
    if unavailable:
        print(unavailable)
        return 77
    rows, failures, pid = run_bench(args.gradgate, "--transport", "tcp", "dpdk", "--codecs",
                                    *CODECS, "--sizes", *map(str, SIZES))
    failures += check_rows(rows)
    rate_rows, rate_failures, rate_pid = run_bench(
        args.gradgate, "--link-mbit", str(RATE_MBIT), "--codecs", "none", "fp16", "--sizes",
        str(RATE_SIZE))
    failures += rate_failures + check_rate_rows(rate_rows)
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    left = [line.split()[0] for line in names.splitlines()
            if line.startswith((f"gg-bench-{pid}", f"gg-bench-{rate_pid}"))]
    if left:
        failures.append(f"namespaces left behind: {left}")
    for name in left:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
