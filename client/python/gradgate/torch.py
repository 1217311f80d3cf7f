"""A PyTorch DDP communication hook that all-reduces gradient buckets through gradgate.

    state = gradgate.torch.HookState(socket_path, local_rank)
    model = DistributedDataParallel(model)
    model.register_comm_hook(state, gradgate.torch.allreduce_hook)

For every bucket DDP hands over, the hook declares a gradgate tensor once per bucket layout
(index, element count, dtype), named "<prefix>.bucket<index>.<numel>.<dtype>": DDP rebuilds its
buckets after the first step, and a new layout simply declares new names. It copies the bucket
into the tensor's shared buffer (viewed as a torch tensor of the bucket's dtype: fp32, fp16 or
bf16), all-reduces it through the node's gateway, waits, and copies the sum back divided by the
job's world size: DDP expects the average. The returned Future is already complete.

The hook runs synchronously in DDP's autograd thread. A failure (timeout, a peer that failed, a
closed gateway, an unsupported dtype) raises RuntimeError with the library's message, which DDP
surfaces from backward(). HookState keeps running totals (raw and wire bytes, all-reduces, steps,
seconds) for progress reports. torch is imported here only, so `import gradgate` works without it.
"""

import ctypes
import secrets
import time

import torch

from .client import Client
from .errors import GradgateError

_DTYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def gradgate_dtype(dtype):
    """The gradgate name ("fp32", "fp16", "bf16") of a torch dtype; RuntimeError for others."""
    if dtype not in _DTYPES:
        raise RuntimeError(f"gradgate: {dtype} gradients are not supported (fp32, fp16, bf16)")
    return _DTYPES[dtype]


def _agreed_run_id():
    """A random 64-bit id drawn by rank 0 of the default process group and known to every rank."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        return 0
    value = [secrets.randbits(63) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(value, src=0)
    return int(value[0])


class HookState:
    """The hook's connection to the gateway, its declared buckets, and its running totals.

    socket_path, local_rank: the node's gateway and this process's worker index on the node.
    timeout_ms: how long one bucket's all-reduce may take before the hook fails.
    name_prefix: prefixes tensor names (distinct per DDP model when a process has several).
    data_volume: samples this worker trains on, passed to the gateway for data-aware ratios.
    run_id: names this run of the job in every tensor name, so that nothing of an earlier, failed
        run (its frames still in flight) can mix into this one. By default rank 0 draws one and
        broadcasts it over the default process group (a collective: every rank constructs its
        HookState at the same point); without a process group it is 0.
    """

    def __init__(
        self, socket_path, local_rank, timeout_ms=60000, name_prefix="ddp", data_volume=0,
        run_id=None,
    ):
        self.run_id = _agreed_run_id() if run_id is None else int(run_id)
        self.client = Client(socket_path, local_rank)
        self.world_size = self.client.job.world_size
        self.timeout_ms = int(timeout_ms)
        self.name_prefix = name_prefix
        self.data_volume = data_volume
        self._buffers = {}  # (index, numel, dtype) -> (gradgate Tensor, torch view of its buffer)
        self.raw_bytes = 0
        self.wire_bytes = 0
        self.allreduces = 0
        self.steps = 0
        self.seconds = 0.0
        self.encode_seconds = 0.0
        self.communicate_seconds = 0.0
        self.decode_seconds = 0.0

    @property
    def declared(self):
        """Names of the tensors declared so far, in declaration order."""
        return [tensor.name for tensor, _ in self._buffers.values()]

    def shared_view(self, index, numel, dtype):
        """The gradgate tensor and torch view for one bucket layout, declared on first use."""
        key = (index, numel, dtype)
        if key not in self._buffers:
            kind = gradgate_dtype(dtype)
            name = f"{self.name_prefix}.{self.run_id:016x}.bucket{index}.{numel}.{kind}"
            tensor = self.client.declare(name, numel, kind, data_volume=self.data_volume)
            raw = (ctypes.c_uint8 * (numel * tensor.dtype.itemsize)).from_address(tensor.address)
            self._buffers[key] = (tensor, torch.frombuffer(raw, dtype=dtype))
        return self._buffers[key]

    def allreduce_average(self, index, grads):
        """Replaces the flat tensor `grads` with its average over the job's workers."""
        start = time.perf_counter()
        tensor, view = self.shared_view(index, grads.numel(), grads.dtype)
        view.copy_(grads)
        info = tensor.allreduce().wait(self.timeout_ms)
        grads.copy_(view).div_(self.world_size)
        self.raw_bytes += info.raw_bytes
        self.wire_bytes += info.wire_bytes
        self.encode_seconds += info.encode_seconds
        self.communicate_seconds += info.communicate_seconds
        self.decode_seconds += info.decode_seconds
        self.allreduces += 1
        self.seconds += time.perf_counter() - start

    def close(self):
        """Closes the connection; the hook must not run afterwards."""
        self._buffers.clear()
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def _bucket_tensor(bucket):
    # torch >= 1.10 names it buffer(); older releases get_tensor().
    return bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()


def allreduce_hook(state, bucket):
    """DDP comm hook: the bucket's gradients averaged over all workers through gradgate."""
    grads = _bucket_tensor(bucket)
    try:
        state.allreduce_average(bucket.index(), grads)
    except GradgateError as error:
        raise RuntimeError(
            f"gradgate: all-reduce of bucket {bucket.index()} ({grads.numel()} x {grads.dtype}) "
            f"failed: {error}"
        ) from error
    if not hasattr(bucket, "is_last") or bucket.is_last():
        state.steps += 1
    future = torch.futures.Future()
    future.set_result(grads)
    return future
