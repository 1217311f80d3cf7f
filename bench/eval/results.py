"""From the per-run results to the summary: target accuracy, time to it, bytes, phase split.

The target of a model is --target when given, else the best final accuracy of its uncompressed
DDP runs that completed the step budget, minus 0.5 point (all of them train the same steps, so
the figure does not depend on the rate). A run's time to target is the training time (scoring
left out) and the wall time at its first scoring at or above the target; None when it never got
there. Ratios compare a run with the uncompressed DDP run of the same model and rate.

A run that stopped at its time budget before the target gets a projection when the same run
(same model, no controller policy: its arithmetic does not depend on the link) reached the target
at another rate: the steps it needed there times this run's median step time, marked projected.
"""

REFERENCE_RUN = "ddp"
TARGET_MARGIN = 0.005


def targets(results, steps, fixed=None):
    """{model: target accuracy (0-1) or None when nothing defines it}."""
    models = sorted({r["model"] for r in results})
    if fixed is not None:
        return {model: fixed for model in models}
    found = {}
    for model in models:
        finals = [
            r["final_accuracy"]
            for r in results
            if r["model"] == model and r["run"] == REFERENCE_RUN and r["status"] == "ok"
            and r["steps"] >= steps and r["final_accuracy"] is not None
        ]
        found[model] = round(max(finals) - TARGET_MARGIN, 5) if finals else None
    return found


def first_at(result, target):
    """The first scoring of `result` at or above `target`, or None."""
    if target is None:
        return None
    return next((e for e in result["evals"] if e["test_accuracy"] >= target), None)


def time_to(result, target):
    """(train seconds, wall seconds) of the first scoring at or above `target`, or (None, None)."""
    entry = first_at(result, target)
    return (entry["train_seconds"], entry["wall_seconds"]) if entry else (None, None)


def steps_needed(results, goal):
    """{(model, run): fewest steps to the target at any rate} of the runs without a policy."""
    needed = {}
    for r in results:
        entry = first_at(r, goal[r["model"]])
        if entry and r["status"] == "ok" and "policy" not in r["spec"]:
            key = (r["model"], r["run"])
            needed[key] = min(needed.get(key, entry["step"]), entry["step"])
    return needed


def _ratio(a, b):
    return round(a / b, 3) if a and b else None


def projection(result, steps):
    """Projected seconds to the target from the steps it took at another rate, or None."""
    if steps is None or not result["step_seconds_median"]:
        return None
    return round(steps * result["step_seconds_median"], 2)


def row(result, target, reference, steps):
    """One summary row of `result`, compared with `reference` (uncompressed DDP, or None);
    `steps`: {(model, run): steps to the target} for projections."""
    train_s, wall_s = time_to(result, target)
    projected = False
    if train_s is None and result["status"] == "ok":
        train_s = projection(result, steps.get((result["model"], result["run"])))
        projected = train_s is not None
    wire = result["wire"].get("train", result["wire"]["run"])
    row = {
        "run": result["run"],
        "label": result["label"],
        "model": result["model"],
        "rate_mbit": result["rate_mbit"],
        "status": result["status"],
        "expected_failure": result["expected_failure"],
        "error": " ".join(result["error"].splitlines()[:2])[:300],
        "steps": result["steps"],
        "final_accuracy": result["final_accuracy"],
        "target": target,
        "time_to_target_s": train_s,
        "time_to_target_projected": projected,
        "wall_to_target_s": wall_s,
        "train_seconds": result["train_seconds"],
        "step_seconds_median": result["step_seconds_median"],
        "wire_tx_bytes": wire["tx_total"],
        "wire_bytes_per_step": round(wire["tx_total"] / result["steps"])
        if result["steps"] else None,
    }
    if result["gateway"]:
        phases = result["gateway"]["phases"]
        row["phase_seconds"] = {name: round(p["seconds"], 3) for name, p in phases.items()}
    if reference and reference is not result:
        ref_train, _ = time_to(reference, target)
        row["reference_projected"] = False
        if ref_train is None:
            ref_train = projection(reference, steps.get((reference["model"], reference["run"])))
            row["reference_projected"] = ref_train is not None
        row["speedup_vs_ddp"] = _ratio(ref_train, train_s)
        ref_wire = reference["wire"].get("train", reference["wire"]["run"])
        ref_per_step = ref_wire["tx_total"] / reference["steps"] if reference["steps"] else 0
        row["wire_share_of_ddp"] = _ratio(row["wire_bytes_per_step"], ref_per_step)
    return row


def summarize(results, steps, fixed_target=None):
    """The summary: targets per model and one row per run."""
    goal = targets(results, steps, fixed_target)
    references = {
        (r["model"], r["rate_mbit"]): r for r in results
        if r["run"] == REFERENCE_RUN and r["status"] == "ok"
    }
    needed = steps_needed(results, goal)
    rows = [
        row(r, goal[r["model"]], references.get((r["model"], r["rate_mbit"])), needed)
        for r in results
    ]
    failed = [r["run"] for r in rows if r["status"] != "ok" and not r["expected_failure"]]
    return {"targets": goal, "rows": rows, "unexpected_failures": failed}
