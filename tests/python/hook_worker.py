#!/usr/bin/python3
"""One DDP rank of test_hook.py: trains a small model through gradgate's comm hook.

The model is built so that the hook meets what real training brings: several buckets (a small
bucket_cap_mb), a bucket layout that changes when DDP rebuilds its buckets after the first step
(layers registered in another order than they run), an fp16 bucket (an fp16 parameter next to
fp32 ones) and an uneven last batch (a dataset size that the batch size does not divide). The
data is a fixed random teacher, the same on every rank. With --device cuda the model, the data
and so DDP's buckets live on GPU 0 (every rank of the test shares it), and the hook all-reduces
the buckets in place.

Writes a JSON result to --result: per-step losses, the sha256 of the final parameters, the hook's
declared tensor names and the bucket layouts it saw per step. --momentum-correction moves SGD's
momentum into the hook (gradgate.torch.take_momentum).
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "client" / "python"))

import gradgate.torch  # noqa: E402
from gradgate import local_rendezvous  # noqa: E402

DATASET_SIZE = 1003  # not divisible by BATCH * world size: every epoch ends with a short batch
BATCH = 16
INPUTS = 64
CLASSES = 8


class OutOfOrderNet(nn.Module):
    """fp32 layers registered head-first (DDP's first bucket order) but run body-first (its
    rebuilt order), and an fp16 gain, which DDP puts in a bucket of its own."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(256, CLASSES)
        self.body1 = nn.Linear(INPUTS, 512)
        self.body2 = nn.Linear(512, 512)
        self.body3 = nn.Linear(512, 256)
        self.gain = nn.Parameter(torch.ones(256, dtype=torch.float16))

    def forward(self, x):
        h = F.relu(self.body1(x))
        h = F.relu(self.body2(h))
        h = F.relu(self.body3(h))
        return self.head(h * self.gain.float())


def teacher_data(seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(DATASET_SIZE, INPUTS, generator=generator)
    teacher = torch.randn(INPUTS, CLASSES, generator=generator)
    return x, (x @ teacher).argmax(dim=1)


def parameter_digest(model):
    digest = hashlib.sha256()
    for name, parameter in sorted(model.named_parameters()):
        digest.update(name.encode())
        digest.update(parameter.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def recording_hook(layouts):
    """gradgate's hook, recording the (index, numel, dtype) of every bucket per step."""

    def hook(state, bucket):
        tensor = bucket.buffer()
        layout = [bucket.index(), tensor.numel(), str(tensor.dtype)]
        layouts.setdefault(state.steps, []).append(layout)
        return gradgate.torch.allreduce_hook(state, bucket)

    return hook


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--local-rank", type=int, required=True)
    p.add_argument("--socket", required=True)
    p.add_argument("--rendezvous", type=Path, required=True)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--result", type=Path, required=True)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--momentum-correction", action="store_true",
                   help="the hook applies the SGD optimizer's momentum")
    args = p.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(1234 + args.rank)  # different initial weights: DDP must broadcast rank 0's
    local_rendezvous.init_process_group(args.rank, args.world_size, args.rendezvous)
    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    x, y = (t.to(device) for t in teacher_data(seed=7))
    sampler = DistributedSampler(
        range(len(x)), num_replicas=args.world_size, rank=args.rank, seed=3
    )
    model = DistributedDataParallel(
        OutOfOrderNet().to(device),
        device_ids=[device.index] if device.type == "cuda" else None,
        bucket_cap_mb=0.25,
    )
    state = gradgate.torch.HookState(args.socket, args.local_rank, timeout_ms=30000)
    layouts = {}
    model.register_comm_hook(state, recording_hook(layouts))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    if args.momentum_correction:
        gradgate.torch.take_momentum(optimizer, model, state)

    losses, batch_sizes, epoch = [], [], 0
    while len(losses) < args.steps:
        sampler.set_epoch(epoch)
        for batch in torch.tensor(list(sampler), device=device).split(BATCH):
            if len(losses) == args.steps:
                break
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x[batch]), y[batch])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            batch_sizes.append(len(batch))
        epoch += 1

    result = {
        "rank": args.rank,
        "world_size": state.world_size,
        "losses": losses,
        "batch_sizes": batch_sizes,
        "digest": parameter_digest(model.module),
        "declared": state.declared,
        "layouts": {str(step): layout for step, layout in layouts.items()},
        "hook_steps": state.steps,
        "device_path": state.device_path,
        "raw_bytes": state.raw_bytes,
        "wire_bytes": state.wire_bytes,
        "momentum_correction": state.momentum_correction,
        "velocities_on_device": state.momentum_correction is not None and all(
            v.device == device for v in state._momentum._velocities.values()),
    }
    state.close()
    args.result.write_text(json.dumps(result))
    local_rendezvous.exit_process()


if __name__ == "__main__":
    main()
