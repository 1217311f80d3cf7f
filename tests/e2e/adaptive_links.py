#!/usr/bin/env python3
"""Adaptive compression over a link that slows down and recovers, with real processes.

Two gateways in two network namespaces joined by a veth pair, a controller running the
`bandwidth` policy, and one worker per gateway all-reducing a 4 MB tensor back to back. Midway the
link is throttled to 50 Mb/s with `tc tbf` on both ends; later the throttle is lifted. Checks:
  - on the fast link the policy keeps the tensor dense (compression would cost more than it saves);
  - once throttled, the controller lowers the ratio and the time per all-reduce comes back to
    within 1.5x of the target within 10 s;
  - once the throttle is lifted, compression relaxes again.
Prints one JSON line with the figures per attempt. The timing checks run on a shared machine:
a failed attempt is run once more (--attempts) and reported. Needs root (namespaces, tc); exits
77 otherwise.

Usage: adaptive_links.py --gradgate BUILD/cli/gradgate --worker BUILD/tests/tools/gradgate_test_worker
"""
import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time

from netns_link import Link, query, start_gateway, start_in, stop_all, wait_ready

TARGET_SECONDS = 0.15  # the policy's communicate time per step
ELEMENTS = 1 << 20  # one fp32 tensor of 4 MiB: 0.67 s per step dense at 50 Mb/s
THROTTLE = "50mbit"


def read_steps(path):
    """[(unix_time, seconds)] of a worker's step log."""
    steps = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3:
                    steps.append((float(parts[0]), float(parts[2])))
    return steps


def scenario(args):
    """One run; the list of failed checks (empty: passed)."""
    work = tempfile.mkdtemp(prefix="gradgate-adaptive-")
    link = Link()
    processes = []
    passed = False

    def start(ns, argv, log):
        return start_in(ns, argv, log, processes)

    try:
        env_token = "adaptive-test-token"
        os.environ["GRADGATE_API_TOKEN"] = env_token
        control_yaml = os.path.join(work, "control.yaml")
        with open(control_yaml, "w") as f:
            f.write(f"""server:
  listen: "{link.addr[0]}:0"
nodes:
  report_interval_ms: 300
  stale_after_ms: 3000
policy:
  policy: bandwidth
  default_codec: none
  target_communicate_seconds: {TARGET_SECONDS}
  min_compress_elements: 1024
  lead_seconds: 0.5
  min_lead_steps: 2
  min_interval_ms: 500
""")
        controller = start(link.ns[0], [args.gradgate, "control", "-c", control_yaml,
                                        "--ready-file", os.path.join(work, "control.ready")],
                           os.path.join(work, "control.log"))
        control_port = wait_ready(os.path.join(work, "control.ready"), controller, "controller")["port"]
        control_url = f"{link.addr[0]}:{control_port}"

        ports = [0, 0]
        for rank in range(2):
            config = f"""job:
  id: 9
  node_rank: {rank}
  nodes: ["{link.addr[0]}:{ports[0]}", "{link.addr[1]}:{ports[1]}"]
ingress:
  socket: {work}/gateway{rank}.sock
compression:
  codec: none
control:
  url: "{control_url}"
  report_interval_ms: 300
  poll_wait_ms: 1000
collective:
  timeout_ms: 30000
"""
            ports[rank] = start_gateway(link, rank, args.gradgate, config, work, processes)["port"]

        total = args.fast_seconds + args.throttled_seconds + args.relaxed_seconds
        workers = [
            start(link.ns[rank], [args.worker, "--socket", f"{work}/gateway{rank}.sock",
                                  "--local-rank", "0", "--tensor", f"layer.weight:{ELEMENTS}",
                                  "--seconds", str(total + 120), "--out", "", "--step-log",
                                  os.path.join(work, f"steps{rank}.log"), "--timeout-ms", "60000"],
                  os.path.join(work, f"worker{rank}.log"))
            for rank in range(2)
        ]
        policy_url = f"http://{control_url}/v1/policy?job_id=9"
        codecs = []  # (unix time, codec of the tensor) as the controller decides

        def watch_policy(until):
            while time.time() < until:
                policy = query(link.ns[0], policy_url)
                if policy and policy.get("tensors"):
                    codecs.append((time.time(), policy["tensors"][0]["codec"]))
                time.sleep(0.25)

        start_time = time.time()
        watch_policy(start_time + args.fast_seconds)
        throttled_at = time.time()
        link.throttle(THROTTLE)
        watch_policy(throttled_at + args.throttled_seconds)
        relaxed_at = time.time()
        link.unthrottle()
        watch_policy(relaxed_at + args.relaxed_seconds)
        for rank, worker in enumerate(workers):
            if worker.poll() is not None:
                with open(os.path.join(work, f"worker{rank}.log"), errors="replace") as log:
                    said = log.read()[-2000:]
                raise RuntimeError(f"worker {rank} stopped early ({work}/worker{rank}.log):\n{said}")
            worker.send_signal(signal.SIGTERM)  # mid-step is fine: the step logs are the result

        steps = read_steps(os.path.join(work, "steps0.log"))
        fast = [s for t, s in steps if start_time + 3 < t < throttled_at]
        throttled = [(t, s) for t, s in steps if throttled_at < t < relaxed_at]
        bound = 1.5 * TARGET_SECONDS
        recovered_at = None
        for i, (t, s) in enumerate(throttled):
            window = [x for _, x in throttled[i:i + 4]]
            if len(window) == 4 and all(x <= bound for x in window):
                recovered_at = t
                break
        slowest = max((s for _, s in throttled), default=0.0)
        during = [c for t, c in codecs if throttled_at + 1 < t < relaxed_at]
        after = [c for t, c in codecs if t > relaxed_at]
        figures = {
            "target_seconds": TARGET_SECONDS,
            "fast_step_seconds": sorted(fast)[len(fast) // 2] if fast else None,
            "slowest_throttled_step_seconds": slowest,
            "recovery_seconds": None if recovered_at is None else round(recovered_at - throttled_at, 2),
            "codec_fast": codecs[0][1] if codecs else None,
            "codec_throttled": during[-1] if during else None,
            "codec_after": after[-1] if after else None,
            "relaxed_seconds": next((round(t - relaxed_at, 2) for t, c in codecs
                                     if t > relaxed_at and during and c != during[-1]), None),
        }
        print(json.dumps(figures))
        failures = []
        if figures["codec_fast"] != "none":
            failures.append("the fast link should keep the tensor dense")
        if recovered_at is None or recovered_at - throttled_at > 10.0:
            failures.append(f"time per all-reduce not within {bound:.3f} s within 10 s of the throttle")
        if not during or during[-1] == "none":
            failures.append("the throttled link should get compression")
        if figures["relaxed_seconds"] is None:
            failures.append("compression did not relax after the throttle was lifted")
        for failure in failures:
            print("FAIL:", failure, f"(logs in {work})")
        passed = not failures
        return failures
    finally:
        stop_all(processes)
        link.close()
        if passed:
            shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gradgate", required=True)
    parser.add_argument("--worker", required=True)
    parser.add_argument("--fast-seconds", type=float, default=8.0)
    parser.add_argument("--throttled-seconds", type=float, default=16.0)
    parser.add_argument("--relaxed-seconds", type=float, default=16.0)
    parser.add_argument("--attempts", type=int, default=2)
    args = parser.parse_args()
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        print("adaptive_links: needs root, ip and tc (network namespaces, tc tbf)")
        return 77
    for attempt in range(1, args.attempts + 1):
        if not scenario(args):
            return 0
        print(f"attempt {attempt} of {args.attempts} failed")
    return 1


if __name__ == "__main__":
    sys.exit(main())
