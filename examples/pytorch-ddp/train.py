"""A small DDP training run whose gradients go through the node's gradgate gateway.

Started by torchrun (one process per GPU): it reads RANK, WORLD_SIZE and LOCAL_RANK from the
environment and the gateway's socket from GRADGATE_SOCKET. The model fits synthetic data, so the
example needs no data set; the gradgate lines are marked.
"""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import gradgate.torch

STEPS = int(os.environ.get("STEPS", "200"))
BATCH = 64
FEATURES = 256


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    use_cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    # DDP still needs a process group: it broadcasts the initial parameters (and the hook's run
    # id); the gradients themselves go through gradgate.
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    teacher = torch.nn.Linear(FEATURES, 1).to(device)
    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, 512), torch.nn.ReLU(), torch.nn.Linear(512, 1)
    ).to(device)
    ddp_model = DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)

    # The two gradgate lines: connect to this node's gateway and route DDP's buckets through it.
    state = gradgate.torch.HookState(os.environ["GRADGATE_SOCKET"], local_rank)
    ddp_model.register_comm_hook(state, gradgate.torch.allreduce_hook)

    if state.world_size != world_size:
        raise SystemExit(
            f"the gateways' job has {state.world_size} workers but torchrun started {world_size}: "
            "gateway.config.job.size x local_workers must equal nnodes x nproc_per_node"
        )

    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.01, momentum=0.9)
    # Optional third line: apply the optimizer's momentum before compression (momentum
    # correction), which keeps accuracy at high compression; the optimizer stays as it is.
    gradgate.torch.take_momentum(optimizer, ddp_model, state)
    generator = torch.Generator().manual_seed(rank)
    for step in range(STEPS):
        x = torch.randn(BATCH, FEATURES, generator=generator).to(device)
        with torch.no_grad():
            y = teacher(x)
        loss = torch.nn.functional.mse_loss(ddp_model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 0 and (step % 20 == 0 or step == STEPS - 1):
            print(
                f"step {step}: loss {loss.item():.4f}, this node's gradients "
                f"{state.raw_bytes / 1e6:.1f} MB, sent {state.wire_bytes / 1e6:.1f} MB",
                flush=True,
            )

    state.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
