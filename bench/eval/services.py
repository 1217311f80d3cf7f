"""The gradgate processes of one run: a gateway in every host namespace, and the controller.

NamespacedCluster is gradgate.cluster.LocalCluster with each gateway started inside its host's
namespace (through a two-line launcher script, so the parent's start order, ready-file waits and
shutdown are reused as they are), job.nodes holding the hosts' addresses, the admin API on the
host's address (scraped from the root namespace across the bridge) and, when a policy is
wanted, the controller's URL.

Controller runs `gradgate control` in the root namespace on the bridge's address: it is no
training host, so it takes no CPU share or link of one, yet every gateway reaches it over its
own shaped link, as it would a controller elsewhere in a cluster.

The controller and the workers die with the harness (PR_SET_PDEATHSIG); gateways, started by
LocalCluster, are ended with their namespace (netlab) if the harness could not stop them.
"""

import ctypes
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from gradgate.cluster import GatewayFailed, LocalCluster

READY_TIMEOUT_S = 30.0
STOP_GRACE_S = 10.0
POLL_S = 0.05
PR_SET_PDEATHSIG = 1


def die_with_parent():
    """Popen preexec_fn: the child gets SIGKILL when the harness dies, even of SIGKILL."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class NamespacedCluster(LocalCluster):
    """One gateway per Testbed host; see the module docstring."""

    def __init__(self, binary, hosts, workdir, control_url="", report_interval_ms=500, **kwargs):
        super().__init__(binary, len(hosts), workdir, **kwargs)
        self.gradgate = Path(binary)
        self.hosts = hosts
        self.control_url = control_url
        self.report_interval_ms = report_interval_ms
        self.launchers = [self._write_launcher(host) for host in hosts]
        self.admin_urls = []

    def _write_launcher(self, host):
        Path(self.workdir).mkdir(parents=True, exist_ok=True)
        path = Path(self.workdir) / f"gateway-in-{host.namespace}.sh"
        path.write_text(f'#!/bin/sh\nexec ip netns exec {host.namespace} {self.gradgate} "$@"\n')
        path.chmod(0o755)
        return path

    def config(self, rank):
        config = super().config(rank)
        ports = [node.rsplit(":", 1)[1] for node in config["job"]["nodes"]]
        config["job"]["nodes"] = [f"{h.address}:{p}" for h, p in zip(self.hosts, ports)]
        config["admin"] = {"listen": f"{self.hosts[rank].address}:0"}
        if self.control_url:
            config["control"] = {
                "url": self.control_url,
                "report_interval_ms": self.report_interval_ms,
                "poll_wait_ms": 1000,
            }
        return config

    def _launch(self, rank, log_mode):
        self.binary = self.launchers[rank]
        return super()._launch(rank, log_mode)

    def _await_ready(self, gateway):
        super()._await_ready(gateway)
        ready = json.loads(self._ready_path(gateway.rank).read_text())
        self.admin_urls.append(
            f"http://{self.hosts[gateway.rank].address}:{ready['admin_port']}/metrics")


class Controller:
    """`gradgate control` on `address`:0 with the given policy settings."""

    def __init__(self, binary, address, workdir, policy):
        self.workdir = Path(workdir)
        self.log_path = self.workdir / "control.log"
        ready_path = self.workdir / "control.ready.json"
        config_path = self.workdir / "control.yaml"
        config = {
            "server": {"listen": f"{address}:0"},
            "nodes": {"report_interval_ms": 500, "stale_after_ms": 5000},
            "policy": policy,
            "log": {"level": "warn", "format": "text"},
        }
        config_path.write_text(json.dumps(config, indent=2) + "\n")  # JSON is YAML
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [str(binary), "control", "-c", str(config_path), "--ready-file", str(ready_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=die_with_parent,
            )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not ready_path.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise GatewayFailed(f"the controller did not start; its log:\n{self.log_tail()}")
            time.sleep(POLL_S)
        self.url = f"{address}:{json.loads(ready_path.read_text())['port']}"

    def log_tail(self):
        return self.log_path.read_bytes()[-3000:].decode(errors="replace")

    def alive(self):
        return self.process.poll() is None

    def stop(self):
        if self.process.poll() is not None:
            return
        for signum in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.process.pid, signum)
                self.process.wait(timeout=STOP_GRACE_S)
                return
            except ProcessLookupError:
                return
            except subprocess.TimeoutExpired:
                continue
