"""Two network namespaces joined by a veth pair, for the end-to-end tests (needs root and ip).

Names carry the test's process id, so that parallel runs never collide; close() removes both
namespaces (and with them the veth pair).
"""
import os
import subprocess


def run(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


class Link:
    """Two namespaces joined by a veth pair, removed on exit."""

    def __init__(self):
        tag = str(os.getpid())
        self.ns = [f"gga{tag}", f"ggb{tag}"]
        self.dev = [f"gga{tag}"[:15], f"ggb{tag}"[:15]]
        self.addr = ["10.199.0.1", "10.199.0.2"]
        for ns in self.ns:
            run("ip", "netns", "add", ns)
            run("ip", "-n", ns, "link", "set", "lo", "up")
        run("ip", "link", "add", self.dev[0], "netns", self.ns[0], "type", "veth", "peer", "name",
            self.dev[1], "netns", self.ns[1])
        for i in range(2):
            run("ip", "-n", self.ns[i], "addr", "add", f"{self.addr[i]}/24", "dev", self.dev[i])
            run("ip", "-n", self.ns[i], "link", "set", self.dev[i], "up")

    def throttle(self, rate):
        for i in range(2):
            run("tc", "-n", self.ns[i], "qdisc", "replace", "dev", self.dev[i], "root", "tbf",
                "rate", rate, "burst", "64kb", "latency", "200ms")

    def unthrottle(self):
        for i in range(2):
            run("tc", "-n", self.ns[i], "qdisc", "del", "dev", self.dev[i], "root", check=False)

    def close(self):
        for ns in self.ns:
            run("ip", "netns", "del", ns, check=False)
