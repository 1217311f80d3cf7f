#!/usr/bin/python3
"""One DDP worker of the gradgate demo: a small CNN on Fashion-MNIST.

Every rank trains on its shard of the training set (DistributedSampler, same seed everywhere)
with SGD and momentum. With --backend gradgate, DDP's gradient buckets go through the node's
gradgate gateway (gradgate.torch.allreduce_hook); with --backend gloo, DDP's own all-reduce is
the reference. torch.distributed (gloo) is needed in both cases: DDP broadcasts the
initial parameters with it, and the demo sums test results with it. The ranks meet through
--rendezvous, a directory they share (gradgate.local_rendezvous: a TCPStore on a free port).

After each epoch rank 0 prints one JSON line to stdout:
  {"epoch", "steps", "loss", "test_accuracy", "raw_bytes", "wire_bytes", "ratio", "seconds",
   "encode_seconds", "communicate_seconds", "decode_seconds", "backend", "codec"}
loss is the mean training loss of the epoch over all ranks, test_accuracy the accuracy (0-1) on
the 10k test images (each rank scores a shard), raw/wire bytes the running totals of all gateways
(gloo: the fp32 gradient bytes of all ranks, and what a ring all-reduce sends for them,
2(N-1)/N times as much: computed, not measured), seconds since training started. Errors go to stderr with a non-zero exit status.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

sys.path.append(str(Path(__file__).resolve().parents[2] / "client" / "python"))

import fashion_mnist  # noqa: E402  (next to this file)
from gradgate import local_rendezvous  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=("gradgate", "gloo"), default="gradgate")
    p.add_argument("--socket", help="the node gateway's Unix socket (gradgate backend)")
    p.add_argument("--local-rank", type=int, default=0, help="this worker's index on its node")
    p.add_argument("--rank", type=int, required=True, help="this worker's rank in the job")
    p.add_argument("--world-size", type=int, required=True, help="workers in the job")
    p.add_argument(
        "--rendezvous", type=Path, required=True, help="a fresh directory that the ranks share"
    )
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    add_momentum_correction_argument(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--codec", default="none", help="the gateways' codec (only reported)")
    p.add_argument("--timeout-ms", type=int, default=60000, help="per bucket all-reduce")
    p.add_argument("--data", type=Path, default=fashion_mnist.DEFAULT_DIR)
    args = p.parse_args()
    if args.backend == "gradgate" and not args.socket:
        p.error("--backend gradgate needs --socket")
    if not 0 <= args.rank < args.world_size:
        p.error(f"--rank {args.rank} is not in [0, {args.world_size})")
    if args.epochs < 1 or args.batch_size < 1:
        p.error("--epochs and --batch-size must be at least 1")
    return args


def add_momentum_correction_argument(parser):
    parser.add_argument("--momentum-correction", action="store_true",
                        help="gradgate backend: the hook takes SGD's momentum and applies it "
                        "before compression (gradgate.torch.take_momentum)")


def correct_momentum(optimizer, ddp_model, state, args):
    """With the gradgate hook (`state`) and --momentum-correction, the hook takes the optimizer's
    momentum."""
    if state is not None and args.momentum_correction:
        import gradgate.torch

        gradgate.torch.take_momentum(optimizer, ddp_model, state)


def attach_gradgate(ddp_model, args, shard_size):
    """Registers the gradgate hook on the DDP model; returns its HookState."""
    import gradgate.torch

    state = gradgate.torch.HookState(
        args.socket, args.local_rank, timeout_ms=args.timeout_ms, data_volume=shard_size
    )
    if state.world_size != args.world_size:
        raise SystemExit(
            f"rank {args.rank}: the gateway's job has {state.world_size} workers, "
            f"but --world-size is {args.world_size}"
        )
    ddp_model.register_comm_hook(state, gradgate.torch.allreduce_hook)
    return state


def evaluate(model, x, y, rank, world_size):
    """Accuracy on the whole test set: each rank scores every world_size-th image."""
    with torch.no_grad():
        predictions = model(x[rank::world_size]).argmax(dim=1)
    counts = torch.tensor([(predictions == y[rank::world_size]).sum().item(), len(predictions)])
    dist.all_reduce(counts)
    return counts[0].item() / counts[1].item()


def byte_totals(args, state, gloo_bytes):
    """Raw and wire bytes of the job so far: one count per gateway (its local rank 0)."""
    if state is None:
        ring_bytes = gloo_bytes * 2 * (args.world_size - 1) / args.world_size
        totals = torch.tensor([gloo_bytes, ring_bytes], dtype=torch.float64)
    elif args.local_rank == 0:
        totals = torch.tensor([state.raw_bytes, state.wire_bytes], dtype=torch.float64)
    else:
        totals = torch.zeros(2, dtype=torch.float64)
    dist.all_reduce(totals)
    return int(totals[0].item()), int(totals[1].item())


def train(args):
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    local_rendezvous.init_process_group(
        args.rank, args.world_size, args.rendezvous, timeout_s=max(60, 2 * args.timeout_ms / 1000)
    )
    x_train, y_train = fashion_mnist.load("train", args.data)
    x_test, y_test = fashion_mnist.load("t10k", args.data)
    sampler = DistributedSampler(
        range(len(x_train)), num_replicas=args.world_size, rank=args.rank, seed=args.seed
    )
    model = DistributedDataParallel(fashion_mnist.SmallCNN())
    state = attach_gradgate(model, args, len(sampler)) if args.backend == "gradgate" else None
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    correct_momentum(optimizer, model, state, args)
    gradient_bytes = sum(p.numel() * p.element_size() for p in model.parameters())

    start = time.perf_counter()
    steps = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        order = torch.tensor(list(sampler))
        loss_sum = torch.zeros(2, dtype=torch.float64)
        model.train()
        for batch in order.split(args.batch_size):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x_train[batch]), y_train[batch])
            loss.backward()
            optimizer.step()
            loss_sum += torch.tensor([loss.item(), 1.0], dtype=torch.float64)
            steps += 1
        dist.all_reduce(loss_sum)
        model.eval()
        accuracy = evaluate(model.module, x_test, y_test, args.rank, args.world_size)
        raw, wire = byte_totals(args, state, steps * gradient_bytes)
        if args.rank == 0:
            report = {
                "epoch": epoch + 1,
                "steps": steps,
                "loss": round(loss_sum[0].item() / loss_sum[1].item(), 5),
                "test_accuracy": round(accuracy, 5),
                "raw_bytes": raw,
                "wire_bytes": wire,
                "ratio": round(raw / wire, 2) if wire else None,
                "seconds": round(time.perf_counter() - start, 2),
                "backend": args.backend,
                "codec": args.codec if state else "none",
            }
            if state:
                report["encode_seconds"] = round(state.encode_seconds, 3)
                report["communicate_seconds"] = round(state.communicate_seconds, 3)
                report["decode_seconds"] = round(state.decode_seconds, 3)
            print(json.dumps(report), flush=True)
    if state:
        state.close()
    local_rendezvous.exit_process()


def run_rank(train_rank, args):
    """train_rank(args); on an error, one clear line for the launcher (not a DDP traceback), and
    the process ends at once: a rank that failed must not wait in the interpreter's gloo
    shutdown."""
    try:
        train_rank(args)
    except Exception as error:
        print(f"rank {args.rank}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        os._exit(1)
    return 0


def main():
    return run_rank(train, parse_args())


if __name__ == "__main__":
    sys.exit(main())
