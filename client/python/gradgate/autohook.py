"""gradgate for a training script that does not know it: every DistributedDataParallel model made
after install() sends its gradient buckets through the node's gateway.

    python -m gradgate.run train.py ARGS...                   (gradgate/run.py)
    torchrun --nproc-per-node 8 -m gradgate.run train.py ARGS...

A model gets gradgate's allreduce_hook when it runs its first forward pass, unless the script
registered a comm hook of its own on it before: then that hook stays, and gradgate warns once.
A script that registers its hook after the first forward pass gets an error that says so (DDP
takes one hook per model). Each model's tensors are named "ddp", "ddp1", "ddp2", ... in the order
the models were made, the same on every rank, and share the process's one connection to the
gateway. Models made before install() are left as they are.

The node's gateway socket and this process's worker index on the node come from install()'s
arguments, else from the environment: GRADGATE_SOCKET (default /run/gradgate/gg.sock) and
LOCAL_RANK (torchrun sets it). Without a local rank (mpirun's processes, or a script that starts
its workers itself, with torch.multiprocessing.spawn as PyTorch's ImageNet example does or with
multiprocessing), every process it starts through multiprocessing gets gradgate with the same
options, and each process takes its index among the ranks of its model's process group that use
the same gateway (gradgate/group_local_rank.py) when its first model runs.
"""

import contextlib
import functools
import multiprocessing
import multiprocessing.process
import multiprocessing.util
import os
import sys
import weakref

DEFAULT_SOCKET = "/run/gradgate/gg.sock"

_options = None  # install()'s, once it ran
_models = 0  # DDP models made since then
_hooked = 0  # models given gradgate's hook
_client = None  # the process's one connection to the gateway, shared by its models
# Each model's HookState, beside the model rather than in it: a model that holds one (ctypes
# pointers, a thread) could no longer be deep-copied or pickled as it could without gradgate.
_states = weakref.WeakKeyDictionary()


def local_rank_from_environment():
    """LOCAL_RANK as an int, None when it is not set; ValueError naming it when it is not a
    number."""
    text = os.environ.get("LOCAL_RANK")
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"LOCAL_RANK={text!r} is not a number") from None


def install(socket_path=None, local_rank=None, take_momentum=False, **state_options):
    """Makes every DDP model made from now on use gradgate (see the module's text).

    socket_path, local_rank: the gateway and this worker's index on the node (defaults from the
    environment, above; without one, each model finds it in its process group, and the processes
    this one starts install gradgate too). state_options go to every model's
    gradgate.torch.HookState (timeout_ms, connect_timeout_ms, device_path, data_volume,
    nonfinite; not name_prefix or client, which install() sets itself).
    Calling it again replaces the options for later models.
    """
    global _options
    from torch.nn.parallel import DistributedDataParallel

    if "name_prefix" in state_options or "client" in state_options:
        raise ValueError("install() names the models itself (ddp, ddp1, ...) and shares one client")
    if take_momentum and state_options.get("momentum"):
        raise ValueError("momentum correction takes the optimizer's momentum: give no momentum")
    _options = {
        "socket_path": socket_path or os.environ.get("GRADGATE_SOCKET", DEFAULT_SOCKET),
        "local_rank": local_rank_from_environment() if local_rank is None else int(local_rank),
        "take_momentum": bool(take_momentum),
        **state_options,
    }
    if take_momentum:
        from . import optimizer_momentum

        optimizer_momentum.wrap_torch()  # before the script imports clip_grad_norm_
    if not getattr(DistributedDataParallel, "_gradgate_patched", False):
        _patch(DistributedDataParallel)
        _patch_process_start(multiprocessing.process.BaseProcess)
        _at_exit(_report_unhooked)


def _patch_process_start(process):
    """A process that multiprocessing starts by spawn or forkserver (torch.multiprocessing.spawn's
    among them) is a fresh interpreter that has not imported gradgate; one that it forks has it
    installed already. So while this process has no local rank, the target of each process it
    starts by spawn or forkserver becomes a picklable partial of _run_started with install()'s
    options: the new process installs gradgate first, and its models find their local rank in
    their process group."""
    original_start = process.start

    def start(self):
        if (_options is not None and _options["local_rank"] is None and self._target is not None
                and _start_method_of(self) != "fork"):
            options = {k: v for k, v in _options.items() if k != "local_rank"}
            self._target = functools.partial(_run_started, options, self._target)
        return original_start(self)

    process.start = start


def _start_method_of(process):
    """How multiprocessing will start `process`: its context's method, else the default one."""
    return getattr(process, "_start_method", None) or multiprocessing.get_start_method()


def _run_started(options, target, *args, **kwargs):
    """A process started by spawn or forkserver: installs gradgate with its starter's options."""
    options = dict(options)
    install(options.pop("socket_path"), **options)
    return target(*args, **kwargs)


def _patch(ddp):
    original_init = ddp.__init__
    original_forward = ddp.forward
    original_register = ddp.register_comm_hook
    original_builtin = getattr(ddp, "_register_builtin_comm_hook", None)

    def __init__(self, *args, **kwargs):
        global _models
        original_init(self, *args, **kwargs)
        self._gradgate_prefix = "ddp" if _models == 0 else f"ddp{_models}"
        _models += 1

    def forward(self, *args, **kwargs):
        if not getattr(self, "_gradgate_decided", False):
            self._gradgate_decided = True
            if hasattr(self, "_gradgate_prefix"):  # made after install()
                _attach(self, original_register)
        return original_forward(self, *args, **kwargs)

    def register_comm_hook(self, state, hook):
        _own_hook(self)
        return original_register(self, state, hook)

    ddp.__init__ = __init__
    ddp.forward = forward
    ddp.register_comm_hook = register_comm_hook
    if original_builtin is not None:

        def _register_builtin_comm_hook(self, comm_hook_type):
            _own_hook(self)
            return original_builtin(self, comm_hook_type)

        ddp._register_builtin_comm_hook = _register_builtin_comm_hook
    ddp._gradgate_patched = True


def state_of(model):
    """The HookState that sends `model`'s gradients; None for a model gradgate does not serve."""
    return _states.get(model)


def _own_hook(model):
    """The script registers a hook of its own: gradgate's stays off this model, or it is too
    late."""
    if model in _states:
        raise RuntimeError(
            "gradgate already sends this DDP model's gradients (gradgate.run): register your "
            "comm hook before the model's first forward pass to use it instead"
        )
    if not getattr(model, "_gradgate_decided", False):
        model._gradgate_decided = True
        import warnings

        warnings.warn(
            "gradgate: this DDP model registers its own comm hook; its gradients do not go "
            "through gradgate",
            RuntimeWarning,
            stacklevel=3,
        )


def _attach(model, register):
    global _client, _hooked
    import torch

    from . import optimizer_momentum
    from . import torch as gradgate_torch
    from .client import HOOK_CONNECT_TIMEOUT_MS, Client

    options = dict(_options)
    socket_path, local_rank = options.pop("socket_path"), options.pop("local_rank")
    take_momentum = options.pop("take_momentum")
    process_group = getattr(model, "process_group", None)
    connect_timeout_ms = options.pop("connect_timeout_ms", HOOK_CONNECT_TIMEOUT_MS)
    # The local rank's exchange and the state's broadcast of its run id are collectives; over NCCL
    # they go through the current CUDA device, which must be the model's, as for DDP's own
    # broadcasts, also where the script never called torch.cuda.set_device (every rank of a node
    # would then use GPU 0).
    device = _cuda_device_of(model)
    with torch.cuda.device(device) if device is not None else contextlib.nullcontext():
        if local_rank is None:
            local_rank = gradgate_torch.local_rank_in_group(socket_path, process_group)
            _options["local_rank"] = local_rank
        if _client is None:
            _client = Client(socket_path, local_rank, connect_timeout_ms=connect_timeout_ms)
        state = gradgate_torch.HookState(
            socket_path,
            local_rank,
            name_prefix=model._gradgate_prefix,
            process_group=process_group,
            client=_client,
            **options,
        )
    register(model, state, gradgate_torch.allreduce_hook)
    if take_momentum:
        optimizer_momentum.await_optimizer(state, model.parameters())
    _states[model] = state
    _hooked += 1
    if state.client.local_rank == 0:
        _at_exit(_report, state, model._gradgate_prefix)


def _cuda_device_of(model):
    """The CUDA device a DDP model runs on: its device_ids (DDP's own choice), else that of its
    first CUDA parameter (a model moved to its GPU and wrapped without device_ids); None on CPU."""
    device_ids = getattr(model, "device_ids", None)
    if device_ids:
        return device_ids[0]
    return next((p.device for p in model.parameters() if p.is_cuda), None)


def _at_exit(function, *args):
    """Calls function(*args) when this process ends: at the interpreter's exit, and also at the
    end of a process that multiprocessing forked, which skips the interpreter's exit handlers."""
    multiprocessing.util.Finalize(None, function, args=args, exitpriority=0)


def _report_unhooked():
    """At exit on local rank 0 (where no local rank is known: on rank 0 of the default process
    group, if there is one), say so when no model got the hook (FSDP or DeepSpeed instead of DDP,
    or its own comm hook), so that a job does not run without gradgate unnoticed."""
    if _hooked == 0 and _options is not None and _first_on_node():
        print(
            f"gradgate: no DistributedDataParallel model of this process ({_models} made) was "
            "given gradgate's comm hook: its gradients did not go through gradgate",
            file=sys.stderr,
        )


def _first_on_node():
    """Whether this process speaks for its node: local rank 0, or, without a local rank, rank 0 of
    the default process group (the first rank of the job, on the first node)."""
    if _options["local_rank"] is not None:
        return _options["local_rank"] == 0
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_rank() == 0


def _report(state, prefix):
    """One line per model on local rank 0 at exit: what gradgate did for it."""
    # A job of one node sends nothing to other gateways.
    sent = (f" sent as {state.wire_bytes / 1e6:.1f} MB ({state.raw_bytes / state.wire_bytes:.1f}x "
            "less)" if state.wire_bytes else ", none sent to other gateways")
    skipped = (f", {state.nonfinite_allreduces} all-reduces skipped for NaN or infinite gradients"
               if state.nonfinite_allreduces else "")
    correction = state.momentum_correction
    momentum = (f", momentum correction {correction[0]:g}{' (Nesterov)' if correction[1] else ''}"
                if correction else "")
    codecs = ", ".join(f"{codec} {count}" for codec, count in state.codec_allreduces.most_common())
    print(
        f"gradgate: {prefix}: {state.steps} steps, {state.allreduces} all-reduces"
        f"{f' ({codecs})' if codecs else ''}, "
        f"{state.raw_bytes / 1e6:.1f} MB of gradients{sent}{skipped}{momentum}",
        file=sys.stderr,
    )
