#!/usr/bin/python3
"""Tests of `python -m gradgate.run` (gradgate/run.py, gradgate/autohook.py) against real
gateways on loopback: an ordinary DDP script (plain_ddp.py), unchanged, trains through them,
whichever way its workers are started (torchrun's LOCAL_RANK, torch.multiprocessing.spawn,
multiprocessing by fork or forkserver), keeps a comm hook of its own, waits for gateways that start
after it, and survives a gateway that restarts under torchrun; and the command line's options.

The artifacts under test are as support.py says. Run: /usr/bin/python3 tests/python/test_autohook.py
"""

import json
import os
import subprocess
import sys
import time
import unittest
from pathlib import Path

from support import (
    GATEWAY_BINARY,
    POLL_S,
    REPO,
    WORKER_DEADLINE_S,
    TempDirTest,
    gateway_status,
    require_artifacts,
    run_processes,
    wait_for_output,
)

# After support, which puts the package under test first on sys.path.
from gradgate.cluster import LocalCluster  # noqa: E402

PLAIN_SCRIPT = Path(__file__).resolve().parent / "plain_ddp.py"


class AutoHookTest(TempDirTest):
    """An ordinary DDP script (plain_ddp.py), unchanged, run by `python -m gradgate.run` on two
    gateways of one worker each: its gradients go through the gateways, unless it registers a
    comm hook of its own; started before its gateways, it waits for them; under torchrun it
    survives a gateway that crashes and comes back."""

    STEPS = 40

    def setUp(self):
        require_artifacts(self)

    def run_plain(self, *script_args, run_options=(), gateways_first=True, spawn=0, processes=0,
                  start_method="fork", codec="fp16"):
        """Every rank's results, each gateway's all-reduce count, and node 0's output
        (`run_options` go to gradgate.run). With gateways_first False the gateways start once
        both scripts wait for them. With `spawn` N, each node's script starts its N workers with
        torch.multiprocessing.spawn and has no local rank of its own; with `processes` N, with
        multiprocessing.Process by `start_method`, the two nodes' ranks interleaved."""
        workdir = self.make_workdir()
        local_workers = spawn or processes or 1
        world = 2 * local_workers
        cluster = LocalCluster(GATEWAY_BINARY, workdir=workdir, log_level="warn", nodes=2,
                               local_workers=local_workers, codec=codec)
        self.addCleanup(cluster.stop)
        when_started = None
        if gateways_first:
            cluster.start()
        else:
            def when_started(processes):
                wait_for_output(workdir, processes, "trying again for up to")
                cluster.start()
        commands, environments = [], []
        for node in range(2):
            commands.append(
                [sys.executable, "-m", "gradgate.run", *run_options, str(PLAIN_SCRIPT),
                 f"--init-method=file://{workdir / 'rendezvous'}", f"--rank={node}",
                 f"--world-size={world}", f"--steps={self.STEPS}", f"--spawn={spawn}",
                 f"--processes={processes}", f"--start-method={start_method}",
                 f"--result={workdir / 'result{rank}.json'}", *script_args]
            )
            environment = dict(os.environ, PYTHONPATH=str(REPO / "client" / "python"),
                               GRADGATE_SOCKET=str(cluster.socket_path(node)))
            environment.pop("LOCAL_RANK", None)
            if local_workers == 1:
                environment["LOCAL_RANK"] = "0"
            environments.append(environment)
        run_processes(cluster, workdir, commands, environments, when_started)
        statuses = [gateway_status(workdir, node) for node in range(2)]
        results = [json.loads((workdir / f"result{r}.json").read_text()) for r in range(world)]
        return results, statuses, (workdir / "worker0.err").read_text()

    def run_single_rank(self, workdir, body):
        """Runs `body` in a python process that is the only rank of a gloo group (torch and
        torch.distributed as dist imported); returns its output after checking it succeeded."""
        script = (
            "import torch, torch.distributed as dist\n"
            f"dist.init_process_group('gloo', init_method='file://{workdir / 'rendezvous'}', "
            "rank=0, world_size=1)\n" + body
        )
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
            env=dict(os.environ, PYTHONPATH=str(REPO / "client" / "python")),
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout

    def test_an_unchanged_script_trains_through_the_gateways(self):
        results, statuses, output = self.run_plain()
        self.assertEqual(results[0]["digest"], results[1]["digest"])
        losses = results[0]["losses"]
        self.assertLess(sum(losses[-5:]), 0.8 * sum(losses[:5]), "the loss did not fall")
        # Every step's buckets went through each gateway.
        for status in statuses:
            self.assertGreaterEqual(status["allreduces"], self.STEPS)
        self.assertIn(f"gradgate: ddp: {self.STEPS} steps", output)

    def check_trained_by_two_workers_a_node(self, results, statuses, output):
        self.assertEqual(len(results), 4)
        self.assertEqual(len({result["digest"] for result in results}), 1, results)
        losses = results[0]["losses"]
        self.assertLess(sum(losses[-5:]), 0.8 * sum(losses[:5]), "the loss did not fall")
        for status in statuses:
            self.assertGreaterEqual(status["allreduces"], self.STEPS)
        # Worker 0 of node 0 is its local rank 0: it reports, and only it.
        self.assertEqual(output.count(f"gradgate: ddp: {self.STEPS} steps"), 1, output)
        self.assertNotIn("no DistributedDataParallel model", output)

    def test_workers_that_the_script_spawns_train_through_the_gateways(self):
        # The options go with gradgate into the spawned workers: momentum correction among them.
        results, statuses, output = self.run_plain(spawn=2,
                                                   run_options=["--momentum-correction"])
        self.check_trained_by_two_workers_a_node(results, statuses, output)
        self.assertIn(", momentum correction 0.9\n", output)
        self.assertEqual({result["momentum_buffers"] for result in results}, {0})

    def test_workers_that_the_script_forks_find_their_local_ranks_in_their_group(self):
        # Ranks 0 and 2 on node 0, 1 and 3 on node 1: neither rank % 2 nor rank - 2 * node
        # would give each gateway local ranks 0 and 1.
        self.check_trained_by_two_workers_a_node(*self.run_plain(processes=2))

    def test_workers_that_start_as_fresh_interpreters_get_gradgate_too(self):
        # forkserver: multiprocessing's default on Linux from Python 3.14 on. The workers do not
        # import gradgate themselves; without the hand-down they would train over gloo alone.
        self.check_trained_by_two_workers_a_node(
            *self.run_plain(processes=2, start_method="forkserver"))

    def test_a_script_started_before_its_gateways_waits_for_them(self):
        results, statuses, output = self.run_plain(gateways_first=False)
        self.assertIn("No such file or directory; trying again for up to 300000 ms", output)
        self.assertEqual(results[0]["digest"], results[1]["digest"])
        for status in statuses:
            self.assertGreaterEqual(status["allreduces"], self.STEPS)

    def test_a_job_under_torchrun_comes_back_after_its_gateway_restarts(self):
        # One node of two workers under torchrun, allowed one restart. The gateway is killed
        # mid-training and started again: the failed step ends both workers, torchrun starts
        # them again, and they wait for the gateway and train to the end.
        steps = 3000
        workdir = self.make_workdir()
        cluster = self.start_cluster(workdir, nodes=1, local_workers=2, codec="fp16")
        # --redirects and --tee: torchrun of PyTorch 1.13 under Python 3.11 cannot read their
        # default "0" (Std.from_str finds no member); 2 sends the workers' stderr to files and
        # on to torchrun's.
        command = [
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
            "--max_restarts=1", "--monitor_interval=0.2", "--redirects=2", "--tee=2",
            "-m", "gradgate.run",
            str(PLAIN_SCRIPT), f"--steps={steps}", f"--result={workdir}/result{{rank}}.json",
        ]
        environment = dict(os.environ, PYTHONPATH=str(REPO / "client" / "python"),
                           GRADGATE_SOCKET=cluster.sockets[0])

        def restart_gateway_mid_training(processes):
            deadline = time.monotonic() + WORKER_DEADLINE_S
            while gateway_status(workdir, 0)["allreduces"] < 20:
                self.assertIsNone(processes[0].poll(), "torchrun ended before 20 all-reduces")
                self.assertLess(time.monotonic(), deadline, "no 20 all-reduces in time")
                time.sleep(POLL_S)
            cluster.restart(0)

        run_processes(cluster, workdir, [command], [environment], restart_gateway_mid_training)
        # The first run failed on the lost gateway...
        output = (workdir / "worker0.err").read_text()
        self.assertIn('connection to the gateway at "', output)
        results = [json.loads((workdir / f"result{r}.json").read_text()) for r in range(2)]
        self.assertEqual(results[0]["digest"], results[1]["digest"])
        self.assertEqual(len(results[0]["losses"]), steps)
        # ... and the second, which the restarted gateway carried, trained to the end (on one
        # node, so nothing went to other gateways).
        self.assertIn(f"ddp: {steps} steps, {steps} all-reduces", output)
        self.assertIn(f"{steps} all-reduces (fp16 {steps}), 113.7 MB of gradients, none sent to "
                      "other gateways", output)
        self.assertGreaterEqual(gateway_status(workdir, 0)["allreduces"], steps)

    def test_a_script_with_its_own_hook_keeps_it(self):
        results, statuses, output = self.run_plain("--own-hook")
        self.assertEqual(results[0]["digest"], results[1]["digest"])
        self.assertEqual([status["allreduces"] for status in statuses], [0, 0])
        self.assertIn("registers its own comm hook", output)
        self.assertIn("no DistributedDataParallel model of this process (1 made) was given", output)

    def assert_same_parameters(self, results, reference, message=None):
        """Rank 0's final parameters in `results` and `reference` agree to float rounding."""
        got, want = results[0]["parameters"], reference[0]["parameters"]
        worst = max(abs(a - b) / (1e-3 + abs(b)) for a, b in zip(got, want))
        self.assertLess(worst, 1e-4, message)

    def test_momentum_correction_takes_the_optimizers_momentum_and_weight_decay(self):
        # With a dense codec, momentum SGD moved in front of the gateways (weight decay on one of
        # two parameter groups, Nesterov or not) ends where the script's own SGD does with DDP's
        # averaging, to rounding; and the script's optimizer kept no momentum of its own.
        for nesterov in ((), ("--nesterov",)):
            optimizer = ("--weight-decay=0.05", *nesterov)
            reference, _, _ = self.run_plain("--own-hook", *optimizer, codec="none")
            results, statuses, output = self.run_plain(
                *optimizer, run_options=["--momentum-correction"], codec="none")
            for status in statuses:
                self.assertGreaterEqual(status["allreduces"], self.STEPS)
            self.assertEqual(results[0]["digest"], results[1]["digest"])
            expected = " momentum correction 0.9" + (" (Nesterov)" if nesterov else "") + "\n"
            self.assertIn(expected, output)
            self.assertEqual(results[0]["momentum_buffers"], 0)
            self.assertEqual(reference[0]["momentum_buffers"], 4)
            # The script sees its optimizer's settings.
            self.assertEqual(results[0]["groups"], [[0.9, 0.05, bool(nesterov)],
                                                    [0.9, 0.0, bool(nesterov)]])
            self.assert_same_parameters(results, reference, f"nesterov={bool(nesterov)}")

    def test_a_job_resumed_from_its_checkpoints_goes_on_as_if_never_stopped(self):
        # Momentum correction's velocities are in the optimizer's state_dict(): stopped halfway
        # and resumed from each rank's checkpoint (on gateways started afresh), the job ends where
        # the script's own SGD with DDP's averaging does in one go.
        optimizer = ("--weight-decay=0.05", "--nesterov")
        reference, _, _ = self.run_plain("--own-hook", *optimizer, codec="none")
        checkpoint = f"--checkpoint={self.make_workdir() / 'checkpoint{rank}.pt'}"
        for stop_after in (self.STEPS // 2, 0):
            results, statuses, _ = self.run_plain(
                *optimizer, checkpoint, f"--stop-after={stop_after}",
                run_options=["--momentum-correction"], codec="none")
            self.assertEqual([status["allreduces"] for status in statuses], [self.STEPS // 2] * 2)
        self.assertEqual(results[0]["momentum_buffers"], 0)
        self.assert_same_parameters(results, reference)

    def test_gradients_accumulated_under_no_sync_are_averaged_once_a_step(self):
        # Four micro-batches a step, three of them under no_sync(): the hook runs once a step,
        # and the parameters end where DDP's own averaging takes them (momentum correction on,
        # so that its velocities are checked to advance once a step too).
        reference, _, _ = self.run_plain("--own-hook", "--accumulate=4", codec="none")
        results, statuses, output = self.run_plain(
            "--accumulate=4", run_options=["--momentum-correction"], codec="none")
        self.assertIn(f"gradgate: ddp: {self.STEPS} steps, {self.STEPS} all-reduces", output)
        self.assertEqual([status["allreduces"] for status in statuses], [self.STEPS] * 2)
        self.assertEqual(results[0]["digest"], results[1]["digest"])
        self.assert_same_parameters(results, reference)

    def test_momentum_correction_ends_where_gradients_accumulate_outside_no_sync(self):
        # Two backward passes a step, both all-reduced: the second bucket holds the first's
        # average plus the new gradient, which the velocities would count again. Momentum
        # correction ends at the first such step, that step is still momentum SGD's (weight decay
        # included), and the optimizer applies its own momentum from then on: the job ends where
        # DDP's own averaging takes it.
        accumulation = ("--accumulate=2", "--without-no-sync", "--weight-decay=0.05")
        reference, _, _ = self.run_plain("--own-hook", *accumulation, codec="none")
        results, statuses, output = self.run_plain(
            *accumulation, run_options=["--momentum-correction"], codec="none")
        self.assertEqual([status["allreduces"] for status in statuses], [2 * self.STEPS] * 2)
        self.assertEqual(output.count("gradgate: momentum correction ends for ddp: a bucket was "
                                      "sent twice without a step of its optimizer"), 1, output)
        self.assertNotIn(", momentum correction", output)
        self.assertEqual(results[0]["momentum_buffers"], 4)
        self.assert_same_parameters(results, reference)

    def test_momentum_correction_stays_off_where_it_would_not_be_momentum_sgd(self):
        for script_option, why in (
            ("--dampening=0.5", "its optimizer has dampening"),
            ("--clip-norm=1.0", "the script clips its gradients (clip_grad_norm_), which would "
             "then clip the averaged velocities"),
        ):
            results, statuses, output = self.run_plain(script_option,
                                                       run_options=["--momentum-correction"])
            self.assertIn(f"gradgate: momentum correction stays off for ddp: {why}", output)
            self.assertEqual(output.count("momentum correction stays off"), 1, output)
            self.assertNotIn(", momentum correction", output)
            self.assertEqual(results[0]["momentum_buffers"], 4)
            self.assertEqual(results[0]["digest"], results[1]["digest"])
            losses = results[0]["losses"]
            self.assertLess(sum(losses[-5:]), 0.8 * sum(losses[:5]), "the loss did not fall")

    def test_a_step_with_an_infinite_gradient_is_skipped_on_every_rank(self):
        # Rank 0's loss is infinite at step 7: both ranks see NaN gradients there and skip the
        # optimizer step, as mixed-precision loss scaling does, and train on; momentum correction
        # goes on after the step its optimizer skipped.
        for options in ((), ("--momentum-correction",)):
            results, statuses, output = self.run_plain("--inf-step=7", run_options=options)
            for result in results:
                self.assertEqual(result["skipped"], [7])
            self.assertRegex(output,
                             r"all-reduces \(fp16 \d+\), .*x less\), [1-9]\d* all-reduces "
                             "skipped for NaN")
            self.assertEqual(results[0]["digest"], results[1]["digest"])
            self.assertEqual(", momentum correction 0.9\n" in output, bool(options), output)
        losses = results[0]["losses"]
        self.assertLess(sum(losses[-5:]), 0.8 * sum(losses[:5]), "the loss did not fall")
        for status in statuses:
            self.assertGreaterEqual(status["allreduce_errors"], 1)
            self.assertGreaterEqual(status["allreduces"], self.STEPS - 1)

    def test_a_bucket_that_fails_fails_backward_with_its_reason(self):
        # With --nonfinite raise the step with an infinite gradient fails: backward() raises the
        # hook's RuntimeError (an error DDP's C++ side sees, not a value it cannot cast).
        with self.assertRaises(AssertionError) as failed:
            self.run_plain("--inf-step=7", run_options=("--nonfinite", "raise"))
        self.assertRegex(
            str(failed.exception),
            r"RuntimeError: gradgate: all-reduce of bucket \d+ \(\d+ x torch\.float32\) skipped: "
            r"nonfinite_gradient",
        )

    def test_models_share_one_connection_and_a_late_hook_is_refused(self):
        workdir = self.make_workdir()
        cluster = self.start_cluster(workdir, nodes=1, local_workers=1, codec="none")
        output = self.run_single_rank(workdir, f"""
from torch.nn.parallel import DistributedDataParallel
import gradgate.autohook
before = DistributedDataParallel(torch.nn.Linear(4, 4))
gradgate.autohook.install("{cluster.sockets[0]}", 0)
first, second = (DistributedDataParallel(torch.nn.Linear(4, 4)) for _ in range(2))
for model in (first, second, before):
    model(torch.ones(2, 4)).sum().backward()
state_of = gradgate.autohook.state_of
print("prefixes", state_of(first).name_prefix, state_of(second).name_prefix, state_of(before))
# A served model copies and pickles as a plain DDP model does (e.g. for an EMA copy).
import copy, io
copy.deepcopy(first)
torch.save(first, io.BytesIO())
print("copied and saved")
try:
    first.register_comm_hook(None, lambda state, bucket: None)
except RuntimeError as error:
    print("refused:", error)
""")
        # Both models made after install() went through the one worker connection; the model
        # made before it kept DDP's own all-reduce.
        self.assertIn("prefixes ddp ddp1 None", output)
        self.assertIn("copied and saved", output)
        self.assertIn("refused: gradgate already sends this DDP model's gradients", output)
        self.assertEqual(gateway_status(workdir, 0)["allreduces"], 2)

    def test_a_process_group_that_is_not_the_gateways_job_is_refused(self):
        # One process in its group, two workers in the gateways' job: the gateways would sum
        # over ranks that are not in the group.
        workdir = self.make_workdir()
        cluster = self.start_cluster(workdir, nodes=1, local_workers=2, codec="none")
        output = self.run_single_rank(workdir, f"""
import gradgate.torch
try:
    gradgate.torch.HookState("{cluster.sockets[0]}", 0)
except ValueError as error:
    print("refused:", error)
""")
        self.assertIn("refused: gradgate: the process group has 1 ranks but the gateways' job has "
                      "2 workers", output)

    def test_a_hook_state_without_a_local_rank_finds_it_in_its_process_group(self):
        workdir = self.make_workdir()
        cluster = self.start_cluster(workdir, nodes=1, local_workers=1, codec="none")
        make_state = ("import gradgate.torch\n"
                      f"state = gradgate.torch.HookState('{cluster.sockets[0]}')\n")
        output = self.run_single_rank(workdir, make_state + "print(state.client.local_rank)\n")
        self.assertEqual(output.strip(), "0")
        alone = subprocess.run(
            [sys.executable, "-c", make_state], capture_output=True, text=True, timeout=60,
            env=dict(os.environ, PYTHONPATH=str(REPO / "client" / "python")),
        )
        self.assertNotEqual(alone.returncode, 0)
        self.assertIn("there is no torch.distributed process group to find it from", alone.stderr)

    def run_module(self, *arguments, script="", environment=None):
        """`python -m gradgate.run ARGUMENTS script.py` with `script` as script.py; its result."""
        workdir = self.make_workdir()
        path = workdir / "script.py"
        path.write_text(script)
        base = {k: v for k, v in os.environ.items() if k != "LOCAL_RANK"}
        return subprocess.run(
            [sys.executable, "-m", "gradgate.run", *arguments, str(path)], capture_output=True,
            text=True, timeout=60, cwd=workdir,
            env=dict(base, PYTHONPATH=str(REPO / "client" / "python"), **(environment or {})),
        )

    def test_the_data_volume_comes_from_the_command_line_or_the_environment(self):
        show = "from gradgate import autohook\nprint(autohook._options['data_volume'])\n"
        self.assertEqual(self.run_module("--local-rank", "0", "--data-volume", "600",
                                         script=show).stdout.strip(), "600.0")
        self.assertEqual(self.run_module("--local-rank", "0", script=show,
                                         environment={"GRADGATE_DATA_VOLUME": "250"})
                         .stdout.strip(), "250.0")
        refused = self.run_module("--local-rank", "0", "--data-volume", "-1", script=show)
        self.assertEqual(refused.returncode, 2)
        self.assertIn("'-1' is not a number >= 0", refused.stderr)

    def test_momentum_correction_comes_from_the_command_line(self):
        show = "from gradgate import autohook\nprint(autohook._options['momentum'])\n"
        self.assertEqual(self.run_module("--local-rank", "0", "--momentum", "0.9",
                                         script=show).stdout.strip(), "0.9")
        self.assertEqual(self.run_module("--local-rank", "0", script=show).stdout.strip(), "0.0")
        refused = self.run_module("--local-rank", "0", "--momentum", "1", script=show)
        self.assertEqual(refused.returncode, 2)
        self.assertIn("'1' is not a number >= 0 and below 1", refused.stderr)
        show = "from gradgate import autohook\nprint(autohook._options['take_momentum'])\n"
        self.assertEqual(self.run_module("--local-rank", "0", "--momentum-correction",
                                         script=show).stdout.strip(), "True")
        both = self.run_module("--local-rank", "0", "--momentum-correction", "--momentum", "0.9",
                               script=show)
        self.assertEqual(both.returncode, 2)
        self.assertIn("not allowed with argument --momentum-correction", both.stderr)

    def test_a_script_whose_models_never_get_the_hook_is_told_at_exit(self):
        done = self.run_module("--local-rank", "0", script="print('no DDP model here')\n")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("gradgate: no DistributedDataParallel model of this process (0 made) was "
                      "given gradgate's comm hook", done.stderr)
        other_rank = self.run_module("--local-rank", "1", script="pass\n")
        self.assertNotIn("no DistributedDataParallel model", other_rank.stderr)
        # Without a local rank, rank 0 of the default group tells, here the first of two workers
        # that torch.multiprocessing.spawn starts; a process without a group stays quiet.
        workdir = self.make_workdir()
        spawned = self.run_module(script=(
            "import torch.distributed as dist, torch.multiprocessing as mp\n"
            "def worker(index):\n"
            f"    dist.init_process_group('gloo', init_method='file://{workdir / 'rendezvous'}', "
            "rank=index, world_size=2)\n"
            "    dist.barrier()\n"
            "if __name__ == '__main__':\n"
            "    mp.spawn(worker, nprocs=2)\n"
        ))
        self.assertEqual(spawned.returncode, 0, spawned.stderr)
        self.assertEqual(spawned.stderr.count("no DistributedDataParallel model"), 1,
                         spawned.stderr)
        alone = self.run_module(script="pass\n")
        self.assertNotIn("no DistributedDataParallel model", alone.stderr)

    def test_a_process_takes_its_index_among_the_ranks_of_its_group_on_its_gateway(self):
        # Five ranks, three gateways: node_a's socket (one rank reaches it through a symbolic
        # link to its directory, as a pod that mounts it elsewhere would), node_b's, and another
        # socket in node_a's directory.
        workdir = self.make_workdir()
        for name in ("node_a", "node_b"):
            (workdir / name).mkdir()
        (workdir / "alias").symlink_to(workdir / "node_a")
        sockets = ["node_b/gg.sock", "node_a/gg.sock", "alias/gg.sock", "node_b/gg.sock",
                   "node_a/other.sock"]
        script = f"""
import multiprocessing, sys
import torch.distributed as dist
from gradgate.group_local_rank import local_rank_in_group

def rank(index, socket, result):
    dist.init_process_group("gloo", init_method="file://{workdir / 'rendezvous'}",
                            rank=index, world_size={len(sockets)})
    result.put((index, local_rank_in_group("{workdir}/" + socket)))

result = multiprocessing.Queue()
ranks = [multiprocessing.Process(target=rank, args=(i, s, result))
         for i, s in enumerate({sockets!r})]
for process in ranks:
    process.start()
print(sorted(result.get(timeout=60) for _ in ranks))
"""
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
            env=dict(os.environ, PYTHONPATH=str(REPO / "client" / "python")),
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip(), "[(0, 0), (1, 0), (2, 1), (3, 1), (4, 0)]")

    def test_a_local_rank_that_is_not_a_number_is_refused(self):
        bad = self.run_module(script="pass\n", environment={"LOCAL_RANK": "first"})
        self.assertEqual(bad.returncode, 2)
        self.assertIn("LOCAL_RANK='first' is not a number", bad.stderr)

    def test_a_local_rank_given_later_ends_the_hand_down_to_started_processes(self):
        handed_down = self.run_module(script=(
            "import multiprocessing\nfrom gradgate import autohook\n"
            "def installed(queue):\n"
            "    queue.put(autohook._options is not None)\n"
            "def start(method):\n"
            "    context = multiprocessing.get_context(method)\n"
            "    queue = context.Queue()\n"
            "    context.Process(target=installed, args=(queue,)).start()\n"
            "    return queue.get(timeout=60)\n"
            "if __name__ == '__main__':\n"
            "    print(start('spawn'), start('forkserver'), start('fork'))\n"
            "    autohook.install(local_rank=0)\n"
            "    print(start('spawn'))\n"
        ))
        self.assertEqual(handed_down.stdout.split(), ["True", "True", "True", "False"],
                         handed_down.stderr)


if __name__ == "__main__":
    unittest.main()
