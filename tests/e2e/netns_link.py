"""Two network namespaces joined by a veth pair, for the end-to-end tests (needs root and ip),
and helpers for the daemons run in them.

Names carry the test's process id, so that parallel runs never collide; close() removes both
namespaces (and with them the veth pair).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def run(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


def wait_ready(path, process, what, seconds=30):
    """The JSON of a daemon's ready file once it exists; raises if `process` exits first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                return json.load(f)
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        time.sleep(0.05)
    raise RuntimeError(f"{what} not ready within {seconds} s")


def wait_for_text(path, text, process, seconds):
    """True once `text` is in the file at `path` (bounded; False if `process` exits first)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        if os.path.exists(path):
            with open(path) as f:
                if text in f.read():
                    return True
        time.sleep(0.05)
    return False


def fetch(ns, url):
    """GET `url` from inside namespace `ns`: the body as text, or None."""
    code = ("import sys, urllib.request; "
            "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())")
    answer = run("ip", "netns", "exec", ns, sys.executable, "-c", code, url, check=False)
    return answer.stdout if answer.returncode == 0 else None


def query(ns, url):
    """GET `url` from inside namespace `ns`: the parsed JSON, or None."""
    try:
        return json.loads(fetch(ns, url) or "")
    except json.JSONDecodeError:
        return None


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


def start_in(ns, argv, log, processes):
    """Starts `argv` in namespace `ns`, its output to the file `log`; adds it to `processes`."""
    process = subprocess.Popen(["ip", "netns", "exec", ns] + argv, stdout=open(log, "w"),
                               stderr=subprocess.STDOUT)
    processes.append(process)
    return process


def start_gateway(link, rank, gradgate, config, work, processes):
    """Writes `config` (YAML text) as gateway{rank}.yaml in `work` and starts `gradgate gateway`
    with it in the namespace of end `rank`; returns its ready file's JSON once it is ready."""
    path = os.path.join(work, f"gateway{rank}.yaml")
    with open(path, "w") as f:
        f.write(config)
    ready = os.path.join(work, f"gateway{rank}.ready")
    gateway = start_in(link.ns[rank], [gradgate, "gateway", "-c", path, "--ready-file", ready,
                                       "--stats-interval", "0"],
                       os.path.join(work, f"gateway{rank}.log"), processes)
    return wait_ready(ready, gateway, f"gateway {rank}")


def stop_all(processes, seconds=10):
    """SIGTERM to every process still running, then waits (`seconds` each, then SIGKILL)."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def namespaces_unavailable(test):
    """Why `test` cannot make network namespaces here (not root, no ip), or None."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        return f"{test}: needs root and ip (network namespaces)"
    if subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        return f"{test}: ip netns is unavailable"
    return None


def run_on_link(test, body):
    """Runs body(link, work) -> [failure, ...] on a new Link with a work directory; prints the
    failures (the logs stay in the work directory then). Returns the exit code: 0, 1 on failures,
    77 where namespaces are unavailable."""
    unavailable = namespaces_unavailable(test)
    if unavailable:
        print(unavailable)
        return 77
    work = tempfile.mkdtemp(prefix=f"gradgate-{test}-")
    link = Link()
    try:
        failures = body(link, work)
    except RuntimeError as error:
        failures = [str(error)]
    finally:
        link.close()
    for failure in failures:
        print("FAIL:", failure, f"(logs in {work})")
    if not failures:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0
