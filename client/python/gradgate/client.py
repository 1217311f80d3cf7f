"""A Pythonic client of the node's gradgate gateway, over libgradgate's C interface.

    with gradgate.Client("/run/gradgate/gg.sock", local_rank=0) as client:
        grads = client.declare("layer1.weight", 4096, "fp32")
        grads.buffer[:] = ...            # a writable view of the shared-memory buffer
        info = grads.allreduce().wait(timeout_ms=30000)
        # grads.buffer now holds the sum over every worker of the job

Client connects as one worker of its node; Tensor is a declared tensor with its shared buffer, or
(Client.declare_cuda) over a torch CUDA tensor that the gateway maps through CUDA IPC; Request is
one all-reduce in flight. Every failure raises a gradgate.GradgateError subclass with
the library's message. Closing the client frees its tensors and requests: their buffers must not
be used afterwards (every method of a closed client's objects raises ClosedError).
Thread-safety is the library's: calls may come from any thread; one tensor may have at most one
all-reduce in flight.
"""

import ctypes
import enum
import logging
import os
import threading
from dataclasses import dataclass

from . import _native, errors


class DType(enum.IntEnum):
    """Element types of shared buffers (gg_dtype)."""

    FP32 = 0
    FP16 = 1
    BF16 = 2

    @property
    def itemsize(self):
        return 4 if self is DType.FP32 else 2

    @classmethod
    def parse(cls, value):
        """A DType from a DType, its name or a common alias ("float32", "half", "bfloat16", ...)."""
        if isinstance(value, DType):
            return value
        key = str(value).lower().removeprefix("torch.")
        for dtype, aliases in _DTYPE_ALIASES.items():
            if key in aliases:
                return dtype
        raise errors.InvalidArgumentError(
            f"unsupported dtype {value!r}: use one of fp32, fp16, bf16"
        )


_DTYPE_ALIASES = {
    DType.FP32: ("fp32", "float32", "float"),
    DType.FP16: ("fp16", "float16", "half"),
    DType.BF16: ("bf16", "bfloat16"),
}


@dataclass(frozen=True)
class JobInfo:
    """The job as the gateway sees it: its rank, the gateways, its workers, all workers, and how
    long it lets a step take (collective.timeout_ms: a step whose workers or peers do not all come
    within it fails, and so does an exchange that takes longer)."""

    node_rank: int
    nodes: int
    local_workers: int
    world_size: int
    collective_timeout_ms: int

    @property
    def outlasting_timeout_ms(self):
        """A wait that outlasts the gateway's own limits on a step (a local wait and the exchange,
        each up to collective_timeout_ms, and 10 s to answer), so that the gateway's error,
        which says why, comes before the waiter gives up."""
        return 2 * self.collective_timeout_ms + 10000


@dataclass(frozen=True)
class AllreduceInfo:
    """How one all-reduce went (bytes of the node's sum and on the wire; seconds per phase) and
    the codec the gateways used ("topk", ...: the gateways' policy may change it between steps;
    a sparse codec's sum is zero wherever no gateway sent the element)."""

    step: int
    raw_bytes: int
    wire_bytes: int
    encode_seconds: float
    communicate_seconds: float
    decode_seconds: float
    codec: str


# torch's storage handles (_share_cuda_): the 64-byte cudaIpcMemHandle_t itself in older releases;
# later ones prefix a version byte and a kind byte, b"c" for a plain cudaMalloc block.
_CUDA_IPC_HANDLE_BYTES = 64
_TORCH_CUDA_MALLOC_KIND = ord("c")


def storage_of(tensor):
    """The storage under `tensor`: untyped_storage() from torch 2.0, storage() before (both
    share CUDA memory with _share_cuda_())."""
    untyped = getattr(tensor, "untyped_storage", None)
    return untyped() if untyped is not None else tensor.storage()


def cuda_device_uuid(device):
    """The 16 bytes of the UUID of torch's CUDA device `device`, as the gateway names GPUs.

    torch's device properties carry it from torch 2.0; before, the CUDA driver is asked
    (cuDeviceGetUuid_v2, else cuDeviceGetUuid). Raises RejectedError when neither can tell.
    """
    import torch

    uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    if uuid is not None:
        return bytes(uuid.bytes)
    return driver_device_uuid(device)


def driver_device_uuid(device):
    """cuDeviceGetUuid of the CUDA driver for device ordinal `device`; RejectedError if the driver
    cannot be loaded or answers an error."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        raise errors.RejectedError(f"cannot load the CUDA driver (libcuda.so.1): {error}") from None
    get_uuid = getattr(driver, "cuDeviceGetUuid_v2", None) or driver.cuDeviceGetUuid
    handle = ctypes.c_int()
    uuid = (ctypes.c_char * 16)()
    for call, args in ((driver.cuInit, (0,)), (driver.cuDeviceGet, (ctypes.byref(handle), device)),
                       (get_uuid, (uuid, handle))):
        result = call(*args)
        if result != 0:
            raise errors.RejectedError(
                f"the CUDA driver's {call.__name__} for device {device} failed with error {result}"
            )
    return bytes(uuid)


def cuda_ipc_memory_handle(storage_handle):
    """The cudaIpcMemHandle_t bytes in a storage handle of torch's _share_cuda_().

    Raises RejectedError for memory that CUDA IPC cannot open (torch's expandable segments).
    """
    handle = bytes(storage_handle)
    if len(handle) == _CUDA_IPC_HANDLE_BYTES:
        return handle
    if len(handle) == _CUDA_IPC_HANDLE_BYTES + 2 and handle[1] == _TORCH_CUDA_MALLOC_KIND:
        return handle[2:]
    raise errors.RejectedError(
        f"torch shares this memory with a {len(handle)}-byte handle that is not a cudaMalloc "
        "block (expandable segments?): it cannot be opened through CUDA IPC"
    )


def _raise_status(lib, status, message):
    raise errors.from_status(status, lib.gg_status_name(status).decode(), message)


def _check(code):
    if code != _native.GG_OK:
        lib = _native.library()
        _raise_status(lib, code, lib.gg_last_error().decode(errors="replace"))


_log = logging.getLogger("gradgate")
# How long the DDP hook (HookState, python -m gradgate.run) waits for its gateway by default:
# longer than a gateway of a Kubernetes job takes to start and join (its rank, the other nodes'
# gateways: control.join_timeout_ms, 120 s by default), so that pods may start in any order.
HOOK_CONNECT_TIMEOUT_MS = 300000
_MAX_TIMEOUT_MS = 2**32 - 1  # gg_connect_wait's timeout is a uint32_t
# A connect still waiting after this long says so on the "gradgate" logger.
_WAIT_NOTICE_S = 0.2
# (socket path, local rank) of this process's open clients: a second one could only wait for the
# first to close.
_ranks_held = set()
_ranks_lock = threading.Lock()


def _hold_rank(socket_path, local_rank):
    """The key of a rank this process takes on a socket; RankInUseError if it holds it already."""
    key = (os.path.realpath(socket_path), local_rank)
    with _ranks_lock:
        if key in _ranks_held:
            raise errors.RankInUseError(
                f"this process is already connected to {socket_path} as local rank {local_rank}:"
                " share that Client (HookState(client=...)) instead of connecting again"
            )
        _ranks_held.add(key)
    return key


def _release_rank(key):
    with _ranks_lock:
        _ranks_held.discard(key)


class _ConnectWait:
    """gg_connect_wait on a thread of its own: the caller waits for it on an Event, which Ctrl-C
    interrupts (a C call on the caller's thread would hold it until its timeout). A connection
    that an abandoned wait makes afterwards is closed, so that it does not keep the rank."""

    def __init__(self, lib, path, local_rank, timeout_ms):
        self._lib = lib
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._abandoned = False
        self.handle = _native.ClientHandle()
        self.status = None
        self.message = ""
        threading.Thread(
            target=self._run, args=(path, local_rank, timeout_ms), name="gradgate-connect",
            daemon=True,
        ).start()

    def _run(self, path, local_rank, timeout_ms):
        status = self._lib.gg_connect_wait(path, local_rank, timeout_ms, ctypes.byref(self.handle))
        message = self._lib.gg_last_error().decode(errors="replace")  # this thread's
        with self._lock:
            self.status, self.message = status, message
            if self._abandoned and status == _native.GG_OK:
                self._lib.gg_close(self.handle)
        self._done.set()

    def result(self):
        """(status, message) of the wait; the caller's KeyboardInterrupt abandons it."""
        try:
            self._done.wait()
        except BaseException:
            with self._lock:
                self._abandoned = True
                if self.status == _native.GG_OK:  # connected just before the interrupt
                    self._lib.gg_close(self.handle)
            raise
        return self.status, self.message


def _connect(lib, path, local_rank, timeout_ms, handle):
    """Connects `handle`, raising the GradgateError of a failure. When the first attempt fails and
    `timeout_ms` > 0, gg_connect_wait goes on for up to `timeout_ms` if the failure is one that
    waiting may cure (it alone decides which: others fail again at once), with one warning (the
    first failure) if it is still waiting after _WAIT_NOTICE_S."""
    status = lib.gg_connect(path, local_rank, ctypes.byref(handle))
    if status == _native.GG_OK:
        return
    first_failure = lib.gg_last_error().decode(errors="replace")
    if timeout_ms <= 0:
        _raise_status(lib, status, first_failure)
    notice = threading.Timer(
        _WAIT_NOTICE_S, _log.warning,
        ("gradgate: %s; trying again for up to %d ms", first_failure, timeout_ms),
    )
    notice.daemon = True
    notice.start()
    wait = _ConnectWait(lib, path, local_rank, min(timeout_ms, _MAX_TIMEOUT_MS))
    try:
        status, message = wait.result()
    finally:
        notice.cancel()
    if status != _native.GG_OK:
        _raise_status(lib, status, message)
    handle.value = wait.handle.value


class Client:
    """A connection to the gateway of this node as worker `local_rank`.

    connect_timeout_ms: how long to wait for a gateway that is not there yet (no socket, or none
    listening: it starts or restarts) or for the rank to be free (its previous worker has not
    left yet), with a warning on the "gradgate" logger once it has waited a moment; 0: one
    attempt."""

    def __init__(self, socket_path, local_rank, connect_timeout_ms=0):
        self._lib = _native.library()
        handle = _native.ClientHandle()
        path = str(socket_path).encode()
        self._rank_key = _hold_rank(str(socket_path), int(local_rank))
        try:
            _connect(self._lib, path, int(local_rank), int(connect_timeout_ms), handle)
        except BaseException:
            _release_rank(self._rank_key)
            raise
        self._handle = handle
        self.socket_path = str(socket_path)
        self.local_rank = int(local_rank)
        info = _native.JobInfo()
        timeout_ms = ctypes.c_uint32()
        try:
            _check(self._lib.gg_job(self._handle, ctypes.byref(info)))
            _check(self._lib.gg_collective_timeout(self._handle, ctypes.byref(timeout_ms)))
        except errors.GradgateError:
            self.close()
            raise
        self.job = JobInfo(
            info.node_rank, info.nodes, info.local_workers, info.world_size, timeout_ms.value
        )

    @property
    def closed(self):
        return self._handle is None

    def handle(self):
        """The native gg_client*; raises ClosedError once the client is closed."""
        if self._handle is None:
            raise errors.ClosedError(f"the client of {self.socket_path} is closed")
        return self._handle

    def declare(self, name, elements, dtype, shape=None, data_volume=0):
        """Declares tensor `name` of `elements` elements of `dtype`; returns its Tensor.

        `shape` is its (rows, cols) for low-rank codecs (None: no 2-D shape), `data_volume` the
        number of samples this worker trains on (0: unknown). Every worker of the job declares the
        same names with the same sizes.
        """
        dtype = DType.parse(dtype)
        rows, cols = (0, 0) if shape is None else (int(shape[0]), int(shape[1]))
        handle = _native.TensorHandle()
        _check(
            self._lib.gg_declare(
                self.handle(),
                str(name).encode(),
                int(elements),
                int(dtype),
                rows,
                cols,
                float(data_volume),
                ctypes.byref(handle),
            )
        )
        return Tensor(self, handle, str(name), int(elements), dtype)

    def declare_cuda(self, name, tensor, rows=0, cols=0, data_volume=0, *, ready_event):
        """Declares tensor `name` over the GPU memory of `tensor`; returns its Tensor.

        `tensor` is a contiguous torch CUDA tensor of fp32, fp16 or bf16 whose memory stays
        allocated while the client is open: the gateway maps it through CUDA IPC and all-reduces
        it in place (the Tensor has no `buffer`). `ready_event` is a
        torch.cuda.Event(interprocess=True): record it on the stream that wrote the gradient before
        every allreduce(); the gateway waits for it before it reads. After a successful wait the
        sum is in `tensor`. `rows`, `cols` and `data_volume` are as for declare(). Raises
        RejectedError when the gateway (or torch's allocator) cannot share the memory: declare() a
        shared buffer instead.
        """
        import torch

        if not tensor.is_cuda or not tensor.is_contiguous():
            raise errors.InvalidArgumentError(
                f"tensor {name!r}: declare_cuda needs a contiguous CUDA tensor, not a "
                f"{'non-contiguous ' if tensor.is_cuda else ''}{tensor.device} one"
            )
        dtype = DType.parse(tensor.dtype)
        device = tensor.device.index
        _, storage_handle, _, storage_offset = storage_of(tensor)._share_cuda_()[:4]
        buffer = _native.CudaBuffer()
        buffer.device_uuid[:] = cuda_device_uuid(device)
        buffer.memory_handle[:] = cuda_ipc_memory_handle(storage_handle)
        buffer.offset = storage_offset + tensor.storage_offset() * tensor.element_size()
        with torch.cuda.device(device):
            buffer.ready_event_handle[:] = ready_event.ipc_handle()
        handle = _native.TensorHandle()
        _check(
            self._lib.gg_declare_cuda(
                self.handle(),
                str(name).encode(),
                tensor.numel(),
                int(dtype),
                int(rows),
                int(cols),
                float(data_volume),
                ctypes.byref(buffer),
                ctypes.byref(handle),
            )
        )
        return Tensor(self, handle, str(name), tensor.numel(), dtype, device_tensor=tensor)

    def close(self):
        """Closes the connection (idempotent); its tensors and requests become invalid."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            _release_rank(self._rank_key)
            _check(self._lib.gg_close(handle))

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


class Tensor:
    """A declared tensor: `buffer` is a writable ctypes byte array over its shared memory, or, for a
    tensor of declare_cuda, `device_tensor` the torch CUDA tensor that the gateway works in."""

    def __init__(self, client, handle, name, elements, dtype, device_tensor=None):
        self._client = client
        self._handle = handle
        self.name = name
        self.elements = elements
        self.dtype = dtype
        self.device_tensor = device_tensor
        self.released = False
        lib = client._lib
        self.nbytes = lib.gg_tensor_bytes(handle)
        self.address = lib.gg_tensor_data(handle)
        shared = device_tensor is None  # a shared buffer has an address, GPU memory none
        if self.nbytes < elements * dtype.itemsize or bool(self.address) != shared:
            raise errors.InternalError(
                f"tensor {name!r}: the library returned a {self.nbytes}-byte buffer for "
                f"{elements} elements of {dtype.name}"
            )

    @property
    def buffer(self):
        """The shared buffer as a ctypes byte array (valid while the client is open)."""
        self._client.handle()
        if self.released:
            raise errors.InvalidArgumentError(f"tensor {self.name!r} was released")
        if self.device_tensor is not None:
            raise errors.InvalidArgumentError(
                f"tensor {self.name!r} is in GPU memory: use its device_tensor"
            )
        return (ctypes.c_uint8 * self.nbytes).from_address(self.address)

    @property
    def codec(self):
        """The name of the codec of the tensor's latest all-reduce that succeeded ("unknown"
        before the first)."""
        self._client.handle()
        codec = ctypes.c_int()
        _check(self._client._lib.gg_tensor_codec(self._handle, ctypes.byref(codec)))
        return self._client._lib.gg_codec_name(codec.value).decode()

    def allreduce(self):
        """Starts the all-reduce of the buffer; do not touch the buffer until the wait ends."""
        self._client.handle()
        request = _native.RequestHandle()
        _check(self._client._lib.gg_allreduce(self._handle, ctypes.byref(request)))
        return Request(self, request)

    def release(self):
        """This worker is done with the tensor (gg_release): its shared buffer is unmapped (views
        of it must be gone), and the gateway drops the tensor and its state once every local
        worker released it. Release it on every worker: the others' all-reduces of it fail
        until this one declares it again. No all-reduce of it may be in flight."""
        self._client.handle()
        _check(self._client._lib.gg_release(self._handle))
        self.released = True
        self.address = None

    def __repr__(self):
        return f"Tensor({self.name!r}, elements={self.elements}, dtype={self.dtype.name})"


class Request:
    """One all-reduce in flight; wait() until it ends."""

    def __init__(self, tensor, handle):
        self.tensor = tensor
        self._handle = handle

    @property
    def done(self):
        return self._handle is None

    def wait(self, timeout_ms=-1):
        """Waits up to timeout_ms (negative: no limit); returns the AllreduceInfo.

        Raises WaitTimeoutError if the all-reduce is still running (wait again later), another
        GradgateError if it failed (the request is then over).
        """
        self.tensor._client.handle()
        if self._handle is None:
            raise errors.InvalidArgumentError(
                f"the all-reduce of {self.tensor.name!r} was already waited for"
            )
        info = _native.AllreduceInfo()
        code = self.tensor._client._lib.gg_wait(self._handle, int(timeout_ms), ctypes.byref(info))
        if code != _native.GG_TIMEOUT:
            self._handle = None
        _check(code)
        return AllreduceInfo(
            info.step,
            info.raw_bytes,
            info.wire_bytes,
            info.encode_seconds,
            info.communicate_seconds,
            info.decode_seconds,
            self.tensor.codec,
        )
