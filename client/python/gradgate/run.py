"""Runs a PyTorch training script with its DDP gradients sent through gradgate, unchanged.

    python -m gradgate.run [OPTIONS] SCRIPT [ARGS...]
    python -m gradgate.run [OPTIONS] -m MODULE [ARGS...]
    torchrun --nproc-per-node 8 -m gradgate.run [OPTIONS] SCRIPT [ARGS...]

OPTIONS come before the script: --socket PATH (default: GRADGATE_SOCKET, else
/run/gradgate/gg.sock), --local-rank N (default: LOCAL_RANK, which torchrun sets; without one,
each process finds it in its DDP model's process group), --timeout-ms
N, --connect-timeout-ms N, --device-path auto|host, --nonfinite propagate|raise, --data-volume N
(default: GRADGATE_DATA_VOLUME, else 0), --momentum-correction (momentum correction with the
momentum of the script's SGD optimizer, which runs unchanged), --momentum M (momentum correction
with M, for a script whose optimizer runs without momentum) (HookState's options). The script then
runs as `python SCRIPT ARGS...` would run it (sys.argv, __main__, its directory first on
sys.path), and every DistributedDataParallel model it makes uses gradgate's comm hook
(gradgate/autohook.py). Exit status 2 for a bad command line.
"""

import argparse
import os
import runpy
import sys

from . import autohook
from .client import HOOK_CONNECT_TIMEOUT_MS

# Options of ours that take a value (the rest of the command line is the script's).
_VALUED = ("--socket", "--local-rank", "--timeout-ms", "--connect-timeout-ms", "--device-path",
           "--nonfinite", "--data-volume", "--momentum")


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m gradgate.run",
        allow_abbrev=False,
        usage="%(prog)s [OPTIONS] (SCRIPT | -m MODULE) [ARGS...]",
        description="Runs a training script with its DDP gradients sent through gradgate.",
    )
    parser.add_argument("--socket", help="the node's gateway socket (default: $GRADGATE_SOCKET, "
                        f"else {autohook.DEFAULT_SOCKET})")
    parser.add_argument("--local-rank", type=int,
                        help="this process's worker index on the node (default: $LOCAL_RANK; "
                        "without one, each process finds it in its DDP model's process group)")
    parser.add_argument("--timeout-ms", type=int,
                        help="how long one bucket's all-reduce may take (default: longer than "
                        "the gateway lets a step take, 2 x its collective.timeout_ms + 10 s)")
    parser.add_argument("--connect-timeout-ms", type=int, default=HOOK_CONNECT_TIMEOUT_MS,
                        help="how long to wait for the node's gateway to be there (default: "
                        f"{HOOK_CONNECT_TIMEOUT_MS})")
    parser.add_argument("--device-path", choices=("auto", "host"), default="auto",
                        help="auto: CUDA buckets stay in GPU memory; host: copied through "
                        "shared memory (default: auto)")
    parser.add_argument("--nonfinite", choices=("propagate", "raise"), default="propagate",
                        help="a step with a NaN or infinite gradient on some node: propagate NaN "
                        "into the buckets (loss scaling skips the step) or raise (default: "
                        "propagate)")
    parser.add_argument("--data-volume", type=_data_volume,
                        default=os.environ.get("GRADGATE_DATA_VOLUME", "0"),
                        help="how much training data this worker processes (samples, any unit "
                        "the same on every worker), for the controller's data-aware policies "
                        "dagc-r and dagc-a (default: $GRADGATE_DATA_VOLUME, else 0: none)")
    momentum = parser.add_mutually_exclusive_group()
    momentum.add_argument("--momentum-correction", action="store_true",
                          help="momentum correction with the momentum (and weight decay) of each "
                          "DDP model's torch.optim.SGD, applied before compression; the script "
                          "stays as it is (off, with a warning, for other optimizers)")
    momentum.add_argument("--momentum", type=_momentum, default=0.0, metavar="M",
                          help="momentum correction with momentum M, for a script whose "
                          "optimizer runs without momentum (default: 0, off)")
    return parser


def _number_from_0_below(limit, description):
    """An argparse type: a number >= 0 and below `limit`, else an error saying it is not
    `description`."""

    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not 0 <= value < limit:
            raise argparse.ArgumentTypeError(f"{text!r} is not {description}")
        return value

    return parse


_momentum = _number_from_0_below(1.0, "a number >= 0 and below 1")
_data_volume = _number_from_0_below(float("inf"), "a number >= 0")


def split_command_line(argv):
    """(our options, the script's command line): ours end at "-m" or the first other word."""
    at = 0
    while at < len(argv):
        word = argv[at]
        if word == "-m" or not word.startswith("-"):
            break
        at += 2 if word in _VALUED else 1
    return argv[:at], argv[at:]


def main(argv=None):
    parser = _parser()
    ours, command = split_command_line(sys.argv[1:] if argv is None else argv)
    options = parser.parse_args(ours)
    if not command or (command[0] == "-m" and len(command) < 2):
        parser.error("give the training script, or -m and its module")
    try:
        autohook.install(
            options.socket,
            options.local_rank,
            timeout_ms=options.timeout_ms,
            connect_timeout_ms=options.connect_timeout_ms,
            device_path=options.device_path,
            nonfinite=options.nonfinite,
            data_volume=options.data_volume,
            momentum=options.momentum,
            take_momentum=options.momentum_correction,
        )
    except ValueError as error:
        parser.error(str(error))
    if command[0] == "-m":
        sys.argv = [command[1]] + command[2:]
        runpy.run_module(command[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = command
        sys.path.insert(0, os.path.dirname(os.path.abspath(command[0])))
        runpy.run_path(command[0], run_name="__main__")


if __name__ == "__main__":
    main()
