#!/usr/bin/env python3
"""torch.topk(|x|, k) on the GPU, on the tensor gradgate_kernel_bench --dump wrote.

The reference for the CUDA top-k selection: k = round(density * n) as the benchmark counts it,
unsorted (a selection, like the codec's), |x| included in the timing, CUDA events, warm-up runs,
the median of the timed runs. Prints one JSON line: torch_topk_gbps is gradient bytes (4 per
element) per second, 1e9, comparable with the benchmark's select_only_gbps and cub_topk_gbps.
"""
import argparse
import json
import math
import statistics
import sys

import numpy as np


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dump", help="raw float32 file (gradgate_kernel_bench --dump)")
    parser.add_argument("--density", type=float, default=0.01)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()

    import torch  # only where the reference runs: the rest of the script needs numpy alone

    if not torch.cuda.is_available():
        print(json.dumps({"reference": "torch_topk", "error": "no CUDA device for torch"}))
        return 2
    x = torch.from_numpy(np.fromfile(args.dump, dtype=np.float32)).cuda()
    n = x.numel()
    k = max(1, math.floor(args.density * n + 0.5))  # std::round, as the benchmark

    def select():
        return torch.topk(x.abs(), k, sorted=False)

    for _ in range(args.warmup):
        select()
    runs = []
    for _ in range(args.reps):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        select()
        stop.record()
        stop.synchronize()
        runs.append(start.elapsed_time(stop))
    ms = statistics.median(runs)
    print(json.dumps({
        "reference": "torch_topk",
        "n": n,
        "k": k,
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "ms": ms,
        "torch_topk_gbps": 4.0 * n / (ms * 1e6),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
