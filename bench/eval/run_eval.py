#!/usr/bin/python3
"""gradgate's evaluation: real DDP training over shaped links, next to PyTorch's own hooks.

Builds --hosts hosts as network namespaces on a bridge (netlab.py), shapes every host's link to
each rate of --rates in turn (tc tbf, both directions) and, on the same links, trains every run
of --runs (runs.py: DDP all-reduce, fp16_compress_hook, powerSGD_hook, gradgate codecs and
policies, imbalanced data) for each model of --models, one DDP worker and one gateway per host
(executor.py). --scenario adds a run whose link rate follows --scenario-phases (1000 Mb/s, then
20, then 1000 again) under the bandwidth policy. --quick is the CI smoke: one rate, fewer steps,
four runs.

Writes to --out: results/<model>-<rate>-<run>.json per run, scenario.json, and summary.json
(targets, one row per run, the machine, the command), rewritten after every run. plot.py turns
them into PNGs and a markdown table. Exits 0 when every run succeeded or failed in a documented
way (the powerSGD_hook peers), 1 otherwise, 77 without root, ip or tc (skipped).
Everything it creates (namespaces, bridge, processes) is removed on exit, Ctrl-C and SIGTERM;
namespaces left by a killed earlier run are removed at start.
"""

import argparse
import dataclasses
import json
import os
import platform
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "client" / "python"))

import executor  # noqa: E402
import netlab  # noqa: E402
import results  # noqa: E402
import runs  # noqa: E402

# Uncompressed DDP completes its 30 steps (0.5 s each at 400 Mb/s here, 1.6 s at 100 Mb/s), so
# the target is set; the shaped links still make top-k and the bandwidth policy compress.
QUICK = {"rates": "400", "runs": ",".join(runs.QUICK_RUNS), "models": "mlp", "steps": 30,
         "max_train_seconds": 60.0, "eval_every": 10}
SCENARIO_STEPS = 1_000_000  # the scenario ends on time, not on steps


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gradgate", type=Path,
                   default=Path(os.environ.get("GRADGATE_BINARY", REPO / "build/cli/gradgate")),
                   help="the gradgate binary (default: $GRADGATE_BINARY, else build/cli/gradgate)")
    p.add_argument("--library", default="",
                   help="libgradgate.so for the workers (default: the one next to --gradgate's "
                   "build tree, else the client's own search)")
    p.add_argument("--python", default=os.environ.get("GRADGATE_EVAL_PYTHON", "/usr/bin/python3"),
                   help="interpreter of the workers (it must import torch)")
    p.add_argument("--out", type=Path, default=Path("eval-results"), help="result directory")
    p.add_argument("--hosts", type=int, default=4)
    p.add_argument("--rates", default="unshaped,1000,100,20",
                   help="link rates in Mb/s; unshaped: no tc limit (only runs.UNSHAPED_RUNS)")
    p.add_argument("--runs", default="all", help="comma list of run names, all, or none")
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--cnn-rates", default="",
                   help="rates the CNN runs at (default: the lowest of --rates; it is "
                   "compute-bound above)")
    p.add_argument("--cnn-runs", default=",".join(runs.CNN_RUNS),
                   help="the runs the CNN trains with (those of --runs among them)")
    p.add_argument("--steps", type=int, default=400,
                   help="step budget of uncompressed DDP, whose final accuracy sets the target")
    p.add_argument("--steps-factor", type=float, default=2.0,
                   help="the other runs may train this many times --steps to reach the target")
    p.add_argument("--max-train-seconds", type=float, default=80.0,
                   help="a run stops once it has trained this long (scoring left out)")
    p.add_argument("--eval-every", type=int, default=25, help="score the test set every N steps")
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0,
                   help="the workers' model initialisation and batch order")
    p.add_argument("--target", type=float,
                   help="target accuracy 0-1 (default: uncompressed DDP's final minus 0.5 pt)")
    p.add_argument("--topk-density", type=float, default=0.01)
    p.add_argument("--target-communicate-seconds", type=float, default=0.1,
                   help="the bandwidth and dagc policies' wire time per step")
    p.add_argument("--psgd-short-warmup", type=int, default=10,
                   help="start_powerSGD_iter of the short-warm-up powerSGD_hook runs")
    p.add_argument("--startup-seconds", type=float, default=180.0)
    p.add_argument("--stall-seconds", type=float, default=60.0,
                   help="a run that shows no step for this long has hung")
    p.add_argument("--scenario", action="store_true", help="also run the scenario of change")
    p.add_argument("--scenario-phases", default="1000:30,20:40,1000:30",
                   help="RATE:SECONDS,... the scenario's link rates in turn")
    p.add_argument("--quick", action="store_true",
                   help=f"CI smoke: {QUICK} (explicit options still win)")
    p.add_argument("--log-level", default="warn", help="the gateways' log level")
    p.add_argument("--keep", action="store_true", help="keep every run's logs and configs")
    p.add_argument("--list", action="store_true", help="print the runs it would make and exit")
    args = p.parse_args(argv)
    if args.quick:
        given = {a.split("=")[0].lstrip("-").replace("-", "_") for a in (argv or sys.argv[1:])}
        for key, value in QUICK.items():
            if key not in given:
                setattr(args, key, value)
    try:
        args.rate_list = [netlab.parse_rate(r) for r in args.rates.split(",")]
        args.model_list = [m for m in args.models.split(",") if m]
        args.cnn_rate_list = ([netlab.parse_rate(r) for r in args.cnn_rates.split(",")]
                              if args.cnn_rates else [min(args.rate_list, key=netlab.speed)])
        args.phases = [(netlab.parse_rate(r), float(s)) for r, s in
                       (phase.split(":") for phase in args.scenario_phases.split(","))]
        catalogue = runs.catalogue(args.topk_density)
        names = {"all": [r.name for r in catalogue], "none": []}.get(
            args.runs, [n for n in args.runs.split(",") if n])
        args.run_list = runs.select(catalogue, names)
    except ValueError as error:
        p.error(str(error))
    if args.hosts < 2 or min(args.rate_list) < 0 or args.steps < 1:
        p.error("--hosts must be at least 2, rates positive, --steps at least 1")
    if any(m not in ("mlp", "cnn") for m in args.model_list):
        p.error("--models takes mlp and cnn")
    if not args.library:
        built = args.gradgate.resolve().parents[1] / "client" / "libgradgate.so"
        args.library = str(built) if built.exists() else ""
    return args


def machine(args):
    def output(*argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip()
        except OSError as error:
            return f"<{error}>"

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "torch": output(args.python, "-c", "import torch; print(torch.__version__)"),
        "gradgate": output(str(args.gradgate), "version"),
    }


class Evaluation:
    """The matrix of runs and the scenario; writes every result as it comes."""

    def __init__(self, args, bed):
        self.args = args
        self.bed = bed
        self.results = []
        self.settings = executor.Settings(
            gradgate=args.gradgate.resolve(), python=args.python, workdir=args.out / "work",
            steps=args.steps, steps_factor=args.steps_factor, eval_every=args.eval_every,
            batch_size=args.batch_size, lr=args.lr,
            max_train_seconds=args.max_train_seconds, startup_seconds=args.startup_seconds,
            stall_seconds=args.stall_seconds,
            target_communicate_seconds=args.target_communicate_seconds,
            psgd_short_warmup=args.psgd_short_warmup, seed=args.seed, library=args.library,
            log_level=args.log_level)
        self.info = {"command": sys.argv, "machine": machine(args),
                     "settings": {k: str(v) for k, v in dataclasses.asdict(self.settings).items()},
                     "fixed_target": args.target, "hosts": args.hosts,
                     "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        (args.out / "results").mkdir(parents=True, exist_ok=True)

    @staticmethod
    def plan_of(args):
        """[(model, rate, run)] in the order they execute."""
        cnn_runs = args.cnn_runs.split(",")
        plan = []
        for model in args.model_list:
            rates = args.cnn_rate_list if model == "cnn" else args.rate_list
            for rate in rates:
                for run in args.run_list:
                    if run.lowest_rate_only and rate != min(rates, key=netlab.speed):
                        continue
                    if run.only_rate and rate != run.only_rate:
                        continue
                    if rate == netlab.UNSHAPED and run.name not in runs.UNSHAPED_RUNS:
                        continue
                    if model == "cnn" and run.name not in cnn_runs:
                        continue
                    plan.append((model, rate, run))
        return plan

    def matrix(self):
        plan = self.plan_of(self.args)
        for model, rate, run in plan:
            settings = self.settings
            fastest = max((r for m, r, _ in plan if m == model), key=netlab.speed)
            if run.reference and rate == fastest:
                # Uncompressed DDP on the fastest link sets the target: it always ends its steps.
                settings = dataclasses.replace(settings, max_train_seconds=0.0)
            self.record(executor.execute(self.bed, settings, run, model, rate))

    def record(self, result):
        self.results.append(result)
        name = f"{result['model']}-{netlab.rate_tag(result['rate_mbit'])}-{result['run']}.json"
        write_json(self.args.out / "results" / name, result)
        self.write_summary()
        accuracy = result["final_accuracy"]
        print(f"{result['model']:4} {netlab.rate_name(result['rate_mbit']):>9}  {result['run']:26} "
              f"{result['status']:7} steps {result['steps']:5}  "
              f"accuracy {'-' if accuracy is None else f'{100 * accuracy:.2f}%':>7}  "
              f"train {result['train_seconds'] or 0:7.1f} s  "
              f"wire {result['wire'].get('train', result['wire']['run'])['tx_total'] / 1e6:8.1f} MB"
              + (f"  ({result['error'].splitlines()[0][:120]})" if result["error"] else ""),
              flush=True)
        if result["status"] == "ok" and not self.args.keep:
            shutil.rmtree(result["workdir"], ignore_errors=True)

    def write_summary(self):
        summary = results.summarize(self.results, self.args.steps, self.args.target)
        write_json(self.args.out / "summary.json", {**self.info, **summary})
        return summary

    def scenario(self):
        run = next(r for r in runs.catalogue(self.args.topk_density) if r.name == runs.SCENARIO_RUN)
        phases = self.args.phases
        schedule, at = [], 0.0
        for (_, seconds), (rate, _) in zip(phases, phases[1:]):
            at += seconds
            schedule.append((at, rate))
        settings = dataclasses.replace(self.settings, steps=SCENARIO_STEPS,
                                       max_train_seconds=sum(s for _, s in phases))
        result = executor.execute(self.bed, settings, run, "mlp", phases[0][0], schedule)
        result["phases"] = [{"rate_mbit": r, "seconds": s} for r, s in phases]
        write_json(self.args.out / "scenario.json", result)
        faults = result.get("gateway") or {}
        print(f"scenario: {result['status']}, {len(result['samples'])} samples, rate changes "
              f"{result['rate_changes']}, failed all-reduces {faults.get('failed_allreduces')}, "
              f"reconnects {faults.get('reconnects')}, peers down {faults.get('peers_down')}"
              + (f" ({result['error']})" if result["error"] else ""), flush=True)
        if result["status"] == "ok" and not self.args.keep:
            shutil.rmtree(result["workdir"], ignore_errors=True)
        return result["status"] == "ok"


def write_json(path, value):
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(value, indent=1) + "\n")
    os.replace(temporary, path)


def main(argv=None):
    args = parse_args(argv)
    if args.list:
        for model, rate, run in Evaluation.plan_of(args):
            print(f"{model:4} {netlab.rate_name(rate):>9}  {run.name:26} {run.label}")
        if args.scenario:
            print(f"mlp  scenario   {runs.SCENARIO_RUN:26} link rates {args.scenario_phases}")
        return 0
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        print("run_eval: needs root, ip and tc (network namespaces, tc tbf): skipped")
        return 77
    if not args.gradgate.is_file():
        print(f"run_eval: no gradgate binary at {args.gradgate} (--gradgate)", file=sys.stderr)
        return 1
    # SIGTERM and SIGHUP end the evaluation like Ctrl-C: through the finally blocks.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.default_int_handler)
    os.environ["GRADGATE_API_TOKEN"] = secrets.token_hex(16)
    removed = netlab.remove_stale()
    if removed:
        print(f"removed what an earlier, killed run left: {' '.join(removed)}")
    started = time.monotonic()
    scenario_ok = True
    try:
        with netlab.Testbed(args.hosts) as bed:
            evaluation = Evaluation(args, bed)
            evaluation.matrix()
            if args.scenario:
                scenario_ok = evaluation.scenario()
            summary = evaluation.write_summary()
    except KeyboardInterrupt:
        print("evaluation interrupted; namespaces and processes removed", file=sys.stderr)
        return 130
    except netlab.NetlabError as error:
        print(f"run_eval: {error}", file=sys.stderr)
        return 1
    print(f"done in {time.monotonic() - started:.0f} s; results in {args.out}")
    failed = summary["unexpected_failures"] + ([] if scenario_ok else ["scenario"])
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
