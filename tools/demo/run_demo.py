#!/usr/bin/python3
"""The gradgate demo: data-parallel training of a small CNN on Fashion-MNIST through gradgate.

Starts one gradgate gateway per node on loopback, in rank order (each on port 0, read back from
its ready file), then the DDP workers (train.py, --local-workers per gateway) that all-reduce
their gradient buckets through their node's gateway with --codec. Streams rank 0's progress per
epoch (loss, test accuracy, raw and wire bytes, ratio) and ends with a summary table; with --json
the last line of stdout is one JSON object:
  {"backend", "codec", "momentum_correction", "workers", "nodes", "local_workers", "epochs",
   "test_accuracy" (0-1),
   "loss", "raw_bytes", "wire_bytes", "ratio", "seconds" (the whole demo), "train_seconds"}
--backend gloo runs the same training with DDP's plain all-reduce and no gateway: the reference.
By default the gradgate workers use momentum correction (gradgate.torch.take_momentum: the hook
applies SGD's momentum before compression); --no-momentum-correction turns it off.

Every process it starts runs in its own process group and is stopped on exit, on Ctrl-C, on
SIGTERM and when any of them fails; a gateway or worker that dies ends the demo with its log.
"""

import argparse
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "client" / "python"))

from gradgate.cluster import GatewayFailed, LocalCluster  # noqa: E402

TRAIN_SCRIPT = Path(__file__).resolve().parent / "train.py"
POLL_SECONDS = 0.2
STOP_GRACE_SECONDS = 10
LOG_TAIL_BYTES = 3000


class DemoFailed(RuntimeError):
    pass


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=("gradgate", "gloo"), default="gradgate")
    p.add_argument("--codec", default="topk:density=0.01", help="the gateways' codec spec")
    p.add_argument("--workers", type=int, default=4, help="DDP workers in all (default: 4)")
    p.add_argument("--local-workers", type=int, default=1, help="workers per gateway (default: 1)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--momentum-correction", action=argparse.BooleanOptionalAction, default=True,
                   help="gradgate backend: the hook takes SGD's momentum and applies it before "
                   "compression (default: on)")
    p.add_argument(
        "--gradgate",
        type=Path,
        default=Path(os.environ.get("GRADGATE_BINARY", REPO / "build" / "cli" / "gradgate")),
        help="the gradgate binary (default: $GRADGATE_BINARY, else build/cli/gradgate)",
    )
    p.add_argument("--python", default=sys.executable, help="interpreter of the workers")
    p.add_argument("--data", type=Path, help="directory of the Fashion-MNIST IDX files")
    p.add_argument("--timeout", type=float, default=900, help="seconds the whole demo may take")
    p.add_argument("--log-level", default="warn", help="the gateways' log level")
    p.add_argument("--keep", action="store_true", help="keep the work directory (configs, logs)")
    p.add_argument("--json", action="store_true", help="end stdout with one JSON summary line")
    args = p.parse_args()
    if args.workers < 1 or args.local_workers < 1 or args.workers % args.local_workers:
        p.error(f"--workers {args.workers} must be a positive multiple of --local-workers")
    if args.backend == "gloo" and args.local_workers != 1:
        p.error("--local-workers applies to the gradgate backend only")
    args.momentum_correction = args.momentum_correction and args.backend == "gradgate"
    return args


def log_tail(path):
    try:
        return path.read_bytes()[-LOG_TAIL_BYTES:].decode(errors="replace")
    except OSError as error:
        return f"<unreadable: {error}>"


class Worker:
    """One train.py process; rank 0's stdout is read line by line into `lines`."""

    def __init__(self, rank, command, workdir, lines):
        self.rank = rank
        self.stderr_path = workdir / f"worker{rank}.err"
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
            )
        self.reader = None
        if rank == 0:
            self.reader = threading.Thread(target=self._read, args=(lines,), daemon=True)
            self.reader.start()

    def _read(self, lines):
        for line in self.process.stdout:
            lines.put(line.decode(errors="replace").rstrip("\n"))

    def failure(self):
        return DemoFailed(
            f"worker rank {self.rank} exited with status {self.process.returncode}; "
            f"its stderr ends with:\n{log_tail(self.stderr_path)}"
        )

    def stop(self):
        if self.process.poll() is None:
            for signum in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.process.pid, signum)
                except ProcessLookupError:
                    return
                try:
                    self.process.wait(timeout=STOP_GRACE_SECONDS)
                    return
                except subprocess.TimeoutExpired:
                    continue


def worker_command(args, rank, rendezvous, socket):
    command = [
        args.python,
        str(TRAIN_SCRIPT),
        "--backend",
        args.backend,
        "--rank",
        str(rank),
        "--world-size",
        str(args.workers),
        "--rendezvous",
        str(rendezvous),
        "--epochs",
        str(args.epochs),
        "--batch-size",
        str(args.batch_size),
        "--lr",
        str(args.lr),
        "--seed",
        str(args.seed),
        "--codec",
        args.codec,
    ]
    if socket:
        command += ["--socket", socket, "--local-rank", str(rank % args.local_workers)]
    if args.momentum_correction:
        command.append("--momentum-correction")
    if args.data:
        command += ["--data", str(args.data)]
    return command


def print_progress(report):
    print(
        f"epoch {report['epoch']:2d}  loss {report['loss']:.4f}  "
        f"test accuracy {100 * report['test_accuracy']:6.2f}%  "
        f"raw {report['raw_bytes'] / 1e6:10.1f} MB  wire {report['wire_bytes'] / 1e6:9.1f} MB  "
        f"ratio {report['ratio']:7.1f}x  {report['seconds']:7.1f} s",
        flush=True,
    )


def print_table(args, reports):
    print(f"\n{args.backend} / codec {args.codec if args.backend == 'gradgate' else 'none'}"
          f"{', momentum correction' if args.momentum_correction else ''}, "
          f"{args.workers} workers, {args.workers // args.local_workers} nodes")
    print(f"{'epoch':>5} {'loss':>8} {'accuracy':>9} {'raw MB':>10} {'wire MB':>10} "
          f"{'ratio':>8} {'seconds':>8}")
    for r in reports:
        print(f"{r['epoch']:>5} {r['loss']:>8.4f} {100 * r['test_accuracy']:>8.2f}% "
              f"{r['raw_bytes'] / 1e6:>10.1f} {r['wire_bytes'] / 1e6:>10.1f} "
              f"{r['ratio']:>7.1f}x {r['seconds']:>8.1f}")


def handle_line(line, reports):
    try:
        report = json.loads(line)
    except json.JSONDecodeError:
        print(line, flush=True)
        return
    reports.append(report)
    print_progress(report)


def watch(args, workers, lines, cluster, deadline):
    """Streams rank 0's reports until every worker exits 0; raises DemoFailed on any failure."""
    reports = []
    while True:
        try:
            handle_line(lines.get(timeout=POLL_SECONDS), reports)
        except queue.Empty:
            pass
        for worker in workers:
            if worker.process.poll() not in (None, 0):
                raise worker.failure()
        if all(worker.process.poll() == 0 for worker in workers):
            workers[0].reader.join(timeout=STOP_GRACE_SECONDS)
            while not lines.empty():
                handle_line(lines.get_nowait(), reports)
            return reports
        if cluster:
            cluster.check_alive()
        if time.monotonic() > deadline:
            raise DemoFailed(f"the demo did not finish within --timeout {args.timeout:g} s")


def run(args, workdir):
    started = time.monotonic()
    deadline = started + args.timeout
    cluster = None
    workers = []
    try:
        sockets = [None] * args.workers
        if args.backend == "gradgate":
            nodes = args.workers // args.local_workers
            cluster = LocalCluster(
                args.gradgate,
                nodes,
                workdir,
                local_workers=args.local_workers,
                codec=args.codec,
                log_level=args.log_level,
            ).start()
            sockets = [cluster.sockets[rank // args.local_workers] for rank in range(args.workers)]
            print(f"{nodes} gateways ready on ports {cluster.ports}", flush=True)
        lines = queue.Queue()
        for rank in range(args.workers):
            command = worker_command(args, rank, workdir, sockets[rank])
            workers.append(Worker(rank, command, workdir, lines))
        reports = watch(args, workers, lines, cluster, deadline)
    finally:
        for worker in workers:
            worker.stop()
        if cluster:
            cluster.stop()
    if len(reports) != args.epochs:
        raise DemoFailed(f"rank 0 reported {len(reports)} of {args.epochs} epochs")
    return reports, time.monotonic() - started


def main():
    args = parse_args()
    # SIGTERM ends the demo like Ctrl-C: through the finally blocks that stop every process.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    workdir = Path(tempfile.mkdtemp(prefix="gradgate-demo-"))
    failed = True
    try:
        reports, seconds = run(args, workdir)
        failed = False
    except (DemoFailed, GatewayFailed, OSError) as error:
        print(f"demo failed: {error}\n(configs and logs kept in {workdir})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"demo interrupted (configs and logs kept in {workdir})", file=sys.stderr)
        return 130
    finally:
        if not failed and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print_table(args, reports)
    last = reports[-1]
    print(f"total {seconds:.1f} s (training {last['seconds']:.1f} s)")
    if args.json:
        summary = {
            "backend": args.backend,
            "codec": last["codec"],
            "momentum_correction": args.momentum_correction,
            "workers": args.workers,
            "nodes": args.workers // args.local_workers,
            "local_workers": args.local_workers,
            "epochs": args.epochs,
            "test_accuracy": last["test_accuracy"],
            "loss": last["loss"],
            "raw_bytes": last["raw_bytes"],
            "wire_bytes": last["wire_bytes"],
            "ratio": last["ratio"],
            "seconds": round(seconds, 2),
            "train_seconds": last["seconds"],
        }
        print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
