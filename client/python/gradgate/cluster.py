"""Starts the gateways of one job on this machine (loopback), for demos and tests.

    with LocalCluster("build/cli/gradgate", nodes=2, local_workers=2, codec="fp16") as cluster:
        cluster.sockets   # the Unix socket of each gateway, by node rank

A higher rank dials the lower ones, so the gateways start in rank order: each listens on port 0
(any free port) and, once ready, writes {"port", "socket", "rank"} to its ready file; the next
gateway's config lists the ports read so far. Configs, ready files, sockets and logs live in
`workdir`. Every wait is bounded; a gateway that exits or misses its deadline raises
GatewayFailed with the tail of its log. stop() (also on leaving the `with` block) ends every
gateway's process group: SIGTERM, then SIGKILL after a grace period.
"""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

POLL_SECONDS = 0.05
LOG_TAIL_BYTES = 4000


class GatewayFailed(RuntimeError):
    """A gateway did not start or exited while it was needed."""


class Gateway:
    """One gateway process: its rank, config, log, and (once ready) port and socket."""

    def __init__(self, rank, process, config_path, log_path):
        self.rank = rank
        self.process = process
        self.config_path = config_path
        self.log_path = log_path
        self.port = None
        self.socket = None

    def log_tail(self):
        try:
            data = self.log_path.read_bytes()[-LOG_TAIL_BYTES:]
        except OSError as error:
            return f"<log unreadable: {error}>"
        return data.decode(errors="replace")

    def failure(self, what):
        return GatewayFailed(
            f"gateway rank {self.rank} {what} (config {self.config_path}); its log ends with:\n"
            f"{self.log_tail()}"
        )

    def stop(self, grace_seconds):
        if self.process.poll() is not None:
            return
        _signal_group(self.process, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            _signal_group(self.process, signal.SIGKILL)
            self.process.wait(timeout=grace_seconds)


def _signal_group(process, signum):
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass


class LocalCluster:
    """`nodes` gateways of job `job_id` on 127.0.0.1, each expecting `local_workers` workers.

    codec, min_compress_elements, collective_timeout_ms and log_level go into every config;
    `extra` is merged into it (e.g. {"compression": {"collective": "ring"}}).
    """

    def __init__(
        self,
        binary,
        nodes,
        workdir,
        local_workers=1,
        codec="none",
        job_id=7,
        min_compress_elements=1024,
        collective_timeout_ms=30000,
        log_level="info",
        ready_timeout_s=30.0,
        stop_grace_s=10.0,
        extra=None,
    ):
        self.binary = Path(binary)
        self.nodes = int(nodes)
        self.workdir = Path(workdir)
        self.local_workers = int(local_workers)
        self.codec = codec
        self.job_id = int(job_id)
        self.min_compress_elements = int(min_compress_elements)
        self.collective_timeout_ms = int(collective_timeout_ms)
        self.log_level = log_level
        self.ready_timeout_s = float(ready_timeout_s)
        self.stop_grace_s = float(stop_grace_s)
        self.extra = extra or {}
        self.gateways = []

    @property
    def sockets(self):
        return [gateway.socket for gateway in self.gateways]

    @property
    def ports(self):
        return [gateway.port for gateway in self.gateways]

    def socket_path(self, rank):
        """Where gateway `rank`'s socket is (known before the gateway starts)."""
        return self.workdir / f"gg{rank}.sock"

    def config(self, rank):
        """The config of gateway `rank`: ports of the gateways started so far, 0 for the rest."""
        ports = self.ports + [0] * (self.nodes - len(self.gateways))
        config = {
            "job": {
                "id": self.job_id,
                "nodes": [f"127.0.0.1:{port}" for port in ports],
                "node_rank": rank,
                "local_workers": self.local_workers,
            },
            "ingress": {"socket": str(self.socket_path(rank))},
            "compression": {
                "codec": self.codec,
                "collective": "auto",
                "min_compress_elements": self.min_compress_elements,
            },
            "collective": {"timeout_ms": self.collective_timeout_ms},
            "logging": {"level": self.log_level, "format": "text"},
        }
        for section, values in self.extra.items():
            config.setdefault(section, {}).update(values)
        return config

    def start(self):
        """Starts every gateway in rank order and waits until each is ready."""
        if not (self.binary.is_file() and os.access(self.binary, os.X_OK)):
            raise GatewayFailed(f"gateway binary {self.binary} is missing or not executable")
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            for rank in range(self.nodes):
                gateway = self._launch(rank, log_mode="wb")
                self.gateways.append(gateway)
                self._await_ready(gateway)
        except BaseException:
            self.stop()
            raise
        return self

    def restart(self, rank):
        """Kills gateway `rank` (SIGKILL, as a crash would end it) and starts it again with the
        same port and socket; waits until it is ready. Its log goes on in the same file."""
        gateway = self.gateways[rank]
        _signal_group(gateway.process, signal.SIGKILL)
        gateway.process.wait(timeout=self.stop_grace_s)
        self._ready_path(rank).unlink(missing_ok=True)
        restarted = self._launch(rank, log_mode="ab")
        self.gateways[rank] = restarted
        self._await_ready(restarted)

    def _ready_path(self, rank):
        return self.workdir / f"gateway{rank}.ready.json"

    def _launch(self, rank, log_mode):
        config_path = self.workdir / f"gateway{rank}.yaml"
        log_path = self.workdir / f"gateway{rank}.log"
        # JSON is YAML: the config needs no YAML writer.
        config_path.write_text(json.dumps(self.config(rank), indent=2) + "\n")
        with open(log_path, log_mode) as log:
            process = subprocess.Popen(
                [
                    str(self.binary),
                    "gateway",
                    "-c",
                    str(config_path),
                    "--ready-file",
                    str(self._ready_path(rank)),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return Gateway(rank, process, config_path, log_path)

    def _await_ready(self, gateway):
        ready = self._wait_ready(gateway, self._ready_path(gateway.rank))
        gateway.port = int(ready["port"])
        gateway.socket = ready["socket"]

    def _wait_ready(self, gateway, ready_path):
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if ready_path.exists():
                return json.loads(ready_path.read_text())
            if gateway.process.poll() is not None:
                status = gateway.process.returncode
                raise gateway.failure(f"exited with status {status} before it was ready")
            time.sleep(POLL_SECONDS)
        raise gateway.failure(f"wrote no ready file {ready_path} within {self.ready_timeout_s:g} s")

    def check_alive(self):
        """Raises GatewayFailed if any gateway has exited."""
        for gateway in self.gateways:
            if gateway.process.poll() is not None:
                raise gateway.failure(f"exited with status {gateway.process.returncode}")

    def stop(self):
        """Stops every gateway (idempotent)."""
        for gateway in reversed(self.gateways):
            gateway.stop(self.stop_grace_s)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()
