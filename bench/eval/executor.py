"""Executes one run of the evaluation on a Testbed and returns its measured result.

execute(bed, settings, run, model, rate_mbit, schedule=()) starts what the run needs (the
controller in the root namespace when the run has a policy, a gateway per host when it uses
gradgate), one train_eval.py worker per host, and watches them until every worker has exited
0, one of them has failed, nothing has progressed for settings.stall_seconds (a hang), or the
run's wall-clock budget is spent. Everything it started is stopped before it returns, whatever
happened. Meanwhile it samples, once a second, the hosts' interface counters, rank 0's latest
step time and accuracy and (gradgate) the gateways' ratio gauges; `schedule` [(seconds after
training started, rate)] changes the links' rate during the run (the scenario of change).

The result holds what was measured, not what a process said about itself: bytes from the
interfaces' counters, the phase split from the gateways' /metrics, accuracy and times from rank
0's event log (train_eval.py).
"""

import json
import os
import signal
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import gateway_metrics
import netlab
from gradgate.cluster import GatewayFailed
from services import Controller, NamespacedCluster, die_with_parent

TRAIN_SCRIPT = Path(__file__).resolve().parent / "train_eval.py"
POLL_S = 0.25
SAMPLE_S = 1.0
STOP_GRACE_S = 10.0
ERROR_TAIL_BYTES = 2000
FAILURE_SETTLE_S = 3.0
MASTER_PORT = 29500  # free in rank 0's fresh namespace


@dataclass
class Settings:
    """What every run of one invocation shares."""

    gradgate: Path
    python: str
    workdir: Path
    steps: int  # the reference run's step budget
    steps_factor: float  # the other runs may train steps * steps_factor steps
    eval_every: int
    batch_size: int
    lr: float
    max_train_seconds: float  # a run stops once it has trained this long
    startup_seconds: float  # from launch to rank 0's first event
    stall_seconds: float  # longest wait for rank 0's next event once training started
    target_communicate_seconds: float
    psgd_short_warmup: int
    seed: int = 0  # the workers' model initialisation and batch order
    library: str = ""
    data: str = ""
    log_level: str = "warn"


class Worker:
    """One train_eval.py process inside its host's namespace."""

    def __init__(self, host, argv, env, stderr_path):
        self.rank = host.index
        self.stderr_path = stderr_path
        with open(stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                host.command(argv), env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
                preexec_fn=die_with_parent,
            )

    def stderr_tail(self):
        return self.stderr_path.read_bytes()[-ERROR_TAIL_BYTES:].decode(errors="replace").strip()

    def error(self):
        status = self.process.returncode
        return f"rank {self.rank} exited with status {status}: {self.stderr_tail()}"

    def stop(self):
        for signum in (signal.SIGTERM, signal.SIGKILL):
            if self.process.poll() is not None:
                return
            try:
                os.killpg(self.process.pid, signum)
                self.process.wait(timeout=STOP_GRACE_S)
            except ProcessLookupError:
                return
            except subprocess.TimeoutExpired:
                continue


class EventReader:
    """New JSON lines of rank 0's event log since the last read."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.pending = ""

    def read(self):
        if not self.path.exists():
            return []
        with open(self.path) as f:
            f.seek(self.offset)
            chunk = f.read()
            self.offset = f.tell()
        self.pending += chunk
        *lines, self.pending = self.pending.split("\n")
        return [json.loads(line) for line in lines if line.strip()]


def worker_argv(settings, run, model, host, world_size, master_addr, log_path, socket):
    steps = settings.steps if run.reference else int(settings.steps * settings.steps_factor)
    argv = [
        settings.python, TRAIN_SCRIPT, "--model", model, "--backend", run.backend,
        "--rank", host.index, "--world-size", world_size, "--master-addr", master_addr,
        "--master-port", MASTER_PORT, "--steps", steps,
        "--max-seconds", settings.max_train_seconds, "--eval-every", settings.eval_every,
        "--batch-size", settings.batch_size, "--lr", settings.lr, "--seed", settings.seed,
        "--group-timeout", settings.stall_seconds + 30, "--log", log_path,
    ]
    if run.hook != "none":
        argv += ["--hook", run.hook]
    if run.hook == "powersgd":
        argv += ["--psgd-rank", run.psgd_rank]
        if run.psgd_warmup == "short":
            argv += ["--psgd-start-iter", settings.psgd_short_warmup]
    if run.single_bucket:
        argv += ["--single-bucket"]
    if run.momentum_correction:
        argv += ["--momentum-correction"]
    if socket:
        argv += ["--socket", socket, "--timeout-ms", int(settings.stall_seconds * 1000)]
    if run.shares:
        argv += ["--shares", run.shares]
    if settings.data:
        argv += ["--data", settings.data]
    return [str(a) for a in argv]


def policy_settings(settings, run):
    policy = {
        "policy": run.policy,
        "default_codec": run.codec,
        "target_communicate_seconds": settings.target_communicate_seconds,
        "min_compress_elements": 1024,
        "lead_seconds": 0.5,
        "min_lead_steps": 2,
        "min_interval_ms": 1000,
    }
    policy.update(run.policy_settings)
    return policy


class Execution:
    """The state of one run while it executes; see the module docstring."""

    def __init__(self, bed, settings, run, model, rate_mbit, schedule):
        self.bed = bed
        self.settings = settings
        self.run = run
        self.model = model
        self.rate_mbit = rate_mbit
        self.schedule = sorted(schedule)
        self.workdir = Path(settings.workdir) / f"{model}-{netlab.rate_tag(rate_mbit)}-{run.name}"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / "rank0.jsonl"
        self.log_path.unlink(missing_ok=True)
        self.events = []
        self.samples = []
        self.rate_changes = []
        self.controller = None
        self.cluster = None
        self.workers = []
        self.train_start = None  # Unix time of rank 0's "start" event
        self.counters = {"launch": bed.wire_bytes()}

    def start(self):
        hosts = self.bed.hosts
        sockets = [None] * len(hosts)
        if self.run.policy:
            self.controller = Controller(self.settings.gradgate, self.bed.bridge_address,
                                         self.workdir, policy_settings(self.settings, self.run))
        if self.run.backend == "gradgate":
            self.cluster = NamespacedCluster(
                self.settings.gradgate, hosts, self.workdir,
                codec=self.run.codec, log_level=self.settings.log_level,
                control_url=self.controller.url if self.controller else "",
                collective_timeout_ms=int(self.settings.stall_seconds * 1000),
            ).start()
            sockets = self.cluster.sockets
        env = dict(os.environ)
        if self.settings.library:
            env["GRADGATE_LIBRARY"] = self.settings.library
        for host in hosts:
            argv = worker_argv(self.settings, self.run, self.model, host, len(hosts),
                               hosts[0].address, self.log_path, sockets[host.index])
            env["GLOO_SOCKET_IFNAME"] = host.device
            self.workers.append(Worker(host, argv, dict(env),
                                       self.workdir / f"worker{host.index}.err"))

    def failure_report(self):
        """The failed workers' errors, the likely cause first: a rank that died of a signal
        (an abort in gloo) before the ranks that only saw their peer disconnect."""
        deadline = time.monotonic() + FAILURE_SETTLE_S
        while time.monotonic() < deadline and any(w.process.poll() is None for w in self.workers):
            time.sleep(POLL_S)  # the others usually fail too, within moments: collect their words
        failed = [w for w in self.workers if w.process.poll() not in (None, 0)]
        failed.sort(key=lambda w: (w.process.returncode >= 0, w.rank))
        return "\n".join(w.error() for w in failed)

    def scrape(self):
        if not self.cluster:
            return []
        return [gateway_metrics.scrape(url) for url in self.cluster.admin_urls]

    def sample(self, since_sample):
        if self.train_start is None:
            return
        steps = [e["seconds"] for e in since_sample if e["event"] == "step"]
        evals = [e for e in self.events if e["event"] == "eval"]
        wire = netlab.byte_delta(self.counters["train_start"], self.bed.wire_bytes())
        entry = {
            "seconds": round(time.time() - self.train_start, 3),
            "rate_mbit": self.bed.rate_mbit,
            "step": max((e.get("step", 0) for e in self.events), default=0),
            "step_seconds": round(statistics.median(steps), 4) if steps else None,
            "test_accuracy": evals[-1]["test_accuracy"] if evals else None,
            "tx_bytes": wire["tx_total"],
        }
        if self.cluster:
            entry.update(gateway_metrics.ratios(self.scrape()))
        self.samples.append(entry)

    def follow_schedule(self):
        while self.schedule and time.time() - self.train_start >= self.schedule[0][0]:
            _, rate = self.schedule.pop(0)
            self.bed.shape(rate)
            self.rate_changes.append(
                {"seconds": round(time.time() - self.train_start, 3), "rate_mbit": rate}
            )

    def watch(self):
        """Waits for the run's end; (status, error)."""
        reader = EventReader(self.log_path)
        launched = time.monotonic()
        last_progress = launched
        next_sample = launched
        since_sample = []
        while True:
            new = reader.read()
            if new:
                last_progress = time.monotonic()
            for event in new:
                if event["event"] == "start":
                    self.train_start = time.time()
                    self.counters["train_start"] = self.bed.wire_bytes()
                    next_sample = time.monotonic()
                if event["event"] == "end":
                    self.counters["train_end"] = self.bed.wire_bytes()
            self.events += new
            since_sample += new
            if any(w.process.poll() not in (None, 0) for w in self.workers):
                return "failed", self.failure_report()
            if all(w.process.poll() == 0 for w in self.workers):
                self.events += reader.read()
                return "ok", ""
            if self.cluster:
                self.cluster.check_alive()
            if self.controller and not self.controller.alive():
                return "failed", f"the controller exited:\n{self.controller.log_tail()}"
            waited = time.monotonic() - last_progress
            limit = self.settings.startup_seconds
            if self.train_start is not None:
                limit = self.settings.stall_seconds
            if waited > limit:
                where = "training" if self.train_start else "start-up"
                said = [w.stderr_tail() for w in self.workers if w.stderr_tail()]
                return "hang", "\n".join([f"no progress for {waited:.0f} s during {where}"] + said)
            if self.train_start is not None:
                self.follow_schedule()
                if time.monotonic() >= next_sample:
                    self.sample(since_sample)
                    since_sample = []
                    next_sample = time.monotonic() + SAMPLE_S
            time.sleep(POLL_S)

    def stop(self):
        for worker in self.workers:
            worker.stop()
        if self.cluster:
            self.cluster.stop()
        if self.controller:
            self.controller.stop()

    def result(self, status, error, gateway_scrapes):
        start = next((e for e in self.events if e["event"] == "start"), {})
        end = next((e for e in self.events if e["event"] == "end"), None)
        steps = [e for e in self.events if e["event"] == "step"]
        evals = [
            {
                "step": e["step"],
                "train_seconds": e["train_seconds"],
                "wall_seconds": round(e["t"] - start["t"], 3),
                "test_accuracy": e["test_accuracy"],
                "loss": e["loss"],
            }
            for e in self.events
            if e["event"] == "eval"
        ]
        after = self.bed.wire_bytes()
        wire = {"run": netlab.byte_delta(self.counters["launch"], after)}
        if "train_start" in self.counters:
            wire["train"] = netlab.byte_delta(
                self.counters["train_start"], self.counters.get("train_end", after))
        gateway = None
        if self.cluster:
            gateway = {"phases": gateway_metrics.phase_split(gateway_scrapes),
                       **gateway_metrics.byte_totals(gateway_scrapes),
                       **gateway_metrics.link_faults(gateway_scrapes),
                       "answered": sum(1 for s in gateway_scrapes if s)}
        step_seconds = [e["seconds"] for e in steps]
        return {
            "run": self.run.name,
            "label": self.run.label,
            "model": self.model,
            "rate_mbit": self.rate_mbit,
            "spec": {k: v for k, v in asdict(self.run).items() if v not in ("", None, {})},
            "status": status,
            "expected_failure": status != "ok" and self.run.may_fail,
            "error": error,
            "parameters": start.get("parameters"),
            "steps": steps[-1]["step"] if steps else 0,
            "train_seconds": steps[-1]["train_seconds"] if steps else None,
            "wall_seconds": round(steps[-1]["t"] - start["t"], 3) if steps else None,
            "final_accuracy": end["test_accuracy"] if end else (
                evals[-1]["test_accuracy"] if evals else None),
            "step_seconds_median": round(statistics.median(step_seconds), 4)
            if step_seconds else None,
            "evals": evals,
            "step_times": [[round(e["t"] - start["t"], 3), e["seconds"]] for e in steps],
            "wire": wire,
            "gateway": gateway,
            "samples": self.samples,
            "rate_changes": self.rate_changes,
            "workdir": str(self.workdir),
        }


def execute(bed, settings, run, model, rate_mbit, schedule=()):
    """Runs `run` on `model` with every link at `rate_mbit`; the result dictionary."""
    bed.shape(rate_mbit)
    execution = Execution(bed, settings, run, model, rate_mbit, schedule)
    scrapes = []
    try:
        execution.start()
        status, error = execution.watch()
        scrapes = execution.scrape()
    except GatewayFailed as failure:
        status, error = "failed", str(failure)
    finally:
        execution.stop()
    if schedule:
        bed.shape(rate_mbit)
    return execution.result(status, error, scrapes)
