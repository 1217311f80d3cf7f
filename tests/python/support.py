"""What the Python package's tests share: the artifacts under test, temporary directories,
gateways on loopback (gradgate.cluster.LocalCluster) and worker processes run to completion.

The gateway binary and libgradgate come from GRADGATE_BINARY and GRADGATE_LIBRARY (defaults: the
source tree's build/cli/gradgate and build/client/libgradgate.so); when either is missing the
tests FAIL, they are not skipped. Importing this module puts the source tree's package first on
sys.path.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "client" / "python"))
os.environ.setdefault("GRADGATE_LIBRARY", str(REPO / "build" / "client" / "libgradgate.so"))
GATEWAY_BINARY = Path(os.environ.get("GRADGATE_BINARY", REPO / "build" / "cli" / "gradgate"))

from gradgate.cluster import LocalCluster  # noqa: E402

WORKER_DEADLINE_S = 240
POLL_S = 0.1


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


def gateway_status(workdir, rank):
    """GET /v1/status of gateway `rank` of a LocalCluster in `workdir`."""
    ready = json.loads((workdir / f"gateway{rank}.ready.json").read_text())
    url = f"http://127.0.0.1:{ready['admin_port']}/v1/status"
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())
