#!/usr/bin/python3
"""An ordinary DDP training script that knows nothing of gradgate, for test_autohook.py's
AutoHookTest: gradgate.run must send its gradients through the gateways without a change to it.

Trains a small MLP on a fixed random teacher over gloo and writes a JSON result to --result
(where "{rank}" becomes the rank): the losses, the steps skipped and the sha256 of the final
parameters. The rendezvous, rank and world size default to torchrun's (env://, RANK,
WORLD_SIZE).
--own-hook registers a comm hook of the script's own. --inf-step N makes rank 0's loss infinite
at step N; like mixed-precision loss scaling (GradScaler), every rank skips the optimizer step
whose gradients are not all finite. --spawn N starts N workers with torch.multiprocessing.spawn,
as PyTorch's ImageNet example does: --rank is then the node's, and worker i of node r has rank
r * N + i. --processes N starts N workers with multiprocessing.Process (by --start-method), as a
script that numbers its workers itself might: worker i of node r has rank i * nodes + r (the
nodes' ranks interleave).
--weight-decay (on the weights, not the biases: two parameter groups), --nesterov and --dampening
set the SGD optimizer's (momentum 0.9), --clip-norm X clips the gradients' norm to X, --accumulate
N accumulates each step's gradient over N micro-batches, all but the last under DDP's no_sync()
(with --without-no-sync, none: every backward pass all-reduces);
the result also holds the final parameters, the groups' settings after training and how many
momentum buffers the optimizer holds. --checkpoint FILE ("{rank}" becomes the rank): a rank whose
FILE exists resumes from it (model, optimizer and step); --stop-after N saves FILE after step N and
stops there.
"""

import argparse
import contextlib
import hashlib
import json
import multiprocessing
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.nn.utils import clip_grad_norm_


def averaging_hook(world_size, bucket):
    """A comm hook of the script's own: gloo's all-reduce, averaged."""
    tensor = bucket.buffer()
    dist.all_reduce(tensor)
    tensor.div_(world_size)
    future = torch.futures.Future()
    future.set_result(tensor)
    return future


def parse_arguments():
    p = argparse.ArgumentParser()
    p.add_argument("--init-method", default="env://")
    p.add_argument("--rank", type=int, default=os.environ.get("RANK"))
    p.add_argument("--world-size", type=int, default=os.environ.get("WORLD_SIZE"))
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--own-hook", action="store_true")
    p.add_argument("--inf-step", type=int, default=-1)
    p.add_argument("--spawn", type=int, default=0)
    p.add_argument("--processes", type=int, default=0)
    p.add_argument("--start-method", default="fork")
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--nesterov", action="store_true")
    p.add_argument("--dampening", type=float, default=0.0)
    p.add_argument("--clip-norm", type=float, default=0.0)
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--without-no-sync", action="store_true")
    p.add_argument("--checkpoint", default="")
    p.add_argument("--stop-after", type=int, default=0)
    p.add_argument("--result", required=True)
    return p.parse_args()


def spawned_worker(index, args):
    """Worker `index` of a node's torch.multiprocessing.spawn."""
    args.rank = args.rank * args.spawn + index
    train(args)


def started_worker(index, args):
    """Worker `index` of a node's multiprocessing.Process workers; ranks interleave over nodes."""
    args.rank = index * (args.world_size // args.processes) + args.rank
    train(args)


def start_processes(args):
    """Starts the node's --processes workers and waits for them; fails if one failed."""
    context = multiprocessing.get_context(args.start_method)
    workers = [context.Process(target=started_worker, args=(index, args))
               for index in range(args.processes)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    failed = [worker.exitcode for worker in workers if worker.exitcode != 0]
    if failed:
        raise SystemExit(f"workers failed with exit codes {failed}")


def train(args):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=args.init_method, rank=args.rank,
                            world_size=args.world_size)
    torch.manual_seed(5 + args.rank)  # DDP broadcasts rank 0's initial weights
    model = DistributedDataParallel(nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 4)))
    if args.own_hook:
        model.register_comm_hook(args.world_size, averaging_hook)
    generator = torch.Generator().manual_seed(11)
    x = torch.randn(512, 32, generator=generator)
    y = (x @ torch.randn(32, 4, generator=generator)).argmax(dim=1)
    weights = [p for p in model.parameters() if p.dim() > 1]
    biases = [p for p in model.parameters() if p.dim() == 1]
    optimizer = torch.optim.SGD(
        [{"params": weights, "weight_decay": args.weight_decay}, {"params": biases}], lr=0.1,
        momentum=0.9, nesterov=args.nesterov, dampening=args.dampening)
    shard = torch.arange(args.rank, len(x), args.world_size)
    losses, skipped = [], []
    checkpoint, first_step = args.checkpoint.format(rank=args.rank), 0
    if checkpoint and os.path.exists(checkpoint):
        saved = torch.load(checkpoint)
        model.module.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        first_step = saved["step"]
    for step in range(first_step, args.steps):
        batch = shard[(step * 16) % len(shard):][:16]
        optimizer.zero_grad()
        parts = batch.chunk(args.accumulate)
        for index, part in enumerate(parts):
            synced = args.without_no_sync or index == len(parts) - 1
            with contextlib.nullcontext() if synced else model.no_sync():
                loss = F.cross_entropy(model(x[part]), y[part]) / len(parts)
                if step == args.inf_step and args.rank == 0:
                    loss = loss * float("inf")
                loss.backward()
        if args.clip_norm:
            clip_grad_norm_(model.parameters(), args.clip_norm)
        if all(torch.isfinite(p.grad).all() for p in model.parameters()):
            optimizer.step()
            losses.append(loss.item())
        else:
            skipped.append(step)
        if step + 1 == args.stop_after:
            torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                        "step": step + 1}, checkpoint)
            break
    digest = hashlib.sha256()
    for parameter in model.module.parameters():
        digest.update(parameter.detach().contiguous().view(torch.uint8).numpy().tobytes())
    with open(args.result.format(rank=args.rank), "w") as result:
        json.dump({
            "losses": losses, "skipped": skipped, "digest": digest.hexdigest(),
            "parameters": [x for p in model.module.parameters() for x in p.flatten().tolist()],
            "groups": [[g["momentum"], g["weight_decay"], g["nesterov"]]
                       for g in optimizer.param_groups],
            "momentum_buffers": sum(s.get("momentum_buffer") is not None
                                   for s in optimizer.state.values()),
        }, result)
    # No dist.destroy_process_group(): with PyTorch 1.13 over gloo it hangs now and then after
    # comm hooks that use gloo, gradgate or not.


def main():
    args = parse_arguments()
    if args.spawn:
        torch.multiprocessing.spawn(spawned_worker, args=(args,), nprocs=args.spawn)
    elif args.processes:
        start_processes(args)
    else:
        train(args)


if __name__ == "__main__":
    main()
