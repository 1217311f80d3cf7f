#!/usr/bin/python3
"""Tests of the gradgate Python package against real gateways on loopback.

HookTrainingTest: 2 gateways x 2 DDP workers (local_workers=2) train 100 steps through
gradgate.torch.allreduce_hook, once per codec; every rank must end with bit-identical parameters
and a lower loss, through DDP's bucket rebuild after step 1, an fp16 bucket and uneven last
batches (see hook_worker.py). ClientTest: the Client API and its errors with two gateways of one
worker each. HookStateTest: the hook's Futures on CPU buckets (they end after the hook returned,
several buckets in flight, timeouts, a gateway that dies, non-finite steps). CudaDeviceTest:
tensors in GPU memory (Client.declare_cuda, the hook's device path, DDP training on GPU 0 with its
buckets summed in place), skipped when torch.cuda is not available. PackageTest: the parts that
need no gateway.

The gateway binary and libgradgate come from GRADGATE_BINARY and GRADGATE_LIBRARY (defaults: the
source tree's build/cli/gradgate and build/client/libgradgate.so); when either is missing the
tests FAIL, they are not skipped. Run: /usr/bin/python3 tests/python/test_hook.py
"""

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "client" / "python"))
os.environ.setdefault("GRADGATE_LIBRARY", str(REPO / "build" / "client" / "libgradgate.so"))
GATEWAY_BINARY = Path(os.environ.get("GRADGATE_BINARY", REPO / "build" / "cli" / "gradgate"))
WORKER_SCRIPT = Path(__file__).resolve().parent / "hook_worker.py"
PLAIN_SCRIPT = Path(__file__).resolve().parent / "plain_ddp.py"

import gradgate  # noqa: E402
from gradgate import _native, errors  # noqa: E402
from gradgate.cluster import LocalCluster  # noqa: E402

NODES = 2
LOCAL_WORKERS = 2
STEPS = 100
WORKER_DEADLINE_S = 240
POLL_S = 0.1


def cuda_available():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def require_artifacts(test):
    """Fails (never skips) when the gateway binary or the library is missing."""
    library = Path(os.environ["GRADGATE_LIBRARY"])
    test.assertTrue(
        library.is_file(), f"libgradgate not found at {library} (set GRADGATE_LIBRARY)"
    )
    test.assertTrue(
        GATEWAY_BINARY.is_file() and os.access(GATEWAY_BINARY, os.X_OK),
        f"gateway binary not found at {GATEWAY_BINARY} (set GRADGATE_BINARY)",
    )


class TempDirTest(unittest.TestCase):
    def make_workdir(self):
        # Short paths: a Unix socket path must fit in 108 bytes.
        workdir = Path(tempfile.mkdtemp(prefix="gg-py-"))
        self.addCleanup(shutil.rmtree, workdir, True)
        return workdir

    def start_cluster(self, workdir, **options):
        cluster = LocalCluster(GATEWAY_BINARY, workdir=workdir, log_level="warn", **options)
        self.addCleanup(cluster.stop)
        return cluster.start()


def run_workers(cluster, workdir, options=()):
    """Runs one hook_worker.py per worker of the cluster (`options` added to each command line);
    returns their results by rank."""
    world = NODES * LOCAL_WORKERS
    commands = []
    for rank in range(world):
        node, local_rank = divmod(rank, LOCAL_WORKERS)
        commands.append(
            [
                sys.executable,
                str(WORKER_SCRIPT),
                f"--rank={rank}",
                f"--world-size={world}",
                f"--local-rank={local_rank}",
                f"--socket={cluster.sockets[node]}",
                f"--rendezvous={workdir}",
                f"--steps={STEPS}",
                f"--result={workdir / f'result{rank}.json'}",
                *options,
            ]
        )
    run_processes(cluster, workdir, commands)
    return [json.loads((workdir / f"result{r}.json").read_text()) for r in range(world)]


def run_processes(cluster, workdir, commands, environments=None, when_started=None):
    """Runs the commands at once (output in workdir/worker<i>.err) until each exits 0; fails on
    the first that does not, on a gateway that exits, or after WORKER_DEADLINE_S.
    `when_started(processes)` is called once they are all started."""
    processes = []
    try:
        for rank, command in enumerate(commands):
            stderr = open(workdir / f"worker{rank}.err", "wb")
            processes.append(
                subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=stderr,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env=environments[rank] if environments else None,
                )
            )
            stderr.close()
        if when_started is not None:
            when_started(processes)
        deadline = time.monotonic() + WORKER_DEADLINE_S
        while any(p.poll() is None for p in processes):
            failed = [r for r, p in enumerate(processes) if p.poll() not in (None, 0)]
            if failed:
                raise AssertionError(worker_failure(workdir, failed[0], processes[failed[0]]))
            cluster.check_alive()
            if time.monotonic() > deadline:
                raise AssertionError(f"workers still running after {WORKER_DEADLINE_S} s")
            time.sleep(POLL_S)
        for rank, process in enumerate(processes):
            if process.returncode != 0:
                raise AssertionError(worker_failure(workdir, rank, process))
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, 9)
                process.wait(timeout=30)


def wait_for_output(workdir, processes, text):
    """Waits (up to WORKER_DEADLINE_S) until every process wrote `text` to its output, or one
    exited (run_processes then reports it)."""
    deadline = time.monotonic() + WORKER_DEADLINE_S
    for rank, process in enumerate(processes):
        output = workdir / f"worker{rank}.err"
        while text not in output.read_text(errors="replace") and process.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"worker {rank} did not write {text!r} in time")
            time.sleep(POLL_S)


def worker_failure(workdir, rank, process):
    output = (workdir / f"worker{rank}.err").read_bytes()[-3000:].decode(errors="replace")
    return f"worker {rank} exited with status {process.returncode}; its output ends with:\n{output}"


def check_ranks_trained(test, results, label):
    """Every rank of hook_worker.py ran STEPS steps through the hook, its loss fell, and all ended
    with bit-identical parameters."""
    digests = {r["digest"] for r in results}
    test.assertEqual(len(digests), 1, f"{label}: ranks ended with different parameters")
    for r in results:
        test.assertEqual(r["world_size"], NODES * LOCAL_WORKERS)
        test.assertEqual(len(r["losses"]), STEPS)
        test.assertEqual(r["hook_steps"], STEPS)
        first, last = r["losses"][:10], r["losses"][-10:]
        test.assertLess(sum(last), 0.8 * sum(first), f"{label}: rank {r['rank']} loss did not fall")


class HookTrainingTest(TempDirTest):
    # Each codec with the most wire bytes it may send per raw byte (of the node's fp32 sum).
    CODECS = {
        "fp16": 0.55,
        "none": 1.05,
        "topk:density=0.01": 0.1,
        "qsgd:bits=8,workers=64": 0.55,
    }

    def setUp(self):
        require_artifacts(self)

    def test_ranks_agree_and_loss_falls(self):
        for codec, max_wire_fraction in self.CODECS.items():
            with self.subTest(codec=codec):
                self.check_training(codec, max_wire_fraction)

    def check_training(self, codec, max_wire_fraction):
        workdir = self.make_workdir()
        cluster = self.start_cluster(
            workdir, nodes=NODES, local_workers=LOCAL_WORKERS, codec=codec
        )
        results = run_workers(cluster, workdir)
        cluster.stop()

        check_ranks_trained(self, results, codec)
        for r in results:
            self.assertGreater(r["wire_bytes"], 0)
            self.assertLess(r["wire_bytes"], max_wire_fraction * r["raw_bytes"], codec)

        rank0 = results[0]
        # Uneven batches happened: a short last batch in some epoch.
        self.assertLess(min(rank0["batch_sizes"]), max(rank0["batch_sizes"]))
        # DDP rebuilt its buckets after step 1 and the hook followed the new layout.
        first_layout, later_layout = rank0["layouts"]["0"], rank0["layouts"]["1"]
        self.assertNotEqual(sorted(first_layout), sorted(later_layout))
        self.assertEqual(rank0["layouts"]["1"], rank0["layouts"][str(STEPS - 1)])
        self.assertGreaterEqual(len(later_layout), 3, "expected several buckets")
        layouts_seen = {tuple(bucket) for bucket in first_layout + later_layout}
        self.assertEqual(len(rank0["declared"]), len(layouts_seen))
        # An fp16 bucket went through the hook.
        self.assertIn("torch.float16", {dtype for _, _, dtype in later_layout})
        self.assertTrue(any(name.endswith(".fp16") for name in rank0["declared"]))


class ClientTest(TempDirTest):
    """The Client API with two gateways of one worker each, one client per gateway."""

    ELEMENTS = 4096

    def setUp(self):
        require_artifacts(self)
        workdir = self.make_workdir()
        self.cluster = self.start_cluster(workdir, nodes=2, local_workers=1, codec="none")
        self.clients = [gradgate.Client(socket, 0) for socket in self.cluster.sockets]
        for client in self.clients:
            self.addCleanup(client.close)

    def test_job_info(self):
        for rank, client in enumerate(self.clients):
            self.assertEqual(
                client.job, gradgate.JobInfo(rank, 2, 1, 2, self.cluster.collective_timeout_ms)
            )

    def test_allreduce_sums_over_workers(self):
        tensors = [c.declare("client.sum", self.ELEMENTS, "fp32") for c in self.clients]
        for rank, tensor in enumerate(tensors):
            values = (ctypes.c_float * self.ELEMENTS).from_buffer(tensor.buffer)
            for i in range(self.ELEMENTS):
                values[i] = rank + 1 + i
        infos = self.allreduce_all(tensors)
        for tensor, info in zip(tensors, infos):
            values = (ctypes.c_float * self.ELEMENTS).from_buffer(tensor.buffer)
            self.assertEqual(list(values[:3]), [3.0, 5.0, 7.0])
            self.assertEqual(values[self.ELEMENTS - 1], 3.0 + 2 * (self.ELEMENTS - 1))
            self.assertEqual(info.step, 0)
            self.assertGreater(info.raw_bytes, 0)

    def test_half_precision_tensor_has_half_sized_buffer(self):
        tensors = [c.declare("client.half", self.ELEMENTS, "fp16") for c in self.clients]
        self.assertGreaterEqual(tensors[0].nbytes, 2 * self.ELEMENTS)
        self.allreduce_all(tensors)

    def test_connect_to_missing_socket_fails_clearly(self):
        missing = str(Path(self.cluster.workdir) / "absent.sock")
        with self.assertRaises(gradgate.ConnectFailedError) as caught:
            gradgate.Client(missing, 0)
        self.assertEqual(caught.exception.status, "connect_failed")
        self.assertTrue(caught.exception.message)

    def test_connect_waits_up_to_its_timeout_and_says_so(self):
        missing = str(Path(self.cluster.workdir) / "absent.sock")
        started = time.monotonic()
        with self.assertLogs("gradgate", "WARNING") as logged:
            with self.assertRaisesRegex(
                gradgate.WaitTimeoutError, "absent.sock.*attempts over.*No such file"
            ):
                gradgate.Client(missing, 0, connect_timeout_ms=1500)
        self.assertGreaterEqual(time.monotonic() - started, 1.5)
        self.assertRegex(logged.output[0], "absent.sock.*trying again for up to 1500 ms")

    def test_a_failure_that_waiting_cannot_cure_fails_at_once_and_quietly(self):
        # A socket path below a plain file (ENOTDIR): no gateway can ever listen there.
        plain_file = Path(self.cluster.workdir) / "plain-file"
        plain_file.write_text("")
        started = time.monotonic()
        with self.assertNoLogs("gradgate", "WARNING"):
            with self.assertRaisesRegex(gradgate.ConnectFailedError, "Not a directory"):
                gradgate.Client(str(plain_file / "gg.sock"), 0, connect_timeout_ms=20000)
        self.assertLess(time.monotonic() - started, 10)

    def test_a_gateway_that_closes_before_answering_is_waited_for(self):
        # A listener that hangs up on every connection before the HELLO's answer, as a gateway
        # that is stopping does: worth waiting for, as gg_connect_wait has it.
        path = str(Path(self.cluster.workdir) / "closing.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(path)
        listener.listen(8)
        listener.settimeout(0.1)
        hung_up = []
        stop = threading.Event()

        def hang_up():
            deadline = time.monotonic() + 30
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    connection, _ = listener.accept()
                except socket.timeout:
                    continue
                connection.close()
                hung_up.append(1)

        thread = threading.Thread(target=hang_up, daemon=True)
        thread.start()
        self.addCleanup(listener.close)
        self.addCleanup(thread.join, 30)
        self.addCleanup(stop.set)
        with self.assertLogs("gradgate", "WARNING"):
            with self.assertRaisesRegex(gradgate.WaitTimeoutError, "closing.sock.*attempts over"):
                gradgate.Client(path, 0, connect_timeout_ms=1500)
        self.assertGreaterEqual(len(hung_up), 3)

    def test_ctrl_c_ends_a_connect_wait(self):
        missing = str(Path(self.cluster.workdir) / "absent.sock")
        worker = subprocess.Popen(
            [sys.executable, "-c", "import logging, sys, gradgate\n"
             "logging.basicConfig()\n"
             "gradgate.Client(sys.argv[1], 0, connect_timeout_ms=60000)\n", missing],
            stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONPATH=str(REPO / "client" / "python")),
        )
        self.addCleanup(worker.kill)
        # Waiting, as its warning says (the worker's own timeout bounds this read).
        self.assertIn("trying again for up to 60000 ms", worker.stderr.readline())
        interrupted = time.monotonic()
        worker.send_signal(signal.SIGINT)
        _, stderr = worker.communicate(timeout=30)
        self.assertLess(time.monotonic() - interrupted, 10)
        self.assertIn("KeyboardInterrupt", stderr)
        self.assertNotEqual(worker.returncode, 0)

    def test_a_rank_held_by_another_process_is_in_use(self):
        worker = subprocess.run(
            [sys.executable, "-c", "import sys, gradgate\n"
             "try:\n    gradgate.Client(sys.argv[1], 0)\n"
             "except gradgate.RankInUseError as error:\n"
             "    print(isinstance(error, gradgate.RejectedError), error)\n",
             self.cluster.sockets[0]],
            capture_output=True, text=True, timeout=60,
            env=dict(os.environ, PYTHONPATH=str(REPO / "client" / "python")),
        )
        self.assertIn("True rank_in_use: ", worker.stdout, worker.stderr)
        self.assertIn("local rank 0 is already connected", worker.stdout)

    def test_a_rank_this_process_holds_is_refused_without_waiting(self):
        started = time.monotonic()
        with self.assertRaisesRegex(gradgate.RankInUseError, "share that Client"):
            gradgate.Client(self.cluster.sockets[0], 0, connect_timeout_ms=20000)
        self.assertLess(time.monotonic() - started, 10)
        # Once this process's client is closed, the rank can be taken again.
        self.clients[0].close()
        gradgate.Client(self.cluster.sockets[0], 0, connect_timeout_ms=20000).close()

    def test_bad_declarations_raise_invalid_argument(self):
        with self.assertRaises(gradgate.InvalidArgumentError):
            self.clients[0].declare("client.zero", 0, "fp32")
        with self.assertRaises(gradgate.InvalidArgumentError):
            self.clients[0].declare("client.f64", 16, "float64")

    def test_closed_client_refuses_use(self):
        tensor = self.clients[0].declare("client.closed", 16, "fp32")
        self.clients[0].close()
        with self.assertRaises(gradgate.ClosedError):
            tensor.allreduce()
        with self.assertRaises(gradgate.ClosedError):
            self.clients[0].declare("client.after", 16, "fp32")

    def allreduce_all(self, tensors):
        """Starts every tensor's all-reduce, then waits for each with a deadline."""
        requests = [t.allreduce() for t in tensors]
        infos = [None] * len(requests)

        def wait(i):
            infos[i] = requests[i].wait(timeout_ms=30000)

        threads = [threading.Thread(target=wait, args=(i,)) for i in range(len(requests))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        self.assertTrue(all(info is not None for info in infos), "an all-reduce did not finish")
        return infos


class AutoHookTest(TempDirTest):
    """An ordinary DDP script (plain_ddp.py), unchanged, run by `python -m gradgate.run` on two
    gateways of one worker each: its gradients go through the gateways, unless it registers a
    comm hook of its own; started before its gateways, it waits for them; under torchrun it
    survives a gateway that crashes and comes back."""

    STEPS = 40

    def setUp(self):
        require_artifacts(self)

    def run_plain(self, *script_args, run_options=(), gateways_first=True, spawn=0, processes=0,
                  start_method="fork"):
        """Every rank's results, each gateway's all-reduce count, and node 0's output
        (`run_options` go to gradgate.run). With gateways_first False the gateways start once
        both scripts wait for them. With `spawn` N, each node's script starts its N workers with
        torch.multiprocessing.spawn and has no local rank of its own; with `processes` N, with
        multiprocessing.Process by `start_method`, the two nodes' ranks interleaved."""
        workdir = self.make_workdir()
        local_workers = spawn or processes or 1
        world = 2 * local_workers
        cluster = LocalCluster(GATEWAY_BINARY, workdir=workdir, log_level="warn", nodes=2,
                               local_workers=local_workers, codec="fp16")
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
        self.check_trained_by_two_workers_a_node(*self.run_plain(spawn=2))

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
        self.assertIn(f"{steps} all-reduces, 113.7 MB of gradients, none sent to other gateways",
                      output)
        self.assertGreaterEqual(gateway_status(workdir, 0)["allreduces"], steps)

    def test_a_script_with_its_own_hook_keeps_it(self):
        results, statuses, output = self.run_plain("--own-hook")
        self.assertEqual(results[0]["digest"], results[1]["digest"])
        self.assertEqual([status["allreduces"] for status in statuses], [0, 0])
        self.assertIn("registers its own comm hook", output)
        self.assertIn("no DistributedDataParallel model of this process (1 made) was given", output)

    def test_a_step_with_an_infinite_gradient_is_skipped_on_every_rank(self):
        # Rank 0's loss is infinite at step 7: both ranks see NaN gradients there and skip the
        # optimizer step, as mixed-precision loss scaling does, and train on.
        results, statuses, output = self.run_plain("--inf-step=7")
        for result in results:
            self.assertEqual(result["skipped"], [7])
        self.assertRegex(output, r"all-reduces, .*x less\), [1-9]\d* all-reduces skipped for NaN")
        self.assertEqual(results[0]["digest"], results[1]["digest"])
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

    def test_a_script_whose_models_never_get_the_hook_is_told_at_exit(self):
        done = self.run_module("--local-rank", "0", script="print('no DDP model here')\n")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("gradgate: no DistributedDataParallel model of this process (0 made) was "
                      "given gradgate's comm hook", done.stderr)
        other_rank = self.run_module("--local-rank", "1", script="pass\n")
        self.assertNotIn("no DistributedDataParallel model", other_rank.stderr)

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


def wait_for(future, seconds=60):
    """The value of a hook's Future (its error raised), failing if it has not ended in `seconds`."""
    ended = threading.Event()
    future.add_done_callback(lambda _: ended.set())
    if not ended.wait(seconds):
        raise AssertionError(f"a Future did not end within {seconds} s")
    return future.wait()


def average_on_every_rank(states, index, grads):
    """Starts bucket `index` on every state (grads[i] being state i's bucket), as the ranks of a job
    would, then waits for every Future."""
    futures = [state.start_average(index, g) for state, g in zip(states, grads)]
    for future in futures:
        wait_for(future)


def gateway_status(workdir, rank):
    """GET /v1/status of gateway `rank` of a LocalCluster in `workdir`."""
    ready = json.loads((workdir / f"gateway{rank}.ready.json").read_text())
    url = f"http://127.0.0.1:{ready['admin_port']}/v1/status"
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


class HookStateTest(TempDirTest):
    """The hook's state on CPU buckets: two gateways of one worker each, both in this process."""

    ELEMENTS = 4096

    def setUp(self):
        require_artifacts(self)
        workdir = self.make_workdir()
        self.cluster = self.start_cluster(workdir, nodes=2, local_workers=1, codec="none")
        import gradgate.torch as gradgate_torch

        self.states = [gradgate_torch.HookState(s, 0, run_id=7) for s in self.cluster.sockets]
        for state in self.states:
            self.addCleanup(state.close)

    def test_bucket_layouts_of_an_earlier_step_are_released(self):
        import torch

        def step(*sizes):
            # The ranks' buckets of one step, as DDP hands them over (the last one last).
            for index, size in enumerate(sizes):
                grads = [torch.ones(size) for _ in self.states]
                futures = [state.start_average(index, g, last=index == len(sizes) - 1)
                           for state, g in zip(self.states, grads)]
                for future in futures:
                    wait_for(future)
                self.assertEqual([g[0].item() for g in grads], [1.0, 1.0])
            return gateway_status(Path(self.cluster.workdir), 0)["tensors"]

        # DDP's first buckets, then the rebuilt ones: bucket 0 changes size, bucket 1 goes. The
        # old bucket 0 goes before the new one is declared; bucket 1 once two steps did without.
        self.assertEqual(step(1000, 500), 2)
        self.assertEqual(step(1400), 2)
        self.assertEqual(step(1400), 1)
        self.assertEqual(step(1400), 1)
        for state in self.states:
            self.assertEqual(list(state._buffers), [(0, 1400, torch.float32)])

    def test_the_hook_returns_before_the_gateways_are_done(self):
        import torch

        grads = [torch.full((self.ELEMENTS,), float(rank + 1)) for rank in range(2)]
        first = self.states[0].start_average(0, grads[0])
        # Rank 1 has not started bucket 0, so no gateway can have summed it: a hook that waited
        # for the gateways would not have returned.
        self.assertFalse(first.done())
        second = self.states[1].start_average(0, grads[1])
        for future, g in zip((first, second), grads):
            self.assertEqual(wait_for(future).data_ptr(), g.data_ptr())
            self.assertEqual(g.tolist(), [1.5] * self.ELEMENTS)
        for state in self.states:
            self.assertEqual(state.allreduces, 1)

    def test_buckets_in_flight_together_end_whatever_order_the_ranks_start_them_in(self):
        import torch

        buckets = range(3)
        grads = [[torch.full((self.ELEMENTS,), float(10 * b + rank)) for b in buckets]
                 for rank in range(2)]
        first = [self.states[0].start_average(b, grads[0][b]) for b in buckets]
        self.assertFalse(any(future.done() for future in first))
        second = [self.states[1].start_average(b, grads[1][b]) for b in reversed(buckets)]
        for future in first + second:
            wait_for(future)
        for rank in range(2):
            for b in buckets:
                self.assertEqual(grads[rank][b].tolist(), [10 * b + 0.5] * self.ELEMENTS)
        for state in self.states:
            self.assertEqual(state.allreduces, 3)

    def test_an_all_reduce_past_its_timeout_fails_its_future_naming_the_bucket(self):
        import torch

        state = self.states[0]
        state.timeout_ms = 200
        grads = torch.ones(self.ELEMENTS)
        future = state.start_average(4, grads)  # rank 1 never starts it
        failed = r"bucket 4 \(4096 x torch.float32\) failed: timeout"
        with self.assertRaisesRegex(RuntimeError, failed):
            wait_for(future)
        self.assertEqual(state.allreduces, 0)

    def test_by_default_a_bucket_outlasts_the_gateways_limits_and_fails_with_their_reason(self):
        import gradgate.torch as gradgate_torch
        import torch

        for state in self.states:
            self.assertEqual(state.timeout_ms, 2 * self.cluster.collective_timeout_ms + 10000)
        cluster = self.start_cluster(
            self.make_workdir(), nodes=2, local_workers=1, codec="none", collective_timeout_ms=1500
        )
        state = gradgate_torch.HookState(cluster.sockets[0], 0, run_id=8)
        self.addCleanup(state.close)
        self.assertEqual(state.timeout_ms, 2 * 1500 + 10000)
        future = state.start_average(0, torch.ones(self.ELEMENTS))  # node 1 never starts it
        # The gateway's own reason: it waited for node 1 within its collective timeout.
        reason = r"failed: peer_failed: .* timed out waiting for the ring_reduce .* from gateway 1"
        with self.assertRaisesRegex(RuntimeError, reason):
            wait_for(future)

    def test_a_bucket_whose_timed_out_all_reduce_still_runs_refuses_to_start_again(self):
        import torch

        state = self.states[0]
        state.timeout_ms = 200
        future = state.start_average(4, torch.ones(self.ELEMENTS))  # rank 1 never starts it
        with self.assertRaisesRegex(RuntimeError, "failed: timeout"):
            wait_for(future)
        with self.assertRaisesRegex(RuntimeError, r"bucket 4 .* still runs in the gateway"):
            state.start_average(4, torch.full((self.ELEMENTS,), 9.0))
        # The buffer the gateway still reads holds the first step's share, untouched.
        _, view = state.shared_view(4, self.ELEMENTS, torch.float32)
        self.assertEqual(view.tolist(), [0.5] * self.ELEMENTS)

    def test_a_step_whose_bucket_failed_writes_none_of_its_buckets_back(self):
        import torch

        state = self.states[0]
        state.timeout_ms = 300
        mine = [torch.full((self.ELEMENTS,), 1.0), torch.full((self.ELEMENTS,), 2.0)]
        first = state.start_average(0, mine[0], last=False)
        state.timeout_ms = 60000
        second = state.start_average(1, mine[1])
        # Rank 1 never starts bucket 0 (it times out on rank 0), but sums bucket 1 with rank 0.
        other = self.states[1].start_average(1, torch.full((self.ELEMENTS,), 4.0))
        self.assertEqual(wait_for(other).tolist(), [3.0] * self.ELEMENTS)
        with self.assertRaisesRegex(RuntimeError, r"bucket 0 .* failed: timeout"):
            wait_for(first)
        with self.assertRaisesRegex(
            RuntimeError, r"bucket 1 .* dropped: bucket 0 .* of the same step failed"
        ):
            wait_for(second)
        self.assertEqual(mine[1].tolist(), [2.0] * self.ELEMENTS)
        # The next step is written back.
        average_on_every_rank(self.states, 1, mine[1:] + [torch.full((self.ELEMENTS,), 4.0)])
        self.assertEqual(mine[1].tolist(), [3.0] * self.ELEMENTS)

    def test_a_step_that_a_bucket_could_not_start_is_over(self):
        import torch

        state = self.states[0]
        state.timeout_ms = 200
        lost = state.start_average(0, torch.ones(self.ELEMENTS), last=False)  # rank 1 never
        # DDP's backward raises here: the hooks of the step's later buckets never run.
        with self.assertRaisesRegex(RuntimeError, "not supported"):
            state.start_average(5, torch.ones(self.ELEMENTS, dtype=torch.int32), last=False)
        state.timeout_ms = 60000
        grads = [torch.full((self.ELEMENTS,), float(rank + 1)) for rank in range(2)]
        average_on_every_rank(self.states, 1, grads)
        self.assertEqual(grads[0].tolist(), [1.5] * self.ELEMENTS)
        with self.assertRaisesRegex(RuntimeError, r"bucket 0 .* failed: timeout"):
            wait_for(lost)

    def test_a_closed_state_starts_nothing(self):
        import torch

        self.states[0].close()
        with self.assertRaisesRegex(RuntimeError, "HookState is closed"):
            self.states[0].start_average(0, torch.ones(self.ELEMENTS))

    def test_a_state_that_is_let_go_gives_its_rank_back(self):
        import gc

        import gradgate.torch as gradgate_torch

        for state in self.states:
            state.close()
        socket = self.cluster.sockets[0]
        state = gradgate_torch.HookState(socket, 0, run_id=9)
        del state
        gc.collect()
        # Rank 0 is free again, in this process and at the gateway: taken at once, no waiting.
        again = gradgate_torch.HookState(socket, 0, run_id=9, connect_timeout_ms=0)
        again.close()

    def test_a_state_that_is_let_go_ends_its_waiter_thread(self):
        import gc

        import torch

        import gradgate.torch as gradgate_torch

        def waiters():
            return {t for t in threading.enumerate() if t.name == "gradgate-hook-waiter"}

        before = waiters()
        states = [
            gradgate_torch.HookState(socket, 0, run_id=8, client=owner.client)
            for socket, owner in zip(self.cluster.sockets, self.states)
        ]
        average_on_every_rank(states, 0, [torch.ones(self.ELEMENTS) for _ in states])
        theirs = waiters() - before
        self.assertEqual(len(theirs), 2)
        del states
        # The waiter may still hold a finished all-reduce for an instant: collect until its
        # thread ends, a bounded number of times.
        for _ in range(100):
            gc.collect()
            for thread in theirs:
                thread.join(timeout=0.05)
            if not any(thread.is_alive() for thread in theirs):
                break
        self.assertFalse(any(thread.is_alive() for thread in theirs))

    def test_a_gateway_that_dies_fails_the_bucket_in_flight_without_waiting_for_its_timeout(self):
        import torch

        future = self.states[0].start_average(3, torch.ones(self.ELEMENTS))
        self.cluster.gateways[0].process.kill()
        failed = r"bucket 3 \(4096 x torch.float32\) failed: closed"
        with self.assertRaisesRegex(RuntimeError, failed):
            wait_for(future)

    def test_a_step_with_an_infinite_gradient_gives_nan_or_fails_as_each_rank_asks(self):
        import torch

        self.states[1].nonfinite = "raise"
        grads = [torch.ones(self.ELEMENTS) for _ in self.states]
        grads[0][5] = float("inf")
        futures = [state.start_average(2, g) for state, g in zip(self.states, grads)]
        self.assertTrue(torch.isnan(wait_for(futures[0])).all())
        with self.assertRaisesRegex(RuntimeError, r"bucket 2 .*skipped: nonfinite_gradient"):
            wait_for(futures[1])
        self.assertEqual([state.nonfinite_allreduces for state in self.states], [1, 0])
        self.assertEqual([state.allreduces for state in self.states], [0, 0])

    def test_an_fp16_bucket_whose_average_fits_stays_finite(self):
        import torch

        # The average, 40000, is an fp16 number; the sum, 80000, is beyond fp16's 65504.
        grads = [torch.full((self.ELEMENTS,), 40000.0, dtype=torch.float16) for _ in self.states]
        average_on_every_rank(self.states, 0, grads)
        for g in grads:
            self.assertTrue(torch.equal(g, torch.full_like(g, 40000.0)), g[:4])
        for state in self.states:
            self.assertEqual((state.allreduces, state.nonfinite_allreduces), (1, 0))


@unittest.skipUnless(cuda_available(), "torch.cuda is not available")
class CudaDeviceTest(TempDirTest):
    """GPU tensors all-reduced in place: two gateways of one worker each, both in this process."""

    ELEMENTS = 4096

    def setUp(self):
        require_artifacts(self)
        workdir = self.make_workdir()
        self.cluster = self.start_cluster(workdir, nodes=2, local_workers=1, codec="none")

    def test_declare_cuda_sums_in_gpu_memory(self):
        import torch

        clients = [gradgate.Client(socket, 0) for socket in self.cluster.sockets]
        for client in clients:
            self.addCleanup(client.close)
        base = torch.arange(self.ELEMENTS, device="cuda", dtype=torch.float32)
        grads = [base + rank for rank in range(len(clients))]
        events = [torch.cuda.Event(interprocess=True) for _ in clients]
        tensors = [
            client.declare_cuda("cuda.sum", g, ready_event=e)
            for client, g, e in zip(clients, grads, events)
        ]
        for tensor, event in zip(tensors, events):
            self.assertIsNone(tensor.address)
            self.assertEqual(tensor.nbytes, 4 * self.ELEMENTS)
            event.record()
        requests = [tensor.allreduce() for tensor in tensors]
        for request in requests:
            request.wait(timeout_ms=30000)
        for g in grads:
            self.assertTrue(torch.equal(g.cpu(), (2 * base + 1).cpu()))
        with self.assertRaises(gradgate.InvalidArgumentError):
            tensors[0].buffer

    def test_hook_averages_cuda_buckets_in_place(self):
        import torch

        import gradgate.torch as gradgate_torch

        states = [gradgate_torch.HookState(s, 0, run_id=7) for s in self.cluster.sockets]
        for state in states:
            self.addCleanup(state.close)
        grads = [torch.empty(self.ELEMENTS, device="cuda") for _ in states]
        for step in range(2):
            for rank, g in enumerate(grads):
                g.fill_(float(rank + 1 + step))
            average_on_every_rank(states, 0, grads)
            for g in grads:
                self.assertEqual(g.cpu().tolist(), [1.5 + step] * self.ELEMENTS)
        for state in states:
            self.assertEqual(state.device_path, "auto", "the gateway refused GPU memory")
            self.assertEqual(state.allreduces, 2)
            self.assertEqual(state.declared, [state.tensor_name(0, self.ELEMENTS, torch.float32)])

    def test_ddp_trains_with_its_buckets_summed_in_gpu_memory(self):
        workdir = self.make_workdir()
        cluster = self.start_cluster(
            workdir, nodes=NODES, local_workers=LOCAL_WORKERS, codec="topk:density=0.01"
        )
        results = run_workers(cluster, workdir, ["--device=cuda"])
        check_ranks_trained(self, results, "cuda")
        for r in results:
            self.assertEqual(r["device_path"], "auto", f"rank {r['rank']}: GPU memory refused")
            self.assertGreater(r["wire_bytes"], 0)

    def test_a_bucket_that_moves_keeps_its_name_and_is_summed_where_it_now_lies(self):
        import torch

        import gradgate.torch as gradgate_torch

        states = [gradgate_torch.HookState(s, 0, run_id=7) for s in self.cluster.sockets]
        for state in states:
            self.addCleanup(state.close)
        first = [torch.full((self.ELEMENTS,), float(rank + 1), device="cuda") for rank in range(2)]
        average_on_every_rank(states, 0, first)
        # DDP's rebuild: new bucket tensors, wherever each rank's allocator puts them.
        moved = [torch.full((self.ELEMENTS,), float(rank + 3), device="cuda") for rank in range(2)]
        average_on_every_rank(states, 0, moved)
        for g in moved:
            self.assertEqual(g.cpu().tolist(), [3.5] * self.ELEMENTS)
        for g in first:
            self.assertEqual(g.cpu().tolist(), [1.5] * self.ELEMENTS, "the old bucket changed")
        for state in states:
            self.assertEqual(state.device_path, "auto", "the gateway refused GPU memory")
            self.assertEqual(state.declared, [state.tensor_name(0, self.ELEMENTS, torch.float32)])


class PackageTest(unittest.TestCase):
    """What works without a gateway."""

    def test_dtype_aliases(self):
        self.assertEqual(gradgate.DType.parse("float16"), gradgate.DType.FP16)
        self.assertEqual(gradgate.DType.parse("torch.bfloat16"), gradgate.DType.BF16)
        self.assertEqual(gradgate.DType.parse("fp32").itemsize, 4)
        with self.assertRaises(gradgate.InvalidArgumentError):
            gradgate.DType.parse("int8")

    def test_status_codes_map_to_exception_kinds(self):
        error = errors.from_status(4, "timeout", "tensor t: not done after 10 ms")
        self.assertIsInstance(error, gradgate.WaitTimeoutError)
        self.assertIsInstance(error, TimeoutError)
        self.assertEqual(str(error), "timeout: tensor t: not done after 10 ms")
        self.assertIsInstance(errors.from_status(42, "unknown", "?"), gradgate.GradgateError)

    def test_hook_rejects_unsupported_dtype(self):
        import torch

        import gradgate.torch as gradgate_torch

        self.assertEqual(gradgate_torch.gradgate_dtype(torch.bfloat16), "bf16")
        with self.assertRaisesRegex(RuntimeError, "float64"):
            gradgate_torch.gradgate_dtype(torch.float64)

    def test_hook_rejects_an_unknown_device_path(self):
        import gradgate.torch as gradgate_torch

        with self.assertRaisesRegex(ValueError, "device_path 'gpu'"):
            gradgate_torch.HookState("/nonexistent.sock", 0, device_path="gpu")

    def test_cuda_ipc_memory_handle_from_torch_storage_handles(self):
        from gradgate.client import cuda_ipc_memory_handle

        raw = bytes(range(64))
        self.assertEqual(cuda_ipc_memory_handle(raw), raw)
        self.assertEqual(cuda_ipc_memory_handle(b"\x02c" + raw), raw)
        self.assertEqual(cuda_ipc_memory_handle(b"\x03c" + raw), raw)
        for unusable in (b"\x02e" + raw, raw[:40]):
            with self.assertRaises(gradgate.RejectedError):
                cuda_ipc_memory_handle(unusable)

    def test_the_storage_that_shares_cuda_memory_is_found_on_this_torch(self):
        # untyped_storage() exists from torch 2.0 only; before, storage() shares CUDA memory.
        import torch

        from gradgate.client import storage_of

        storage = storage_of(torch.zeros(4))
        self.assertTrue(callable(getattr(storage, "_share_cuda_", None)), type(storage))

    def test_without_a_cuda_device_the_device_uuid_is_refused_so_buckets_use_host_memory(self):
        import torch

        from gradgate.client import driver_device_uuid

        if torch.cuda.is_available():
            self.skipTest("this machine has a CUDA device")
        with self.assertRaisesRegex(gradgate.RejectedError, "CUDA driver"):
            driver_device_uuid(0)

    def test_the_hook_state_of_a_model_is_made_on_its_cuda_device(self):
        import types

        import torch.nn as nn

        from gradgate import autohook

        self.assertIsNone(autohook._cuda_device_of(nn.Linear(2, 2)))
        wrapped = types.SimpleNamespace(device_ids=[3], parameters=lambda: iter(()))
        self.assertEqual(autohook._cuda_device_of(wrapped), 3)

    def test_run_splits_its_options_from_the_scripts_command_line(self):
        from gradgate.run import split_command_line

        self.assertEqual(
            split_command_line(["--socket", "/s", "--timeout-ms=5", "train.py", "--lr", "1"]),
            (["--socket", "/s", "--timeout-ms=5"], ["train.py", "--lr", "1"]),
        )
        self.assertEqual(
            split_command_line(["--local-rank", "3", "-m", "pkg.train", "--socket", "x"]),
            (["--local-rank", "3"], ["-m", "pkg.train", "--socket", "x"]),
        )

    def test_missing_library_lists_the_places_tried(self):
        saved = os.environ["GRADGATE_LIBRARY"]
        os.environ["GRADGATE_LIBRARY"] = "/nonexistent/libgradgate.so"
        try:
            with self.assertRaises(gradgate.LibraryNotFound) as caught:
                _native._load()
        finally:
            os.environ["GRADGATE_LIBRARY"] = saved
        self.assertIn("/nonexistent/libgradgate.so", str(caught.exception))
        self.assertIn("GRADGATE_LIBRARY", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
