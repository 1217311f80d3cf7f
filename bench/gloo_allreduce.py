#!/usr/bin/python3
"""torch.distributed's gloo all-reduce on loopback: a reference of `gradgate bench allreduce`.

Starts --ranks processes (torch.multiprocessing, a FileStore in a temporary directory, gloo on the
loopback interface), each with one fp32 tensor of --bytes holding rank + 1. After --warmup untimed
all-reduces it times all-reduces (a barrier before each; a repetition lasts until its slowest rank
is done) at least 3 and at most 50 times and until --min-seconds have passed, like the bench's own
timing, and checks that every element of the last sum is ranks (ranks + 1) / 2 on every rank.
Writes {"seconds": median, "repetitions", "checked", "torch"} as JSON to --result, or
{"unavailable": why} when torch or gloo cannot be used (exit code 0 either way; a failed sum
exits 1).
"""

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time


def parse_arguments():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--bytes", type=int, required=True)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--min-seconds", type=float, default=1.0)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds gloo waits for a peer")
    p.add_argument("--result", required=True)
    return p.parse_args()


def timed_allreduces(rank, args, store_path, queue):
    """Rank `rank`'s part; rank 0 puts (seconds per repetition, checked) on `queue`."""
    import torch  # already imported by measure(), before the fork
    import torch.distributed as dist

    torch.set_num_threads(1)  # no idle OpenMP threads spinning on the other ranks' cores
    store = dist.FileStore(store_path, args.ranks)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=args.ranks,
                            timeout=datetime.timedelta(seconds=args.timeout))
    tensor = torch.empty(args.bytes // 4, dtype=torch.float32)
    for _ in range(args.warmup):
        tensor.fill_(rank + 1)
        dist.all_reduce(tensor)
    seconds = []
    while True:
        tensor.fill_(rank + 1)
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(tensor)
        # The slowest rank's time, and the total so far: every rank then takes the same decision.
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        seconds.append(elapsed.item())
        if len(seconds) >= 50 or (len(seconds) >= 3 and sum(seconds) >= args.min_seconds):
            break
    expected = args.ranks * (args.ranks + 1) / 2
    checked = torch.tensor([int(bool((tensor == expected).all()))])
    dist.all_reduce(checked, op=dist.ReduceOp.MIN)
    if rank == 0:
        queue.put((seconds, bool(checked.item())))
    dist.destroy_process_group()


def measure(args):
    """The result object; raises on a failed process."""
    try:
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp
    except ImportError as error:
        return {"unavailable": f"torch is not importable by {sys.executable}: {error}"}
    if not dist.is_available() or not dist.is_gloo_available():
        return {"unavailable": f"torch {torch.__version__} has no gloo backend"}
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    # Forked from this process, which imported torch once already.
    queue = mp.get_context("fork").SimpleQueue()
    with tempfile.TemporaryDirectory(prefix="gg-gloo-") as directory:
        mp.start_processes(timed_allreduces, args=(args, os.path.join(directory, "store"), queue),
                           nprocs=args.ranks, start_method="fork")
    seconds, checked = queue.get()
    return {"seconds": statistics.median(seconds), "repetitions": len(seconds),
            "checked": checked, "torch": torch.__version__}


def main():
    args = parse_arguments()
    result = measure(args)
    with open(args.result, "w") as out:
        json.dump(result, out)
    return 1 if result.get("checked") is False else 0


if __name__ == "__main__":
    sys.exit(main())
