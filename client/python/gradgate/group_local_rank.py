"""A process's worker index on its node, found from its torch.distributed process group.

For processes that no launcher told their local rank (a script run by mpirun, or one that starts
its workers with multiprocessing itself): every rank of the group names the gateway it uses, and
a process's local rank is the number of ranks before it in the group that use the same gateway.
Nothing is assumed about how the launcher numbered the ranks (node by node or interleaved).

A gateway is named by the machine it runs on (the kernel's boot id, the same in every container
of a node) and its socket (the device and inode of the socket's directory and the socket's file
name), so that training pods that mount the gateway's socket directory at different paths still
name it alike. Where the directory does not exist yet, its absolute path stands in for it.
"""

import os
import socket

BOOT_ID = "/proc/sys/kernel/random/boot_id"


def _machine():
    """This machine's boot id, shared by its containers; its host name where there is none."""
    try:
        with open(BOOT_ID) as boot_id:
            return boot_id.read().strip()
    except OSError:
        return socket.gethostname()


def gateway_key(socket_path):
    """What names the gateway at `socket_path` alike in every process of this machine."""
    directory, name = os.path.split(os.path.abspath(socket_path))
    try:
        status = os.stat(directory)
        where = (status.st_dev, status.st_ino)
    except OSError:
        where = directory
    return (_machine(), where, name)


def local_rank_in_group(socket_path, group=None):
    """This process's index among the ranks of `group` (None: the default group) that use the
    gateway at `socket_path`. A collective: every rank of the group must call it, in the same
    order as its other collectives; over NCCL the current CUDA device must be this rank's."""
    import torch.distributed as dist

    if not dist.is_initialized():
        raise RuntimeError(
            "gradgate: this process's worker index on the node is unknown (no LOCAL_RANK, no "
            "local rank given) and there is no torch.distributed process group to find it from"
        )
    keys = [None] * dist.get_world_size(group)
    mine = gateway_key(socket_path)
    dist.all_gather_object(keys, mine, group=group)
    return keys[: dist.get_rank(group)].count(mine)
