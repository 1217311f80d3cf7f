#!/usr/bin/python3
"""Capture real neural-network gradients as a small test asset for the gradient codecs.

Trains a small CNN on Fashion-MNIST with SGD and, after --steps optimizer updates
(mid-training, not at initialisation), takes the gradients of one minibatch (after
loss.backward(), before the optimizer step) for conv2.weight, fc1.weight, fc2.weight
and fc1.bias. It writes two files to --out:

  fashion_mnist_gradients.f32   the gradients concatenated in that order, raw
                                little-endian float32, no header (~80k values)
  fashion_mnist_gradients.json  how they were made and where each layer lies
                                (name, shape, offset and element count)

The asset is the "real" data kind of the codec benchmark (`gradgate bench codecs`),
which tiles it to larger sizes, and real-data input for the codec tests, next to the
synthetic distributions in bench/gradient_data.h.

Needs PyTorch and NumPy; the dataset is read from the gzipped IDX files directly,
so nothing is downloaded. Runs on the CPU and is deterministic for a given --seed.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent / "demo"))

import fashion_mnist  # noqa: E402  (the dataset reader and model of the demo)

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
ASSET_NAME = "fashion_mnist_gradients"
CAPTURED = ("conv2.weight", "fc1.weight", "fc2.weight", "fc1.bias")

LR = 0.05
MOMENTUM = 0.9
BATCH = 64


def minibatches(n, seed):
    """Endless stream of index batches: a fresh seeded permutation each epoch."""
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(n)
        for start in range(0, n - BATCH + 1, BATCH):
            yield torch.from_numpy(order[start : start + BATCH])


def train(model, x, y, steps, seed):
    """Run `steps` SGD updates, printing the mean loss at a few points; return the batch stream."""
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    batches = minibatches(len(x), seed)
    report_every = max(1, steps // 5)
    window = []
    for step in range(1, steps + 1):
        idx = next(batches)
        opt.zero_grad()
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        window.append(loss.item())
        if step == 1 or step % report_every == 0 or step == steps:
            print(f"step {step:5d}  loss {np.mean(window):.4f}  (mean over last {len(window)} steps)")
            window = []
    return batches


def capture(model, x, y, batches):
    """Gradients of the captured layers for the next minibatch, without an optimizer step."""
    idx = next(batches)
    model.zero_grad()
    F.cross_entropy(model(x[idx]), y[idx]).backward()
    params = dict(model.named_parameters())
    return [(name, params[name].grad.detach().numpy().astype(np.float32)) for name in CAPTURED]


def write_asset(out_dir, grads, step, seed):
    """Write the .f32 blob and its .json description; return the two paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    layers, offset = [], 0
    for name, g in grads:
        layers.append({"name": name, "shape": list(g.shape), "offset": offset, "elements": int(g.size)})
        offset += int(g.size)
    blob = np.concatenate([g.ravel() for _, g in grads]).astype("<f4")
    f32_path = out_dir / f"{ASSET_NAME}.f32"
    json_path = out_dir / f"{ASSET_NAME}.json"
    blob.tofile(f32_path)
    meta = {
        "source": (
            f"Fashion-MNIST training set; gradients of one minibatch of {BATCH} taken after "
            f"{step} SGD steps (lr {LR}, momentum {MOMENTUM}, seed {seed}), after "
            "loss.backward() and before the optimizer step; made by tools/capture_gradients.py"
        ),
        "model": "conv(1->16,5x5)-relu-maxpool2 -> conv(16->32,5x5)-relu-maxpool2 "
        "-> fc(512->128)-relu -> fc(128->10), cross-entropy loss",
        "step": step,
        "seed": seed,
        "dtype": "float32, little-endian, no header",
        "layers": layers,
        "total_elements": offset,
    }
    json_path.write_text(json.dumps(meta, indent=2) + "\n")
    return f32_path, json_path


def excess_kurtosis(g):
    """Fisher (excess) kurtosis: 0 for a Gaussian, 3 for a Laplace distribution."""
    v = g.astype(np.float64).ravel()
    d = v - v.mean()
    var = np.mean(d * d)
    return float(np.mean(d**4) / (var * var) - 3.0) if var > 0 else float("nan")


def print_stats(grads):
    print(f"{'layer':14s} {'elements':>9s} {'mean|g|':>11s} {'max|g|':>11s} {'ex.kurtosis':>12s}")
    for name, g in grads:
        a = np.abs(g)
        print(f"{name:14s} {g.size:9d} {a.mean():11.4e} {a.max():11.4e} {excess_kurtosis(g):12.2f}")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO_ROOT / "bench" / "data", help="output directory (default: bench/data)")
    p.add_argument("--data", type=Path, default=Path(DEFAULT_DATA), help="directory with the gzipped Fashion-MNIST IDX files")
    p.add_argument("--steps", type=int, default=200, help="SGD steps before the captured minibatch (default: 200)")
    p.add_argument("--seed", type=int, default=0, help="seed for initialisation and batch order (default: 0)")
    args = p.parse_args()
    if args.steps < 1:
        p.error("--steps must be at least 1: the gradients are taken mid-training")
    return args


def main():
    args = parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)

    start = time.perf_counter()
    x, y = fashion_mnist.load("train", Path(args.data))
    model = fashion_mnist.SmallCNN()
    batches = train(model, x, y, args.steps, args.seed)
    grads = capture(model, x, y, batches)
    f32_path, json_path = write_asset(args.out, grads, args.steps, args.seed)

    print_stats(grads)
    print(f"wrote {f32_path} ({f32_path.stat().st_size} bytes) and {json_path.name}")
    print(f"took {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
