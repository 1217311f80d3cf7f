"""A small cluster of hosts on one machine: network namespaces on a bridge, links shaped with tc.

    with Testbed(hosts=4) as bed:
        bed.shape(100)                   # every host's link at 100 Mb/s, both directions
        bed.hosts[0].address             # "10.213.7.1"
        bed.wire_bytes()                 # {host name: {"tx": ..., "rx": ...}} from the counters

Every host is a namespace `ggev<pid>h<i>` holding one end of a veth pair (`eth<i>`, with an address
in a /24 picked from the pid); the other end (`ggev<pid>v<i>`) is a port of the bridge
`ggev<pid>br` in the root namespace, which also gets an address (.254) so that processes of the
root namespace (the controller, the metrics scraper) reach every host. A host's link is shaped
with `tc tbf` on both ends of its veth, so that the host sends and receives at the rate.

Bytes on the wire are read from the root-namespace end of each veth: its rx_bytes is what the host
sent, its tx_bytes what the host received (Ethernet frames, headers included). close() ends
whatever still runs in the namespaces and deletes them (their veths go with them) and the bridge;
it is idempotent, and remove_stale() does the same for what an earlier run killed with SIGKILL
left behind (its pid no longer exists).
"""

import os
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

PREFIX = "ggev"
UNSHAPED = 0  # the rate of a link left as the veth makes it (no qdisc)
_STALE = re.compile(rf"^{PREFIX}(\d+)(h\d+|br)$")
# tbf needs a bucket of at least one timer tick of traffic; 250 Hz is the coarsest common tick.
_TICKS_PER_SECOND = 250
_MIN_BURST_BYTES = 64 * 1024
_QUEUE_LATENCY = "100ms"


class NetlabError(RuntimeError):
    """An ip or tc command failed."""


def sh(*argv, check=True):
    """Runs a command; NetlabError with its stderr when it fails and `check` is set."""
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise NetlabError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")
    return done


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def end_processes_in(namespace):
    """SIGKILLs what still runs in `namespace` (what an earlier run left there), by pid."""
    for pid in sh("ip", "netns", "pids", namespace, check=False).stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def remove_stale():
    """Deletes namespaces (ending what runs there) and bridges of earlier runs whose process is
    gone; their names."""
    names = [line.split()[0] for line in sh("ip", "netns", "list").stdout.splitlines() if line]
    names += [
        line.split(":")[1].strip().split("@")[0]
        for line in sh("ip", "-o", "link", "show", "type", "bridge").stdout.splitlines()
    ]
    removed = []
    for name in names:
        match = _STALE.match(name)
        if match and not _pid_alive(int(match.group(1))):
            if match.group(2) == "br":
                sh("ip", "link", "del", name, check=False)
            else:
                end_processes_in(name)
                sh("ip", "netns", "del", name, check=False)
            removed.append(name)
    return removed


@dataclass
class Host:
    index: int
    namespace: str
    device: str  # inside the namespace
    bridge_port: str  # the veth end on the bridge, in the root namespace
    address: str

    def command(self, argv):
        """`argv` run inside this host's namespace."""
        return ["ip", "netns", "exec", self.namespace] + [str(a) for a in argv]


class Testbed:
    """`hosts` namespaces on one bridge; see the module docstring."""

    def __init__(self, hosts):
        pid = os.getpid()
        self.tag = f"{PREFIX}{pid}"
        subnet = f"10.{200 + pid % 50}.{(pid // 50) % 250}"
        self.bridge = f"{self.tag}br"
        self.bridge_address = f"{subnet}.254"
        self.hosts = [
            Host(i, f"{self.tag}h{i}", f"eth{i}", f"{self.tag}v{i}", f"{subnet}.{i + 1}")
            for i in range(hosts)
        ]
        self.rate_mbit = None
        self._created = []

    def open(self):
        try:
            sh("ip", "link", "add", self.bridge, "type", "bridge")
            self._created.append(("link", self.bridge))
            sh("ip", "addr", "add", f"{self.bridge_address}/24", "dev", self.bridge)
            sh("ip", "link", "set", self.bridge, "up")
            for host in self.hosts:
                self._add_host(host)
        except BaseException:
            self.close()
            raise
        return self

    def _add_host(self, host):
        sh("ip", "netns", "add", host.namespace)
        self._created.append(("netns", host.namespace))
        sh("ip", "-n", host.namespace, "link", "set", "lo", "up")
        sh("ip", "link", "add", host.bridge_port, "type", "veth", "peer", "name", host.device,
           "netns", host.namespace)
        sh("ip", "link", "set", host.bridge_port, "master", self.bridge)
        sh("ip", "link", "set", host.bridge_port, "up")
        sh("ip", "-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", host.device)
        sh("ip", "-n", host.namespace, "link", "set", host.device, "up")

    def shape(self, rate_mbit):
        """Every host's link at `rate_mbit` Mb/s in both directions (UNSHAPED: no limit)."""
        for host in self.hosts:
            for where, device in ((["-n", host.namespace], host.device), ([], host.bridge_port)):
                if rate_mbit == UNSHAPED:
                    sh("tc", *where, "qdisc", "del", "dev", device, "root", check=False)
                    continue
                burst = max(_MIN_BURST_BYTES, int(rate_mbit * 1e6 / 8 / _TICKS_PER_SECOND))
                # A fresh qdisc, not `replace`: that changes the tbf in place and keeps its queue,
                # where a GSO packet queued under a faster rate's larger bucket is larger than the
                # new bucket and never leaves (the link is dead until the next change). What was
                # queued is dropped, as by a link that renegotiates its rate.
                sh("tc", *where, "qdisc", "del", "dev", device, "root", check=False)
                sh("tc", *where, "qdisc", "add", "dev", device, "root", "tbf", "rate",
                   f"{rate_mbit}mbit", "burst", str(burst), "latency", _QUEUE_LATENCY)
        self.rate_mbit = rate_mbit

    def wire_bytes(self):
        """{namespace: {"tx": bytes the host sent, "rx": bytes it received}} so far."""
        counters = {}
        for host in self.hosts:
            statistics = Path("/sys/class/net") / host.bridge_port / "statistics"
            counters[host.namespace] = {
                "tx": int((statistics / "rx_bytes").read_text()),
                "rx": int((statistics / "tx_bytes").read_text()),
            }
        return counters

    def close(self):
        while self._created:
            kind, name = self._created.pop()
            if kind == "netns":
                end_processes_in(name)
                sh("ip", "netns", "del", name, check=False)
            else:
                sh("ip", "link", "del", name, check=False)

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc_info):
        self.close()


def parse_rate(text):
    """A rate of --rates: Mb/s, or "unshaped" (UNSHAPED)."""
    return UNSHAPED if text == "unshaped" else int(text)


def speed(rate_mbit):
    """Sort key of rates, slowest first (an unshaped link is the fastest)."""
    return float("inf") if rate_mbit == UNSHAPED else rate_mbit


def rate_name(rate_mbit):
    return "unshaped" if rate_mbit == UNSHAPED else f"{rate_mbit} Mb/s"


def rate_tag(rate_mbit):
    """The rate in file names: "unshaped" or the Mb/s."""
    return "unshaped" if rate_mbit == UNSHAPED else str(rate_mbit)


def byte_delta(before, after):
    """Per-host and total bytes sent between two wire_bytes() readings."""
    hosts = {
        name: {k: after[name][k] - before[name][k] for k in ("tx", "rx")} for name in after
    }
    return {
        "hosts": hosts,
        "tx_total": sum(h["tx"] for h in hosts.values()),
        "rx_total": sum(h["rx"] for h in hosts.values()),
    }
