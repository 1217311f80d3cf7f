"""A PyTorch DDP communication hook that all-reduces gradient buckets through gradgate.

    state = gradgate.torch.HookState(socket_path, local_rank)
    model = DistributedDataParallel(model)
    model.register_comm_hook(state, gradgate.torch.allreduce_hook)

For every bucket DDP hands over, the hook declares a gradgate tensor once per bucket layout
(index, element count, dtype), named "<prefix>.bucket<index>.<numel>.<dtype>": DDP rebuilds its
buckets after the first step, and a new layout simply declares new names. It copies the bucket
into the tensor's shared buffer (viewed as a torch tensor of the bucket's dtype: fp32, fp16 or
bf16) divided by the job's world size (DDP expects the average), starts its all-reduce through
the node's gateway and returns a Future at once: backward goes on computing the next buckets'
gradients while the gateways compress and exchange this one, as with DDP's own all-reduce. A
waiter thread per HookState waits for the all-reduces in the order they started, copies each
result back into its bucket and completes its Future; DDP waits for the Futures at the end of
backward.

A bucket in GPU memory (device_path="auto", the default) is declared over its own memory instead
(Client.declare_cuda): per all-reduce the hook divides the bucket where it lies and records the
bucket's interprocess ready event on the current stream; the gateway waits for it and
all-reduces the bucket in place. No copy to or from the host. DDP may reallocate a bucket: a new
address declares the layout again under its name, over the new memory (names do not depend on
where a rank's allocator put a bucket, so every worker declares the same ones). If the gateway
cannot map GPU memory (GG_REJECTED: built without CUDA, another GPU, ...), the hook warns once
and copies every bucket through shared buffers from then on. The waiter thread writes into a CUDA
bucket (a copy back, NaN) on the stream the hook ran on, and waits for it before the Future
completes.

A failure to start (an unsupported dtype, a refused declaration, a closed state, a bucket whose
earlier all-reduce timed out and still runs) raises RuntimeError in the hook; a failure of the
all-reduce (timeout, a peer that failed, a closed gateway) fails the Future with a RuntimeError
that names the bucket and carries the library's message. A step with a failed bucket fails as a
whole once all its all-reduces have ended, none of its buckets written back, so nothing of it
lands in a bucket after backward() raised. DDP surfaces either failure from backward(). A step
whose gradient holds NaN or infinite values on some node is skipped by every gateway; with
nonfinite="propagate" (the default) the hook then fills the bucket with NaN on every rank, as
DDP's own all-reduce would spread them, so that mixed-precision loss scaling
(torch.cuda.amp.GradScaler) skips the step and lowers its scale as usual; with nonfinite="raise"
its Future fails with RuntimeError. HookState keeps running totals (raw and wire bytes,
all-reduces, steps, seconds) for progress reports. torch is imported here only, so
`import gradgate` works without it.
"""

import collections
import ctypes
import functools
import queue
import secrets
import threading
import time
import warnings
import weakref

import torch

from . import optimizer_momentum
from .client import HOOK_CONNECT_TIMEOUT_MS, Client
from .errors import GradgateError, NonFiniteGradientError, RejectedError, WaitTimeoutError
from .group_local_rank import local_rank_in_group
from .momentum import MomentumCorrection, reconfigured, settle_velocity

DEVICE_PATHS = ("auto", "host")
NONFINITE_MODES = ("propagate", "raise")

_DTYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def gradgate_dtype(dtype):
    """The gradgate name ("fp32", "fp16", "bf16") of a torch dtype; RuntimeError for others."""
    if dtype not in _DTYPES:
        raise RuntimeError(f"gradgate: {dtype} gradients are not supported (fp32, fp16, bf16)")
    return _DTYPES[dtype]


def _agreed_run_id(process_group=None):
    """A random 64-bit id drawn by the first rank of `process_group` (default: the default process
    group) and known to every rank of it."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        return 0
    first = 0 if process_group is None else dist.get_global_rank(process_group, 0)
    value = [secrets.randbits(63) if dist.get_rank() == first else None]
    dist.broadcast_object_list(value, src=first, group=process_group)
    return int(value[0])


def _group_size(process_group=None):
    """The number of ranks of `process_group` (default: the default group); None without one."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        return None
    return dist.get_world_size(process_group)


class HookState:
    """The hook's connection to the gateway, its declared buckets, and its running totals.

    socket_path, local_rank: the node's gateway and this process's worker index on the node.
        None: its index among the ranks of `process_group` that use the same gateway
        (gradgate/group_local_rank.py; a collective, like the run id's broadcast below), for
        launchers that set no LOCAL_RANK (mpirun, a script's own multiprocessing).
    timeout_ms: how long one bucket's all-reduce may take, from the hook's call, before its
        Future fails (negative: no limit). None: longer than the gateway lets a step take
        (2 x its collective.timeout_ms + 10 s), so that a step that fails there fails with the
        gateway's reason, and a gateway with a long timeout for a slow link is waited for.
    name_prefix: prefixes tensor names (distinct per DDP model when a process has several).
    data_volume: samples this worker trains on, passed to the gateway for data-aware ratios.
    run_id: names this run of the job in every tensor name, so that nothing of an earlier, failed
        run (its frames still in flight) can mix into this one. By default the first rank of
        `process_group` (the default process group when None: give the DDP model's own when it
        runs on a subgroup) draws one and broadcasts it (a collective: every rank constructs its
        HookState at the same point); without a process group it is 0.
    client: a gradgate.Client to share (a process with several DDP models connects once: the
        gateway takes one connection per local rank); by default the HookState connects and
        closes its own.
    connect_timeout_ms: how long connecting waits for a gateway that is not there yet (a pod
        that starts before its node's gateway, a gateway that restarts) or for this local rank
        to be free (a restarted worker whose predecessor the gateway has not seen leave); 0: one
        attempt.
    device_path: "auto" declares CUDA buckets over their GPU memory (falling back to shared
        buffers for good when the gateway refuses); "host" copies every bucket through a shared
        buffer. CPU buckets always use shared buffers.
    nonfinite: what a bucket becomes when a node's gradient held NaN or infinite values (the
        gateways skip that step): "propagate" fills it with NaN on every rank (loss scaling then
        skips the step; counted in nonfinite_allreduces), "raise" fails its Future with
        RuntimeError.
    momentum: > 0 (below 1) turns on momentum correction (gradgate/momentum.py): each bucket
        sends its velocity m * u + g rather than its gradient, so that error feedback holds back
        velocities, and its velocity is cleared where a sparse codec's result is not zero
        (momentum factor masking); the optimizer must then run without momentum of its own
        (SGD with momentum=0). take_momentum() instead takes the optimizer's own momentum,
        Nesterov and weight decay, and leaves the optimizer as it is. Under a GradScaler the
        velocities are under the loss scale: when the scale grows, the momentum built up so far
        counts half once. 0 (the default): off.
    """

    def __init__(
        self, socket_path, local_rank=None, timeout_ms=None, name_prefix="ddp", data_volume=0,
        run_id=None, device_path="auto", nonfinite="propagate", process_group=None, client=None,
        connect_timeout_ms=HOOK_CONNECT_TIMEOUT_MS, momentum=0.0,
    ):
        self._momentum = MomentumCorrection(momentum) if momentum else None
        if device_path not in DEVICE_PATHS:
            raise ValueError(f"device_path {device_path!r}: use one of {', '.join(DEVICE_PATHS)}")
        if nonfinite not in NONFINITE_MODES:
            raise ValueError(f"nonfinite {nonfinite!r}: use one of {', '.join(NONFINITE_MODES)}")
        self.device_path = device_path
        self.nonfinite = nonfinite
        self.run_id = _agreed_run_id(process_group) if run_id is None else int(run_id)
        self._owns_client = client is None
        if client is None:
            if local_rank is None:
                local_rank = local_rank_in_group(socket_path, process_group)
            client = Client(socket_path, local_rank, connect_timeout_ms=connect_timeout_ms)
        self.client = client
        self.world_size = self.client.job.world_size
        group_size = _group_size(process_group)
        if group_size not in (None, self.world_size):
            if self._owns_client:
                self.client.close()
            raise ValueError(
                f"gradgate: the process group has {group_size} ranks but the gateways' job has "
                f"{self.world_size} workers (job.nodes x job.local_workers): the gateways sum over "
                "their job, so it must hold exactly the ranks of the group"
            )
        self.timeout_ms = (
            self.client.job.outlasting_timeout_ms if timeout_ms is None else int(timeout_ms)
        )
        self.name_prefix = name_prefix
        self.data_volume = data_volume
        self._names = []  # declared tensor names, in order
        # (index, numel, dtype) -> (gradgate Tensor, torch view of its buffer)
        self._buffers = {}
        # CUDA buckets declared over their memory: (index, numel, dtype) -> (the bucket's address,
        # gradgate Tensor over it, its ready event)
        self._device_tensors = {}
        self.raw_bytes = 0
        self.wire_bytes = 0
        self.allreduces = 0
        self.codec_allreduces = collections.Counter()  # codec name -> all-reduces that used it
        self.nonfinite_allreduces = 0
        self.failed_allreduces = 0  # failed, timed out or dropped with their step
        self.steps = 0
        self.seconds = 0.0
        self.encode_seconds = 0.0
        self.communicate_seconds = 0.0
        self.decode_seconds = 0.0
        # The all-reduces in flight, in the order they started, and the thread that ends them. It
        # is stopped by close(), else when the state is collected or at the latest at exit, before
        # the interpreter shuts down: a thread the interpreter stops inside torch's completion of
        # a Future aborts the process. Then the client the state made is closed, which gives its
        # local rank back (a state let go without close() kept it for the life of the process).
        self._pending = queue.SimpleQueue()
        self._starting = threading.Lock()
        self._latest = {}  # (index, numel, dtype) -> the _Pending of the bucket's latest all-reduce
        self._used_at = {}  # (index, numel, dtype) -> the last step that all-reduced it
        waiter = threading.Thread(
            target=_wait_in_order, args=(self._pending,), name="gradgate-hook-waiter", daemon=True
        )
        waiter.start()
        self._end = weakref.finalize(
            self, _end_state, self._pending, waiter, self.client if self._owns_client else None
        )

    @property
    def declared(self):
        """Names of the tensors declared so far, in declaration order."""
        return list(self._names)

    def tensor_name(self, index, numel, dtype):
        """The gradgate name of a bucket layout."""
        kind = gradgate_dtype(dtype)
        return f"{self.name_prefix}.{self.run_id:016x}.bucket{index}.{numel}.{kind}"

    def shared_view(self, index, numel, dtype):
        """The gradgate tensor and torch view for one bucket layout, declared on first use."""
        key = (index, numel, dtype)
        if key not in self._buffers:
            name = self.tensor_name(index, numel, dtype)
            tensor = self.client.declare(
                name, numel, gradgate_dtype(dtype), data_volume=self.data_volume
            )
            raw = (ctypes.c_uint8 * (numel * tensor.dtype.itemsize)).from_address(tensor.address)
            self._buffers[key] = (tensor, torch.frombuffer(raw, dtype=dtype))
            self._names.append(name)
        return self._buffers[key]

    def set_momentum_correction(self, momentum, nesterov=False):
        """Momentum correction from the next bucket on (see `momentum` above), with `momentum` in
        [0, 1) (0 keeps the velocities, each the last gradient, and sends the gradients as they
        are) and Nesterov's form if `nesterov`; None turns it off and drops the velocities.
        gradgate.torch.take_momentum() turns it on and has the hook read the optimizer's momentum
        at each bucket from then on, over what is set here."""
        self._momentum = reconfigured(self._momentum, momentum, nesterov)

    @property
    def momentum_correction(self):
        """(momentum, nesterov) of the momentum correction, None when it is off."""
        return None if self._momentum is None else (self._momentum.momentum,
                                                    self._momentum.nesterov)

    @property
    def velocities(self):
        """The momentum correction's velocities (gradgate.momentum.MomentumCorrection: velocity(),
        load_velocity() per parameter), None when it is off."""
        return self._momentum

    def start_average(self, index, grads, last=True, parameters=None):
        """Starts replacing the flat tensor `grads` (bucket `index`) with its average over the
        job's workers and returns a torch Future without waiting for the gateways. `last`: the
        step's last bucket (the next call starts a new step). `parameters`: those whose gradients
        `grads` holds, in order (DDP's bucket.parameters()), so that momentum correction keeps
        each one's velocity when DDP rebuilds its buckets.

        The state's waiter thread completes the Future with `grads` once the average is in it, or
        fails it with a RuntimeError that names the bucket: a failure, a timeout (timeout_ms from
        this call), a skipped step under nonfinite="raise". A step with a failed bucket is ended
        as a whole once all its buckets' all-reduces have ended: all its Futures fail and none of
        its buckets is written back. Under nonfinite="propagate" a skipped step completes it with
        `grads` filled with NaN. `grads` must not be touched until the Future is done. Raises
        RuntimeError here (and the step ends) when the all-reduce cannot start: an unsupported
        dtype, a refused declaration, a closed state, or this bucket's all-reduce of an earlier
        step still running in the gateway (it timed out: its buffer is not free).
        """
        pending = _Pending(self, index, grads, self.steps, last)
        stream = pending.stream  # the waiter may end `pending` as soon as it is started
        velocity = self._momentum.apply(index, grads, parameters) if self._momentum else None
        try:
            with self._starting:  # close() waits for a start under way
                self._start(pending, index, grads)
        except BaseException:
            self.steps += 1  # backward raises a failed start: its step is over
            self.failed_allreduces += 1
            if self._momentum:
                self._momentum.forget(index)
            raise
        if last:
            self.steps += 1
        # A failure set with set_exception is a value to DDP's C++ side; raising it in a callback
        # makes it an error there, which backward() raises.
        future = pending.future.then(_result)
        if velocity is None:
            return future
        settle = functools.partial(settle_velocity, velocity, pending.step_codec)
        return future.then(functools.partial(_on_stream, stream, settle))

    def _start(self, pending, index, grads):
        """Starts `pending`'s all-reduce and queues it for the waiter; raises RuntimeError when it
        cannot start."""
        if not self._end.alive:
            raise RuntimeError("gradgate: the HookState is closed: no all-reduce can start")
        layout = (index, grads.numel(), grads.dtype)
        previous = self._latest.get(layout)
        if previous is not None and not previous.buffer_free():
            raise RuntimeError(
                f"gradgate: all-reduce of {pending.what} cannot start: that of an earlier step "
                "timed out and still runs in the gateway, which owns the bucket's buffer until it "
                "ends (close the HookState and restart the job)"
            )
        # DDP rebuilt its buckets: this index's layout of an earlier step goes before the new one
        # is declared (both would count against the gateway's memory cap).
        self._release_layouts(lambda k, used: k[0] == index and k != layout and used < pending.step)
        try:
            if grads.is_cuda:
                pending.request = self._start_cuda(index, grads)
            if pending.request is None:
                pending.request, pending.copy_back = self._start_shared(index, grads)
        except GradgateError as error:
            raise pending.failure("failed", error) from error
        self._latest[layout] = pending
        self._used_at[layout] = pending.step
        self._pending.put(pending)
        if pending.last:  # indices the rebuilt buckets no longer have
            self._release_layouts(lambda k, used: used < pending.step - 1)

    def _release_layouts(self, obsolete):
        """Releases the bucket layouts for which obsolete(layout, last step used) holds: those of
        DDP's first step, which it rebuilds after it (every rank at the same step). The gateway
        then drops them with their residuals, which would otherwise hold memory (and the
        residual memory cap) for the rest of the run."""
        for layout in [k for k, used in self._used_at.items() if obsolete(k, used)]:
            latest = self._latest.get(layout)
            if latest is not None and (not latest.future.done() or latest.still_running):
                continue  # not over yet (or timed out and still running in the gateway): kept
            del self._used_at[layout]
            self._latest.pop(layout, None)
            shared = self._buffers.pop(layout, None)  # (tensor, view): the view goes first
            device = self._device_tensors.pop(layout, None)  # (address, tensor, ready event)
            for tensor in ([shared[0]] if shared else []) + ([device[1]] if device else []):
                try:
                    tensor.release()
                except GradgateError as error:
                    warnings.warn(
                        f"gradgate: bucket layout {layout} not released: {error}",
                        RuntimeWarning,
                        stacklevel=3,
                    )

    # Both paths divide before the gateways sum, as DDP's own hooks do: the sum of a 16-bit bucket
    # then has the headroom of the average, not of a sum world_size times larger.
    def _start_shared(self, index, grads):
        """Starts the all-reduce of a copy of `grads` in the bucket's shared buffer; returns the
        request and what copies the result back."""
        tensor, view = self.shared_view(index, grads.numel(), grads.dtype)
        view.copy_(grads).div_(self.world_size)
        return tensor.allreduce(), lambda: grads.copy_(view)

    def _start_cuda(self, index, grads):
        """Starts the all-reduce of a CUDA bucket in place (the gateway writes the sum into it);
        None when the bucket goes through host memory instead."""
        declared = self._device_tensor((index, grads.numel(), grads.dtype), grads)
        if declared is None:
            return None
        tensor, ready = declared
        grads.div_(self.world_size)
        ready.record(torch.cuda.current_stream(grads.device))
        return tensor.allreduce()

    def _count(self, info, seconds):
        self.raw_bytes += info.raw_bytes
        self.wire_bytes += info.wire_bytes
        self.encode_seconds += info.encode_seconds
        self.communicate_seconds += info.communicate_seconds
        self.decode_seconds += info.decode_seconds
        self.allreduces += 1
        self.codec_allreduces[info.codec] += 1
        self.seconds += seconds

    def _device_tensor(self, layout, grads):
        """The gradgate tensor over this CUDA bucket and its ready event; None on the host path.

        A bucket that DDP reallocated is declared again, under its name, over its new memory.
        Buckets declared over GPU memory before a fallback stay so: their names are taken.
        """
        known = self._device_tensors.get(layout)
        address = grads.data_ptr()
        if known is not None and known[0] == address:
            return known[1], known[2]
        if known is None and self.device_path != "auto":
            return None
        name = self.tensor_name(*layout)
        ready = torch.cuda.Event(interprocess=True) if known is None else known[2]
        try:
            tensor = self.client.declare_cuda(
                name, grads, data_volume=self.data_volume, ready_event=ready
            )
        except RejectedError as error:
            if known is not None:
                raise
            warnings.warn(
                f"gradgate: CUDA buckets go through host shared memory from now on: {error}",
                RuntimeWarning,
                stacklevel=2,
            )
            self.device_path = "host"
            return None
        if known is None:
            self._names.append(name)
        self._device_tensors[layout] = (address, tensor, ready)
        return tensor, ready

    def close(self):
        """Waits for the all-reduces in flight (each at most until its timeout), then closes the
        connection (unless it was given to it); the hook must not run afterwards."""
        with self._starting:
            self._end()
        self._buffers.clear()
        self._device_tensors.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def _bucket_tensor(bucket):
    # torch >= 1.10 names it buffer(); older releases get_tensor().
    return bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()


def _wait_in_order(pending):
    """The waiter thread: ends the all-reduces queued in `pending` in the order they started,
    until None comes. A step with a failed bucket is ended as a whole, once its last bucket (or
    the next step's first) has come and every all-reduce of it has ended: then none of them can
    still land in a bucket after backward() raised."""
    failed_step = []  # the ended all-reduces of the current step, once one of them failed
    while True:
        item = pending.get()
        if item is None:
            break
        if failed_step and item.step != failed_step[0].step:
            _drop(failed_step)
            failed_step = []
        item.wait()
        if item.error is not None or failed_step:
            failed_step.append(item)
            if item.last:
                _drop(failed_step)
                failed_step = []
        else:
            item.finish()
        del item  # the state may go while the thread waits for the next one
    _drop(failed_step)


def _drop(items):
    """Fails the Futures of a failed step's all-reduces (the first of them failed), writing none
    of them back."""
    for item in items:
        item.end(
            item.error
            or RuntimeError(
                f"gradgate: all-reduce of {item.what} dropped: {items[0].what} of the same step "
                "failed"
            )
        )


def _end_state(pending, waiter, owned_client):
    """Lets the waiter thread end the all-reduces queued before this call, then ends it (on the
    waiter itself, where the state's last reference went, it ends after this call); then closes
    the client the state made (`owned_client`; None for one it was given)."""
    pending.put(None)
    if threading.current_thread() is not waiter:
        waiter.join()
    if owned_client is not None:
        owned_client.close()


def _on_stream(stream, function, *args):
    """function(*args), its CUDA work queued on `stream` (None: the current one): the stream the
    hook ran on, where the next step's work on the same tensors is queued too."""
    if stream is None:
        return function(*args)
    with torch.cuda.stream(stream):
        return function(*args)


def _result(future):
    """The value of a completed Future, or its exception raised."""
    return future.value()


class _Pending:
    """One bucket's all-reduce in flight: its request, its outcome, and its Future. Once ended,
    it keeps only what start_average asks of it."""

    def __init__(self, state, index, grads, step, last):
        self.state = state
        self.step = step
        self.last = last
        self.what = f"bucket {index} ({grads.numel()} x {grads.dtype})"
        self.grads = grads
        self.request = None
        self.copy_back = None  # the shared path's copy of the result into grads
        self.future = torch.futures.Future()
        self.info = None  # the outcome of wait(): the all-reduce's info,
        self.nonfinite = False  # or a skipped step (nonfinite="propagate"),
        self.error = None  # or the failure
        self.waited = threading.Event()  # the wait for the request is over
        self.still_running = False  # it ended by timeout: the request still runs in the gateway
        self.started = time.perf_counter()
        no_limit = state.timeout_ms < 0
        self.deadline = None if no_limit else self.started + state.timeout_ms / 1000.0
        # The stream the hook ran on: where the waiter thread's writes into a CUDA bucket go.
        self.stream = torch.cuda.current_stream(grads.device) if grads.is_cuda else None

    def step_codec(self):
        """The codec of the all-reduce, ended without failing; None where the gateways skipped
        its step."""
        return None if self.nonfinite else self.info.codec

    def failure(self, what, error):
        return RuntimeError(f"gradgate: all-reduce of {self.what} {what}: {error}")

    def buffer_free(self):
        """Waits until the waiter's wait for this all-reduce is over (each wait before it is
        bounded by its own deadline); True unless its request still runs in the gateway."""
        self.waited.wait()
        return not self.still_running

    def wait(self):
        """Waits for the request until the deadline and keeps its outcome; never raises."""
        try:
            left_ms = -1
            if self.deadline is not None:
                left_ms = max(0, int((self.deadline - time.perf_counter()) * 1000))
            self.info = self.request.wait(left_ms)
        except NonFiniteGradientError as error:
            if self.state.nonfinite == "raise":
                self.error = self.failure("skipped", error)
            else:
                self.nonfinite = True
        except WaitTimeoutError as error:
            self.still_running = True
            self.error = self.failure("failed", error)
        except GradgateError as error:
            self.error = self.failure("failed", error)
        except Exception as error:  # noqa: BLE001 - any failure belongs to the Future
            self.error = error
        finally:
            self.waited.set()

    def finish(self):
        """Writes the outcome of a step that did not fail into the bucket (the sum, or NaN),
        counts it and completes the Future; never raises."""
        state = self.state
        try:
            if self.nonfinite:
                self._write(lambda: self.grads.fill_(float("nan")))
                state.nonfinite_allreduces += 1
            else:
                if self.copy_back is not None:
                    self._write(self.copy_back)
                state._count(self.info, time.perf_counter() - self.started)
        except Exception as error:  # noqa: BLE001 - any failure belongs to the Future
            self.end(error)
        else:
            self.end(None)

    def _write(self, operation):
        _on_stream(self.stream, operation)
        if self.stream is not None:
            self.stream.synchronize()

    def end(self, error):
        """Completes the Future (with `error`, else with the bucket, counted as failed) and lets
        go of the state."""
        if error is not None:
            self.state.failed_allreduces += 1
        grads = self.grads
        self.state = self.grads = self.request = self.copy_back = self.stream = None
        if error is None:
            self.future.set_result(grads)
        else:
            self.future.set_exception(error)


def take_momentum(optimizer, model, state):
    """Momentum correction with `optimizer`'s own momentum: moves the momentum, nesterov and
    weight decay of `optimizer` (a torch.optim.SGD over the parameters of the DDP `model`, whose
    comm hook `state` is) in front of compression, and leaves the script's optimizer as it is
    (gradgate/optimizer_momentum.py). Call it once, before the first backward pass. ValueError
    saying why when the optimizer is not exactly momentum SGD over the model's parameters. The
    optimizer's state_dict() then holds the velocities as its momentum buffers, and its
    load_state_dict() (before or after this call) gives a checkpoint's back."""
    optimizer_momentum.take(optimizer, state, model.parameters())


def allreduce_hook(state, bucket):
    """DDP comm hook: the bucket's gradients averaged over all workers through gradgate. Returns
    at once; backward goes on while the gateways work, and DDP waits for the Future at its end."""
    last = not hasattr(bucket, "is_last") or bucket.is_last()
    return state.start_average(bucket.index(), _bucket_tensor(bucket), last, bucket.parameters())
