#!/usr/bin/python3
"""Plots and tables of an evaluation's results (run_eval.py --out DIR).

    plot.py DIR [--plots DIR/plots] [--table DIR/results-table.md] [--target 0.85]

Writes, with matplotlib (Debian python3-matplotlib, Agg backend, no display needed):
  accuracy-<model>-<rate>.png   test accuracy vs wall time of every run, target line
  bytes-<model>-<rate>.png      bytes sent by all hosts (interface counters) vs time
  scenario.png                  the scenario of change: link rate, achieved and target ratio,
                                step time and accuracy over time (when DIR/scenario.json exists)
and a markdown table per model and rate (the report includes it), also printed to stdout. The
rows are recomputed from the per-run results (results.py), so --target can change the target
accuracy after the fact.
"""

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import netlab  # noqa: E402  (next to this file)
import results as summaries  # noqa: E402
import runs  # noqa: E402

MB = 1e6


def load(out, target):
    """(summary rows recomputed, per-run results, scenario or None) of run_eval's --out."""
    recorded = json.loads((out / "summary.json").read_text())
    settings = recorded["settings"]
    if target is None:
        target = recorded.get("fixed_target")  # run_eval's --target, if it had one
    results = [json.loads(p.read_text()) for p in (out / "results").glob("*.json")]
    results.sort(key=lambda r: (r["model"], -netlab.speed(r["rate_mbit"]), runs.position(r["run"])))
    summary = summaries.summarize(results, int(settings["steps"]), target)
    scenario_path = out / "scenario.json"
    scenario = json.loads(scenario_path.read_text()) if scenario_path.exists() else None
    return summary, results, scenario


def by_link(items):
    groups = defaultdict(list)
    for item in items:
        groups[(item["model"], item["rate_mbit"])].append(item)
    return sorted(groups.items(), key=lambda kv: (kv[0][0], -netlab.speed(kv[0][1])))


def style(run):
    """Line style of a run, the same in every plot: a colour per run, gradgate dashed."""
    colours = plt.get_cmap("tab20").colors
    return {"color": colours[runs.position(run) % len(colours)],
            "linestyle": "--" if run.startswith(("gg-", "imb-")) else "-", "label": run}


def plot_accuracy(results, targets, plots):
    paths = []
    for (model, rate), group in by_link(results):
        fig, ax = plt.subplots(figsize=(8, 5))
        for r in group:
            if r["evals"]:
                accuracy = [100 * e["test_accuracy"] for e in r["evals"]]
                ax.plot([e["wall_seconds"] for e in r["evals"]], accuracy, marker=".",
                        **style(r["run"]))
        if targets.get(model):
            ax.axhline(100 * targets[model], color="grey", linestyle="--", label="target")
        ax.set(xlabel="wall time of training (s)", ylabel="test accuracy (%)",
               title=f"{model}, {netlab.rate_name(rate)} links: accuracy vs time")
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        paths.append(save(fig, plots / f"accuracy-{model}-{netlab.rate_tag(rate)}.png"))
    return paths


def plot_bytes(results, plots):
    paths = []
    for (model, rate), group in by_link(results):
        fig, ax = plt.subplots(figsize=(8, 5))
        for r in group:
            if r["samples"]:
                ax.plot([s["seconds"] for s in r["samples"]],
                        [s["tx_bytes"] / MB for s in r["samples"]], **style(r["run"]))
        ax.set(xlabel="wall time of training (s)", ylabel="bytes sent by all hosts (MB)",
               title=f"{model}, {netlab.rate_name(rate)} links: bytes on the wire vs time")
        ax.set_yscale("symlog", linthresh=1)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
        paths.append(save(fig, plots / f"bytes-{model}-{netlab.rate_tag(rate)}.png"))
    return paths


def plot_scenario(scenario, plots):
    samples = scenario["samples"]
    t = [s["seconds"] for s in samples]
    steps = scenario["step_times"]
    evals = scenario["evals"]
    fig, axes = plt.subplots(4, 1, figsize=(8, 10), sharex=True)
    rows = (
        ("link rate (Mb/s)", t, [s["rate_mbit"] for s in samples], None),
        ("ratio raw/wire", t, [s.get("ratio") for s in samples],
         [s.get("target_ratio") for s in samples]),
        ("step time (s)", [s[0] for s in steps], [s[1] for s in steps], None),
        ("test accuracy (%)", [e["wall_seconds"] for e in evals],
         [100 * e["test_accuracy"] for e in evals], None),
    )
    for ax, (label, x, values, target) in zip(axes, rows):
        ax.plot(x, values, marker=".", label="achieved" if target else None)
        if target:
            ax.plot(x, target, linestyle="--", label="controller's target")
            ax.set_yscale("symlog", linthresh=1)
            ax.legend(fontsize=8)
        for change in scenario["rate_changes"]:
            ax.axvline(change["seconds"], color="grey", linestyle=":")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("wall time of training (s)")
    axes[0].set_title(f"scenario of change: {scenario['label']}, {scenario['model']}")
    return [save(fig, plots / "scenario.png")]


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def cell(value, form="{}"):
    return "–" if value is None else form.format(value)


def markdown_tables(summary):
    """One markdown table per model and rate, from summary.json's rows."""
    parts = []
    for (model, rate), rows in by_link(summary["rows"]):
        target = summary["targets"].get(model)
        parts.append(f"**{model}, {netlab.rate_name(rate)}** (target accuracy "
                     f"{cell(target and 100 * target, '{:.2f}%')})\n")
        parts.append("| run | status | steps | final accuracy | time to target (s) | "
                     "speed-up vs DDP | wire MB/step | wire vs DDP | encode / communicate / "
                     "decode (s, all gateways) |")
        parts.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        notes = ("≈: projected, the steps the same run needed at another rate times its median "
                 "step time here")
        for r in rows:
            status = r["status"] + (" (expected)" if r["expected_failure"] else "")
            phases = r.get("phase_seconds")
            split = " / ".join(f"{phases[p]:.1f}" for p in ("encode", "communicate", "decode")) \
                if phases else "–"
            accuracy = r["final_accuracy"]
            projected = "≈" if r["time_to_target_projected"] else ""
            speedup_mark = "≈" if projected or r.get("reference_projected") else ""
            parts.append(
                f"| {r['label']} | {status} | {r['steps']} | "
                f"{cell(accuracy and 100 * accuracy, '{:.2f}%')} | "
                f"{cell(r['time_to_target_s'], projected + '{:.1f}')} | "
                f"{cell(r.get('speedup_vs_ddp'), speedup_mark + '{:.2f}×')} | "
                f"{cell(r['wire_bytes_per_step'] and r['wire_bytes_per_step'] / MB, '{:.2f}')} | "
                f"{cell(r.get('wire_share_of_ddp') and 100 * r['wire_share_of_ddp'], '{:.1f}%')} | "
                f"{split} |")
        if any(r["time_to_target_projected"] or r.get("reference_projected") for r in rows):
            parts.append(f"\n{notes}")
        failures = [r for r in rows if r["error"]]
        for r in failures:
            parts.append(f"\n- {r['run']}: {r['status']}: `{r['error']}`")
        parts.append("")
    return "\n".join(parts)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="run_eval.py's --out directory")
    p.add_argument("--plots", type=Path, help="where the PNGs go (default: OUT/plots)")
    p.add_argument("--table", type=Path, help="markdown file (default: OUT/results-table.md)")
    p.add_argument("--target", type=float, help="target accuracy 0-1 (default: as run_eval)")
    args = p.parse_args(argv)
    try:
        summary, results, scenario = load(args.out, args.target)
    except (OSError, KeyError, json.JSONDecodeError) as error:
        print(f"plot: cannot read {args.out}: {error}", file=sys.stderr)
        return 1
    plots = args.plots or args.out / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    written = plot_accuracy(results, summary["targets"], plots) + plot_bytes(results, plots)
    if scenario and scenario["samples"]:
        written += plot_scenario(scenario, plots)
    table = markdown_tables(summary)
    (args.table or args.out / "results-table.md").write_text(table + "\n")
    print(table)
    print("\n".join(f"wrote {path}" for path in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
