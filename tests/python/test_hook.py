#!/usr/bin/python3
"""Tests of the gradgate Python package against real gateways on loopback.

HookTrainingTest: 2 gateways x 2 DDP workers (local_workers=2) train 100 steps through
gradgate.torch.allreduce_hook, once per codec and once with momentum correction; every rank must
end with bit-identical parameters and a lower loss, through DDP's bucket rebuild after step 1, an
fp16 bucket and uneven last batches (see hook_worker.py). ClientTest: the Client API and its errors
with two gateways of one worker each. HookStateTest: the hook's Futures on CPU buckets (they end
after the hook returned, several buckets in flight, timeouts, a gateway that dies, non-finite
steps). CudaDeviceTest: tensors in GPU memory (Client.declare_cuda, the hook's device path, DDP
training on GPU 0 with its buckets summed in place), skipped when torch.cuda is not available.
PackageTest: the parts that need no gateway. test_autohook.py has the tests of `python -m
gradgate.run`.

The artifacts under test are as support.py says. Run: /usr/bin/python3 tests/python/test_hook.py
"""

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
from pathlib import Path

from support import (
    REPO,
    TempDirTest,
    gateway_status,
    require_artifacts,
    run_processes,
)

# After support, which puts the package under test first on sys.path.
import gradgate  # noqa: E402
from gradgate import _native, errors  # noqa: E402

WORKER_SCRIPT = Path(__file__).resolve().parent / "hook_worker.py"

NODES = 2
LOCAL_WORKERS = 2
STEPS = 100


def cuda_available():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


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

    def test_with_momentum_correction_ranks_agree_and_loss_falls(self):
        # Velocities per bucket through the rebuild after step 1, one of them of an fp16 bucket.
        results = self.check_training("topk:density=0.01", 0.1, options=["--momentum-correction"])
        for r in results:
            self.assertEqual(r["momentum_correction"], [0.9, False])
            self.assertTrue(r["velocities_on_device"])

    def check_training(self, codec, max_wire_fraction, options=()):
        """Trains the workers through gateways with `codec` and checks what every run must show;
        returns the workers' results."""
        workdir = self.make_workdir()
        cluster = self.start_cluster(
            workdir, nodes=NODES, local_workers=LOCAL_WORKERS, codec=codec
        )
        results = run_workers(cluster, workdir, options)
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
        return results


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
        self.assertEqual([tensor.codec for tensor in tensors], ["unknown"] * 2)
        infos = self.allreduce_all(tensors)
        for tensor, info in zip(tensors, infos):
            values = (ctypes.c_float * self.ELEMENTS).from_buffer(tensor.buffer)
            self.assertEqual(list(values[:3]), [3.0, 5.0, 7.0])
            self.assertEqual(values[self.ELEMENTS - 1], 3.0 + 2 * (self.ELEMENTS - 1))
            self.assertEqual(info.step, 0)
            self.assertGreater(info.raw_bytes, 0)
            self.assertEqual((info.codec, tensor.codec), ("none", "none"))

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


def check_velocities_cleared_where_sent(test, device, dtype="float32"):
    """Two gateways of top-k 1%, each with a HookState with momentum correction over a bucket of
    `dtype` on `device`: after the first step each velocity (float32) is its gradient, cleared
    where the (sparse) result is not zero."""
    import torch

    import gradgate.torch as gradgate_torch

    cluster = test.start_cluster(test.make_workdir(), nodes=2, local_workers=1,
                                 codec="topk:density=0.01,select=exact")
    states = [gradgate_torch.HookState(s, 0, run_id=10, momentum=0.5) for s in cluster.sockets]
    for state in states:
        test.addCleanup(state.close)
    generator = torch.Generator().manual_seed(5)
    sent = [torch.randn(4096, generator=generator).to(device, getattr(torch, dtype))
            for _ in states]
    grads = [g.clone() for g in sent]
    average_on_every_rank(states, 0, grads)
    result = grads[0]
    test.assertTrue(torch.equal(grads[1], result))
    # Each gateway sent its node's 41 largest: 41 to 82 of the 4096 came back.
    test.assertTrue(41 <= int(result.count_nonzero()) <= 82, result.count_nonzero())
    for state, gradient in zip(states, sent):
        test.assertEqual(state.codec_allreduces, {"topk": 1})
        velocity = state.velocities._velocities[0]
        test.assertEqual((velocity.device, velocity.dtype), (gradient.device, torch.float32))
        test.assertTrue(torch.equal(velocity, gradient.float().masked_fill(result != 0, 0.0)))


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
        self.assertEqual((state.allreduces, state.failed_allreduces), (0, 1))

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
        self.assertEqual(state.failed_allreduces, 2)  # the one that timed out, the refused one
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
        self.assertEqual(state.failed_allreduces, 2)
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

    def test_momentum_correction_sends_velocities_that_a_skipped_step_clears(self):
        import torch

        import gradgate.torch as gradgate_torch

        with self.assertRaisesRegex(ValueError, "momentum 1.0: use a value above 0 and below 1"):
            gradgate_torch.HookState(self.cluster.sockets[0], 0, momentum=1.0)
        for state in self.states:
            state.close()
        states = [gradgate_torch.HookState(s, 0, run_id=8, momentum=0.5)
                  for s in self.cluster.sockets]
        for state in states:
            self.addCleanup(state.close)
        states[1].nonfinite = "raise"

        def step(*node_grads):
            grads = [torch.tensor(g, dtype=torch.float32) for g in node_grads]
            futures = [state.start_average(0, g) for state, g in zip(states, grads)]
            return [wait_for(future).tolist() for future in futures]

        self.assertEqual(step([2.0, 4.0], [6.0, 0.0]), [[4.0, 2.0]] * 2)
        # Velocities 0.5 * (2, 4) + (1, 1) and 0.5 * (6, 0) + (3, 1), averaged.
        self.assertEqual(step([1.0, 1.0], [3.0, 1.0]), [[4.0, 2.0]] * 2)
        # A skipped step (NaN on the rank that propagates, an error on the other) clears both.
        grads = [torch.tensor([float("inf"), 1.0]), torch.tensor([1.0, 1.0])]
        futures = [state.start_average(0, g) for state, g in zip(states, grads)]
        self.assertTrue(torch.isnan(wait_for(futures[0])).all())
        with self.assertRaisesRegex(RuntimeError, "skipped: nonfinite_gradient"):
            wait_for(futures[1])
        self.assertEqual(step([2.0, 2.0], [4.0, 0.0]), [[3.0, 1.0]] * 2)

    def test_momentum_correction_clears_the_velocity_where_a_sparse_result_was_sent(self):
        check_velocities_cleared_where_sent(self, "cpu")

    def test_momentum_correction_clears_the_fp32_velocity_of_an_fp16_bucket_so_too(self):
        check_velocities_cleared_where_sent(self, "cpu", "float16")

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

    def test_momentum_correction_keeps_the_velocities_of_cuda_buckets_in_gpu_memory(self):
        import torch

        import gradgate.torch as gradgate_torch

        states = [gradgate_torch.HookState(s, 0, run_id=9, momentum=0.5)
                  for s in self.cluster.sockets]
        for state in states:
            self.addCleanup(state.close)
        grads = [torch.empty(self.ELEMENTS, device="cuda") for _ in states]
        # Velocities 1 and 2, then 0.5 * 1 + 1 and 0.5 * 2 + 1.
        for step, expected in enumerate((1.5, 1.75)):
            for rank, g in enumerate(grads):
                g.fill_(float(rank + 1) if step == 0 else 1.0)
            average_on_every_rank(states, 0, grads)
            for g in grads:
                self.assertEqual(g.cpu().tolist(), [expected] * self.ELEMENTS)
        for state in states:
            self.assertEqual(state.device_path, "auto", "the gateway refused GPU memory")
            self.assertTrue(state._momentum._velocities[0].is_cuda)

    def test_momentum_correction_clears_cuda_velocities_where_a_sparse_result_was_sent(self):
        check_velocities_cleared_where_sent(self, "cuda")

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

    def test_ddp_trains_with_momentum_correction_and_its_velocities_in_gpu_memory(self):
        workdir = self.make_workdir()
        cluster = self.start_cluster(
            workdir, nodes=NODES, local_workers=LOCAL_WORKERS, codec="topk:density=0.01"
        )
        results = run_workers(cluster, workdir, ["--device=cuda", "--momentum-correction"])
        check_ranks_trained(self, results, "cuda")
        for r in results:
            self.assertEqual(r["device_path"], "auto", f"rank {r['rank']}: GPU memory refused")
            self.assertTrue(r["velocities_on_device"], f"rank {r['rank']}")

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
