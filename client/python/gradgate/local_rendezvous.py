"""torch.distributed for the workers of one machine, with no fixed port (demos and tests).

DDP needs a process group even when gradgate moves the gradients. Rank 0 starts a TCPStore on
127.0.0.1 port 0 and publishes the bound port in `rendezvous_dir/store.port` (written to a
temporary name, then renamed); the other ranks poll for that file with a deadline. A TCPStore,
unlike a FileStore, has no shared file that a finishing rank deletes under the others' feet.
exit_process() waits for every rank (rank 0 serves the store) and ends the process.
"""

import datetime
import os
import sys
import time
from pathlib import Path

PORT_FILE = "store.port"
POLL_SECONDS = 0.05


def _publish_port(rendezvous_dir, port):
    target = Path(rendezvous_dir) / PORT_FILE
    temporary = target.with_suffix(".tmp")
    temporary.write_text(str(port))
    os.replace(temporary, target)


def _read_port(rendezvous_dir, timeout_s):
    target = Path(rendezvous_dir) / PORT_FILE
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if target.exists():
            return int(target.read_text())
        time.sleep(POLL_SECONDS)
    raise TimeoutError(f"rank 0 published no store port in {target} within {timeout_s:g} s")


def init_process_group(rank, world_size, rendezvous_dir, timeout_s=120.0):
    """Joins (rank 0: creates) the gloo process group of `world_size` ranks of this machine."""
    import torch.distributed as dist

    timeout = datetime.timedelta(seconds=timeout_s)
    if rank == 0:
        store = dist.TCPStore(
            "127.0.0.1", 0, world_size, True, timeout=timeout, wait_for_workers=False
        )
        _publish_port(rendezvous_dir, store.port)
    else:
        port = _read_port(rendezvous_dir, timeout_s)
        store = dist.TCPStore("127.0.0.1", port, world_size, False, timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size, timeout=timeout)


def exit_process(status=0):
    """Waits until every rank is done with the group, then ends this process at once.

    It skips the interpreter's shutdown on purpose: there, torch 1.13's ProcessGroupGloo
    destructor joins its worker threads while holding the GIL, and a worker that still has to
    free a tensor waits for that GIL forever. Write every result before calling this.
    """
    import torch.distributed as dist

    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
