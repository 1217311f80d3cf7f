#!/usr/bin/env python3
"""The DPDK transport between two processes in two network namespaces joined by a veth pair.

Each process runs one DpdkTransport on DPDK's net_af_packet driver bound to its veth end
(tests/tools/dpdk_peer.cc). Checks:
  - messages of 1 B to 64 MiB arrive exactly once and byte-identical both ways, on a clean link
    and with 1% and 5% of the outgoing datagrams dropped (plus a few duplicated and reordered)
    by the transport's impairment hook;
  - a peer killed mid-transfer is reported down by the other side within its peer timeout.
The same exchange over TcpTransport on the kernel's addresses of the same veth pair runs last,
for a side-by-side figure (reported, not checked against DPDK's).
Prints one JSON line per scenario. Needs root and ip (network namespaces); exits 77 otherwise.

Usage: dpdk_veth.py --peer BUILD/tests/tools/gradgate_dpdk_peer
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from netns_link import run_on_link, wait_for_text

SIZES = [1, 100, 1400, 1401, 65536, 1 << 20, 16 << 20, 64 << 20]
# Addresses the DPDK ports use: not the kernel's (on the veth ends), so the kernel ignores them.
NODES = {"dpdk": ["10.199.1.1:4791", "10.199.1.2:4791"]}
PEER_TIMEOUT_MS = 2000
SCENARIO_SECONDS = 120


def start(link, rank, peer, argv, log, transport="dpdk"):
    nodes = NODES.get(transport) or [f"{address}:29600" for address in link.addr]
    return subprocess.Popen(
        ["ip", "netns", "exec", link.ns[rank], peer, "--rank", str(rank), "--iface",
         link.dev[rank], "--transport", transport, "--nodes", *nodes, "--peer-timeout-ms",
         str(PEER_TIMEOUT_MS)] + argv,
        stdout=open(log, "w"), stderr=subprocess.STDOUT)


def last_json(log):
    with open(log) as f:
        lines = [line for line in f if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def exchange(link, peer, work, drop, transport="dpdk"):
    """Both ranks exchange SIZES with `drop` loss; the failures (empty: passed)."""
    impair = ["--drop", str(drop), "--duplicate", str(drop / 5), "--reorder", str(drop / 5)]
    argv = ["--mode", "exchange", "--timeout-s", str(SCENARIO_SECONDS), "--sizes",
            *map(str, SIZES)] + (impair if drop > 0 else [])
    logs = [os.path.join(work, f"exchange_{transport}{drop}_{rank}.log") for rank in range(2)]
    processes = [start(link, rank, peer, argv, logs[rank], transport) for rank in range(2)]
    failures = []
    for rank, process in enumerate(processes):
        try:
            process.wait(timeout=SCENARIO_SECONDS + 30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        result = last_json(logs[rank])
        print(json.dumps({"scenario": "exchange", "transport": transport, "drop": drop,
                          "rank": rank, **result}))
        if process.returncode != 0 or not result.get("ok"):
            failures.append(
                f"{transport} exchange with drop {drop}: rank {rank}: {result.get('error')}")
    return failures


def killed_peer(link, peer, work):
    """Rank 0 streams 64 MiB messages to rank 1, which is killed; rank 0 must see it go down."""
    argv = ["--timeout-s", "60", "--sizes", str(64 << 20)]
    logs = [os.path.join(work, f"kill_{rank}.log") for rank in range(2)]
    receiver = start(link, 1, peer, argv + ["--mode", "exchange"], logs[1])
    sender = start(link, 0, peer, argv + ["--mode", "stream"], logs[0])
    failures = []
    try:
        if not wait_for_text(logs[0], '"up": true', sender, 30):
            return ["killed peer: the two ranks never connected"]
        time.sleep(1.0)  # mid-transfer
        receiver.kill()
        receiver.wait()
        # `ip netns exec` became the program: the EAL's runtime directory it could not remove.
        shutil.rmtree(f"/var/run/dpdk/gg{receiver.pid}", ignore_errors=True)
        killed_at = time.monotonic()
        sender.wait(timeout=60)
        result = last_json(logs[0])
        delay = result.get("down_at", 0) - killed_at
        print(json.dumps({"scenario": "killed_peer", "down_after_s": round(delay, 3), **result}))
        if not result.get("ok") or not 0 <= delay <= PEER_TIMEOUT_MS / 1000 + 1.0:
            failures.append(f"killed peer: reported down {delay:.3f} s after the kill")
    except subprocess.TimeoutExpired:
        failures.append("killed peer: the sender never noticed")
    finally:
        for process in (sender, receiver):
            if process.poll() is None:
                process.kill()
                process.wait()
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", required=True)
    args = parser.parse_args()

    def body(link, work):
        failures = []
        for drop in (0.0, 0.01, 0.05):
            failures += exchange(link, args.peer, work, drop)
        failures += killed_peer(link, args.peer, work)
        return failures + exchange(link, args.peer, work, 0.0, "tcp")

    return run_on_link("dpdk_veth", body)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # cleanup runs on ctest's timeout
    sys.exit(main())
