#!/usr/bin/python3
"""Unit tests of the evaluation's pure parts: targets, time to target and projections, the run
catalogue, the imbalanced shards and the markdown table (no root, no network, no training)."""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import plot  # noqa: E402
import results  # noqa: E402
import run_eval  # noqa: E402
import runs  # noqa: E402
from train_eval import shard_bounds  # noqa: E402


def result(run, rate, evals, steps, status="ok", step_seconds=1.0, tx=1000, may_fail=False,
           policy=""):
    spec = {"policy": policy} if policy else {}
    return {
        "run": run, "label": run, "model": "mlp", "rate_mbit": rate, "status": status,
        "expected_failure": status != "ok" and may_fail, "error": "" if status == "ok" else "boom",
        "steps": steps, "train_seconds": steps * step_seconds, "final_accuracy": evals[-1][1],
        "step_seconds_median": step_seconds, "spec": spec, "gateway": None,
        "evals": [{"step": s, "train_seconds": s * step_seconds, "wall_seconds": s * step_seconds,
                   "test_accuracy": a} for s, a in evals],
        "wire": {"run": {"tx_total": tx * steps}, "train": {"tx_total": tx * steps}},
    }


class TargetTest(unittest.TestCase):
    def test_target_is_best_complete_reference_minus_half_a_point(self):
        done = [
            result("ddp", 1000, [(10, 0.70), (20, 0.80)], 20),
            result("ddp", 100, [(10, 0.70)], 10),  # stopped early: not a reference
            result("gg-topk", 100, [(20, 0.99)], 20),
        ]
        self.assertEqual(results.targets(done, steps=20), {"mlp": 0.795})

    def test_fixed_target_wins(self):
        done = [result("ddp", 1000, [(20, 0.80)], 20)]
        self.assertEqual(results.targets(done, steps=20, fixed=0.5), {"mlp": 0.5})

    def test_no_reference_no_target(self):
        done = [result("gg-topk", 100, [(20, 0.80)], 20)]
        self.assertEqual(results.targets(done, steps=20), {"mlp": None})


class SummaryTest(unittest.TestCase):
    def setUp(self):
        self.done = [
            result("ddp", 1000, [(10, 0.70), (20, 0.80)], 20, step_seconds=0.5),
            result("ddp", 100, [(10, 0.70)], 10, step_seconds=2.0, tx=100),
            result("gg-topk", 100, [(10, 0.79), (20, 0.80)], 20, step_seconds=0.1, tx=2),
            result("gg-bandwidth", 100, [(10, 0.70)], 10, policy="bandwidth"),
            result("ddp-powersgd-r2-short", 100, [(5, 0.6)], 5, status="failed", may_fail=True),
        ]
        self.rows = {r["run"] + str(r["rate_mbit"]): r
                     for r in results.summarize(self.done, steps=20)["rows"]}

    def test_time_to_target_is_the_first_scoring_at_or_above_it(self):
        self.assertEqual(self.rows["gg-topk100"]["time_to_target_s"], 2.0)
        self.assertFalse(self.rows["gg-topk100"]["time_to_target_projected"])

    def test_a_run_stopped_early_is_projected_from_another_rate(self):
        row = self.rows["ddp100"]
        self.assertEqual(row["time_to_target_s"], 40.0)  # 20 steps at 1000 Mb/s x 2 s a step
        self.assertTrue(row["time_to_target_projected"])

    def test_speed_up_and_wire_share_compare_with_ddp_at_the_same_rate(self):
        row = self.rows["gg-topk100"]
        self.assertEqual(row["speedup_vs_ddp"], 20.0)
        self.assertEqual(row["wire_share_of_ddp"], 0.02)
        self.assertTrue(row["reference_projected"])

    def test_policy_runs_are_never_projected(self):
        self.assertIsNone(self.rows["gg-bandwidth100"]["time_to_target_s"])

    def test_documented_failures_are_not_unexpected(self):
        summary = results.summarize(self.done, steps=20)
        self.assertEqual(summary["unexpected_failures"], [])
        self.done.append(result("gg-qsgd", 100, [(5, 0.6)], 5, status="hang"))
        self.assertEqual(results.summarize(self.done, steps=20)["unexpected_failures"], ["gg-qsgd"])

    def test_table_marks_projections_and_failures(self):
        table = plot.markdown_tables(results.summarize(self.done, steps=20))
        self.assertIn("| ddp | ok | 10 | 70.00% | ≈40.0 |", table)
        self.assertIn("failed (expected)", table)
        self.assertIn("≈: projected", table)


class CatalogueTest(unittest.TestCase):
    def test_select_keeps_catalogue_order_and_rejects_unknown_names(self):
        catalogue = runs.catalogue(0.01)
        picked = runs.select(catalogue, ["gg-topk", "ddp"])
        self.assertEqual([r.name for r in picked], ["ddp", "gg-topk"])
        with self.assertRaises(ValueError):
            runs.select(catalogue, ["ddp", "nonsense"])

    def test_only_the_reference_trains_the_exact_budget_and_only_peers_may_fail(self):
        catalogue = runs.catalogue(0.01)
        self.assertEqual([r.name for r in catalogue if r.reference], ["ddp"])
        self.assertTrue(all(r.hook == "powersgd" for r in catalogue if r.may_fail))
        self.assertTrue(set(runs.QUICK_RUNS) <= {r.name for r in catalogue})


class PlanTest(unittest.TestCase):
    def plan(self, *argv):
        args = run_eval.parse_args(["--models", "mlp", *argv])
        return [(rate, run.name) for _, rate, run in run_eval.Evaluation.plan_of(args)]

    def test_rate_limited_runs_go_on_their_link_only(self):
        plan = self.plan("--rates", "unshaped,1000,100,20")
        self.assertEqual([r for r, n in plan if n == "ddp-powersgd-r2-short-buckets"], [1000])
        self.assertEqual([r for r, n in plan if n == "ddp-powersgd-r4-default"], [100])
        self.assertEqual([r for r, n in plan if n == "ddp-powersgd-r4-short"], [1000, 100, 20])
        self.assertEqual([r for r, n in plan if n == "imb-dagc-r"], [20])
        self.assertNotIn((run_eval.netlab.UNSHAPED, "ddp-fp16"), plan)

    def test_powersgd_hook_runs_use_one_bucket_but_the_abort_demonstration(self):
        hooks = [r for r in runs.catalogue(0.01) if r.hook == "powersgd"]
        self.assertEqual([r.name for r in hooks if not r.single_bucket],
                         ["ddp-powersgd-r2-short-buckets"])


class ShardTest(unittest.TestCase):
    def test_imbalanced_shards_follow_the_shares_and_cover_everything(self):
        bounds = shard_bounds(60000, 4, [8, 4, 2, 1])
        self.assertEqual([b - a for a, b in bounds], [32000, 16000, 8000, 4000])
        self.assertEqual(bounds[0][0], 0)
        self.assertEqual(bounds[-1][1], 60000)

    def test_equal_shards_by_default(self):
        self.assertEqual(shard_bounds(10, 2, []), [(0, 5), (5, 10)])


if __name__ == "__main__":
    unittest.main()
