#!/usr/bin/python3
"""One DDP worker of the evaluation: an MLP or a small CNN on Fashion-MNIST, a fixed step budget.

The demo's worker (tools/demo/train.py) trains whole epochs on equal shards over loopback; the
evaluation needs more, and this worker adds it while reusing the demo's data loader, gradgate hook
and scoring: the ranks run on different hosts (the process group meets at --master-addr), the
gradients go through DDP's all-reduce (gloo), one of PyTorch's own comm hooks (fp16_compress_hook,
powerSGD_hook) or the node's gradgate gateway; shards may be imbalanced (--shares 8,4,2,1); it
trains for --steps steps (or until rank 0 has trained --max-seconds) and scores the test set
every --eval-every steps and at the end.

Rank 0 appends JSON lines to --log, one per event, each with "t" (Unix time):
  {"event": "start", "parameters", "gradient_bytes", "shard_sizes"}
  {"event": "step", "step", "seconds" (this step), "train_seconds" (all steps so far), "loss"}
  {"event": "eval", "step", "train_seconds", "test_accuracy" (0-1), "loss" (mean since the last)}
  {"event": "end", "step", "train_seconds", "test_accuracy", "hook_totals"}
train_seconds leaves out the time spent scoring. Errors go to stderr with a non-zero exit status.
"""

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "demo"))

import fashion_mnist  # noqa: E402  (tools/demo)
import train as demo  # noqa: E402  (tools/demo/train.py: attach_gradgate, evaluate, run_rank)
from gradgate import local_rendezvous  # noqa: E402  (train.py put client/python on the path)

MLP_HIDDEN = (1536, 1024)


class MLP(nn.Module):
    """784 -> 1536 -> 1024 -> 10 with ReLUs: 2.8 M parameters, communication-bound below 1 Gb/s."""

    def __init__(self, hidden=MLP_HIDDEN):
        super().__init__()
        sizes = (28 * 28,) + tuple(hidden)
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
        self.out = nn.Linear(sizes[-1], 10)

    def forward(self, x):
        x = torch.flatten(x, 1)
        for layer in self.hidden:
            x = F.relu(layer(x))
        return self.out(x)


MODELS = {"mlp": MLP, "cnn": fashion_mnist.SmallCNN}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=sorted(MODELS), default="mlp")
    p.add_argument("--backend", choices=("gloo", "gradgate"), default="gloo")
    p.add_argument("--hook", choices=("none", "fp16", "powersgd"), default="none",
                   help="PyTorch's own comm hook (gloo backend)")
    p.add_argument("--psgd-rank", type=int, default=2, help="powerSGD_hook's approximation rank")
    p.add_argument("--psgd-start-iter", type=int, default=1000,
                   help="powerSGD_hook's start_powerSGD_iter (its warm-up; 1000 is its default)")
    p.add_argument("--single-bucket", action="store_true",
                   help="the whole gradient in one DDP bucket (powerSGD_hook aborts over gloo "
                   "with two buckets in flight)")
    p.add_argument("--socket", help="the node gateway's Unix socket (gradgate backend)")
    p.add_argument("--local-rank", type=int, default=0)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--master-addr", required=True, help="rank 0's address (its TCPStore)")
    p.add_argument("--master-port", type=int, default=29500)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--max-seconds", type=float, default=0.0,
                   help="stop (and score) once rank 0 has trained this long (0: never)")
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    demo.add_momentum_correction_argument(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shares", default="", help="shard sizes in proportion, e.g. 8,4,2,1")
    p.add_argument("--timeout-ms", type=int, default=60000, help="per gradgate bucket all-reduce")
    p.add_argument("--group-timeout", type=float, default=120.0, help="gloo timeout, seconds")
    p.add_argument("--log", type=Path, help="rank 0's JSON-lines event log")
    p.add_argument("--data", type=Path, default=fashion_mnist.DEFAULT_DIR)
    args = p.parse_args(argv)
    if args.backend == "gradgate" and not args.socket:
        p.error("--backend gradgate needs --socket")
    if args.backend == "gradgate" and args.hook != "none":
        p.error("--hook applies to the gloo backend only")
    if not 0 <= args.rank < args.world_size:
        p.error(f"--rank {args.rank} is not in [0, {args.world_size})")
    if args.steps < 1 or args.eval_every < 1 or args.batch_size < 1:
        p.error("--steps, --eval-every and --batch-size must be at least 1")
    args.share_list = [float(s) for s in args.shares.split(",")] if args.shares else []
    if args.share_list and (len(args.share_list) != args.world_size or min(args.share_list) <= 0):
        p.error(f"--shares needs {args.world_size} positive numbers")
    return args


def shard_bounds(samples, world_size, shares):
    """[(begin, end)] of each rank's slice of a shuffled index list, sizes in proportion."""
    shares = shares or [1.0] * world_size
    edges = [0]
    for i in range(world_size):
        edges.append(round(samples * sum(shares[: i + 1]) / sum(shares)))
    return list(zip(edges, edges[1:]))


def batches(shard, batch_size, seed):
    """Endless batches of `shard` (a tensor of sample indices), reshuffled every pass."""
    generator = torch.Generator().manual_seed(seed)
    while True:
        order = shard[torch.randperm(len(shard), generator=generator)]
        for begin in range(0, len(order) - batch_size + 1, batch_size):
            yield order[begin : begin + batch_size]


def make_ddp(module, single_bucket):
    """DDP around `module`; single_bucket: one bucket for the whole gradient (DDP's first
    bucket is capped by dist._DEFAULT_FIRST_BUCKET_BYTES, the others by bucket_cap_mb)."""
    if not single_bucket:
        return DistributedDataParallel(module)
    gradient_bytes = sum(p.numel() * p.element_size() for p in module.parameters())
    dist._DEFAULT_FIRST_BUCKET_BYTES = gradient_bytes
    return DistributedDataParallel(module, bucket_cap_mb=gradient_bytes / 2**20 + 1)


def attach_hook(model, args):
    """Registers the chosen comm hook; the gradgate HookState or None."""
    if args.backend == "gradgate":
        return demo.attach_gradgate(model, args, args.shard_size)
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd

    if args.hook == "fp16":
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif args.hook == "powersgd":
        state = powersgd.PowerSGDState(
            process_group=None,
            matrix_approximation_rank=args.psgd_rank,
            start_powerSGD_iter=args.psgd_start_iter,
            random_seed=args.seed,
        )
        model.register_comm_hook(state, powersgd.powerSGD_hook)
    return None


class EventLog:
    """Rank 0's JSON-lines log (other ranks write nothing)."""

    def __init__(self, path):
        self.file = open(path, "a") if path else None

    def emit(self, event, **fields):
        if self.file:
            record = {"event": event, "t": round(time.time(), 4), **fields}
            self.file.write(json.dumps(record) + "\n")
            self.file.flush()


def init_group(args):
    timeout = datetime.timedelta(seconds=args.group_timeout)
    store = dist.TCPStore(args.master_addr, args.master_port, args.world_size, args.rank == 0,
                          timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=args.rank, world_size=args.world_size,
                            timeout=timeout)


def stop_now(args, train_seconds):
    """Rank 0's verdict on --max-seconds, the same on every rank (a collective, outside the
    step's timing; none without --max-seconds)."""
    if not args.max_seconds:
        return False
    flag = torch.tensor([1 if train_seconds >= args.max_seconds else 0])
    dist.broadcast(flag, src=0)
    return bool(flag.item())


def train(args):
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    init_group(args)
    x_train, y_train = fashion_mnist.load("train", args.data)
    x_test, y_test = fashion_mnist.load("t10k", args.data)
    order = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(args.seed))
    bounds = shard_bounds(len(order), args.world_size, args.share_list)
    begin, end = bounds[args.rank]
    args.shard_size = end - begin
    model = make_ddp(MODELS[args.model](), args.single_bucket)
    state = attach_hook(model, args)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    demo.correct_momentum(optimizer, model, state, args)
    parameters = sum(p.numel() for p in model.parameters())
    log = EventLog(args.log if args.rank == 0 else None)
    log.emit("start", parameters=parameters, gradient_bytes=4 * parameters,
             shard_sizes=[b - a for a, b in bounds], model=args.model)

    train_seconds = 0.0
    losses = []
    accuracy = None
    source = batches(order[begin:end], args.batch_size, args.seed + args.rank)
    for step in range(1, args.steps + 1):
        started = time.perf_counter()
        model.train()
        batch = next(source)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x_train[batch]), y_train[batch])
        loss.backward()
        optimizer.step()
        loss_value = loss.item()
        seconds = time.perf_counter() - started
        train_seconds += seconds
        losses.append(loss_value)
        log.emit("step", step=step, seconds=round(seconds, 5),
                 train_seconds=round(train_seconds, 4), loss=round(loss_value, 5))
        stop = stop_now(args, train_seconds)
        if step % args.eval_every == 0 or step == args.steps or stop:
            model.eval()
            accuracy = demo.evaluate(model.module, x_test, y_test, args.rank, args.world_size)
            log.emit("eval", step=step, train_seconds=round(train_seconds, 4),
                     test_accuracy=round(accuracy, 5), loss=round(sum(losses) / len(losses), 5))
            losses = []
        if stop:
            break
    totals = None
    if state:
        totals = {k: getattr(state, k) for k in ("raw_bytes", "wire_bytes", "encode_seconds",
                                                 "communicate_seconds", "decode_seconds")}
    log.emit("end", step=step, train_seconds=round(train_seconds, 4), test_accuracy=accuracy,
             hook_totals=totals)
    if state:
        state.close()
    local_rendezvous.exit_process()


def main():
    return demo.run_rank(train, parse_args())


if __name__ == "__main__":
    sys.exit(main())
