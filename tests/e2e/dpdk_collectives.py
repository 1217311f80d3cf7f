#!/usr/bin/env python3
"""The collectives between real gateways over the DPDK transport, on a veth pair between two
network namespaces.

Two `gradgate gateway` processes, each on DPDK's net_af_packet driver bound to its veth end
(job.transport: dpdk), and one gradgate_test_worker per gateway. Checks:
  - every codec and collective: the two workers' results are bit-identical, and bit-identical to
    the same job over the TCP transport on the same veth pair, also with 1% and with 5% of the
    DPDK datagrams dropped (and some duplicated and reordered);
  - mixed sizes from 1 KB to 64 MB (--steps steps of 10 tensors: 10 x steps all-reduces) with 5%
    of the outgoing datagrams dropped, 1% duplicated and 1% reordered by the gateways' fault
    injection (dpdk.inject_*): every result bit-identical to the loss-free run, retransmissions
    in the gateways' metrics, each gateway received exactly the messages the other one delivered
    (none twice), and no error was counted;
  - job.size and node_rank auto with a controller: the gateways take their ranks and each
    other's DPDK addresses from it; gateway 1 takes its own address and port from a pod's
    network-status (a downward API annotations file, as Kubernetes with Multus gives it), which
    appears only after it started; gateway 0, restarted at another DPDK address (a recreated
    pod's new virtual function), is reached there by gateway 1 and the job runs again;
  - a gateway killed while the other's worker waits on it: the worker gets an error within the
    collective timeout plus the transport's peer timeout, the other gateway stays up, and the
    job runs again once the killed gateway is back.
Prints one JSON line per job. Needs root and ip (network namespaces); exits 77 otherwise.

Usage: dpdk_collectives.py --gradgate BUILD/cli/gradgate --worker BUILD/tests/tools/gradgate_test_worker
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

from netns_link import fetch, run_on_link, stop_all, wait_for_text, wait_ready

# (codec, collective): every codec, and every collective a codec can take.
CODECS = [
    ("none", "auto"),
    ("fp16", "auto"),
    ("bf16", "auto"),
    ("qsgd:bits=8,workers=8", "auto"),
    ("qsgd:bits=4,workers=4", "allgather"),
    ("sign", "auto"),
    ("sign", "aggregator"),
    ("topk:density=0.01", "auto"),
    ("topk:density=0.01,select=exact", "auto"),
    ("topk:density=0.01", "aggregator"),
    ("topk:density=0.01,overlap=0.5", "aggregator"),
    ("randomk:density=0.05", "auto"),
    ("powersgd:rank=4", "auto"),
]
# Tensors of every codec job: small, odd-sized, fp16, and a matrix for powersgd.
CODEC_TENSORS = ["small:1000", "odd:77777", "half:100003:fp16", "matrix:262144:fp32:512:512"]
CODEC_STEPS = 3
# The mixed-size job: 1 KB to 64 MB in powers of 4, and one odd size.
MIXED_TENSORS = [f"t{4 ** k}k:{256 * 4 ** k}" for k in range(9)] + ["odd:3000017"]
DPDK_NODES = ["10.199.1.1:4791", "10.199.1.2:4791"]  # not the kernel's: it ignores them
MOVED_NODE = "10.199.1.3:4792"  # gateway 0's address after it moved
LOSS = {"drop": 0.05, "duplicate": 0.01, "reorder": 0.01}
# The paths every codec job runs on, TCP first (the reference): (name, transport, injected loss).
PATHS = [("tcp", "tcp", None), ("dpdk", "dpdk", None),
         ("dpdk-1%", "dpdk", {"drop": 0.01, "duplicate": 0.002, "reorder": 0.002}),
         ("dpdk-5%", "dpdk", LOSS)]
JOB_SECONDS = 600
PEER_TIMEOUT_S = 5  # the DPDK transport's: silence for this long and a peer is lost


def metric_totals(text):
    """{metric name: value summed over its label sets} of a Prometheus text exposition."""
    totals = {}
    for line in (text or "").splitlines():
        if line and not line.startswith("#"):
            name = line.split("{")[0].split(" ")[0]
            totals[name] = totals.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return totals


class Job:
    """Two gateways on `link` over `transport`; workers are started per run."""

    def __init__(self, args, link, work, name, transport, codec, collective, inject=None,
                 timeout_ms=60000, controller=None, network_status_rank=None):
        self.args, self.link, self.name = args, link, name
        self.transport, self.codec, self.collective = transport, codec, collective
        self.inject, self.timeout_ms = inject or {}, timeout_ms
        self.controller = controller  # "host:port": job.size, the addresses from it
        self.network_status_rank = network_status_rank  # its DPDK address from a network-status
        self.dpdk_nodes = list(DPDK_NODES)  # each gateway's DPDK address, as it starts
        self.dir = os.path.join(work, name)
        os.makedirs(self.dir)
        self.gateways, self.ports, self.admin_ports = [None, None], [0, 0], [0, 0]
        try:
            if controller is None:  # one by one: gateway 1 dials gateway 0's port
                for rank in range(2):
                    self.start_gateway(rank)
            else:  # every gateway waits for the other before it is ready
                readies = [self.launch_gateway(rank) for rank in range(2)]
                if network_status_rank is not None:
                    self.attach_network(network_status_rank)
                for rank, ready in enumerate(readies):
                    self.await_gateway(rank, ready)
        except Exception:
            self.close()  # the gateways that did start
            raise

    def socket(self, rank):
        return os.path.join(self.dir, f"gateway{rank}.sock")

    def annotations(self, rank):
        return os.path.join(self.dir, f"gateway{rank}.annotations")

    def attach_network(self, rank):
        """What Multus and the kubelet do for a pod: once gateway `rank` waits for its network,
        its annotations file gets the network-status entry of its veth end and DPDK address."""
        log = os.path.join(self.dir, f"gateway{rank}.log")
        if not wait_for_text(log, "dpdk: waiting for", self.gateways[rank], 30):
            raise RuntimeError(f"{self.name} gateway {rank} did not wait for its network-status")
        status = [{"name": "cbr0", "interface": "eth0", "ips": ["10.244.0.9"], "default": True},
                  {"name": "training/gradgate-dpdk", "interface": self.link.dev[rank],
                   "ips": ["fd00::9", self.dpdk_nodes[rank].split(":")[0]], "dns": {}}]
        with open(self.annotations(rank) + ".new", "w") as f:  # Go's %q quoting, as JSON's
            f.write(f"k8s.v1.cni.cncf.io/network-status={json.dumps(json.dumps(status, indent=4))}"
                    f'\nkubernetes.io/config.seen="2026-11-26T10:00:00Z"\n')
        os.replace(self.annotations(rank) + ".new", self.annotations(rank))

    def write_config(self, rank):
        nodes = self.dpdk_nodes if self.transport == "dpdk" else [
            f"{self.link.addr[r]}:{self.ports[r]}" for r in range(2)]
        config = os.path.join(self.dir, f"gateway{rank}.yaml")
        # From a controller: the ranks too, claimed by node name (as a DaemonSet's gateways do).
        membership = (f"node_rank: {rank}\n  nodes: {json.dumps(nodes)}" if self.controller is None
                      else f"node_rank: auto\n  node_name: node{rank}\n  size: 2")
        with open(config, "w") as f:
            f.write(f"""job:
  id: 5
  {membership}
  transport: {self.transport}
ingress:
  socket: {self.socket(rank)}
compression:
  codec: "{self.codec}"
  collective: {self.collective}
collective:
  timeout_ms: {self.timeout_ms}
logging:
  level: info
""")
            from_network_status = rank == self.network_status_rank
            if self.transport == "dpdk":
                port = ("" if from_network_status else
                        f"net_af_packet{rank},iface={self.link.dev[rank]},framecnt=4096")
                f.write(f"""dpdk:
  port: "{port}"
  cores: "{rank % os.cpu_count()}"
  no_huge: true
  memory_mb: 512
  eal_args: ["--log-level=warning"]
  inject_seed: {rank + 1}
""")
                for key, value in self.inject.items():
                    f.write(f"  inject_{key}: {value}\n")
            if self.controller is not None:
                host, port = self.dpdk_nodes[rank].split(":")
                f.write(f"  udp_port: {port}\n")
                if from_network_status:  # no address yet: the pod's network is not attached
                    with open(self.annotations(rank), "w") as annotations:
                        annotations.write('kubernetes.io/config.seen="2026-11-26T10:00:00Z"\n')
                    f.write(f"""  network_status_file: {self.annotations(rank)}
  network: gradgate-dpdk
  network_wait_ms: 30000
""")
                else:
                    f.write(f"""transport:
  listen: "{host}:0"
""")
                f.write(f"""control:
  url: "{self.controller}"
  report_interval_ms: 300
""")
        return config

    def start_gateway(self, rank):
        """(Re)starts gateway `rank` (on its old port) and waits until it is ready."""
        self.await_gateway(rank, self.launch_gateway(rank))

    def launch_gateway(self, rank):
        """Starts gateway `rank`; the path of its ready file."""
        ready = os.path.join(self.dir, f"gateway{rank}.ready")
        if os.path.exists(ready):
            os.remove(ready)
        self.gateways[rank] = subprocess.Popen(
            ["ip", "netns", "exec", self.link.ns[rank], self.args.gradgate, "gateway", "-c",
             self.write_config(rank), "--ready-file", ready, "--stats-interval", "0"],
            stdout=open(os.path.join(self.dir, f"gateway{rank}.log"), "a"),
            stderr=subprocess.STDOUT)
        return ready

    def await_gateway(self, rank, ready):
        answer = wait_ready(ready, self.gateways[rank], f"{self.name} gateway {rank}")
        self.ports[rank], self.admin_ports[rank] = answer["port"], answer["admin_port"]

    def start_worker(self, rank, tensors, steps, out):
        return subprocess.Popen(
            [self.args.worker, "--socket", self.socket(rank), "--local-rank", "0", "--steps",
             str(steps), "--out", out, "--digest", "--timeout-ms", "120000"] +
            [arg for tensor in tensors for arg in ("--tensor", tensor)],
            stdout=open(f"{out}.log", "w"), stderr=subprocess.STDOUT)

    def run(self, tensors, steps, tag="run"):
        """Runs one worker per gateway; (every worker's digest lines, seconds) or raises."""
        outs = [os.path.join(self.dir, f"{tag}_worker{rank}") for rank in range(2)]
        began = time.monotonic()
        workers = [self.start_worker(rank, tensors, steps, outs[rank]) for rank in range(2)]
        for rank, worker in enumerate(workers):
            try:
                code = worker.wait(timeout=JOB_SECONDS)
            except subprocess.TimeoutExpired:
                for w in workers:
                    w.kill()
                raise RuntimeError(f"{self.name}: worker {rank} still running after "
                                   f"{JOB_SECONDS} s")
            if code != 0:
                raise RuntimeError(f"{self.name}: worker {rank} exited with {code}: "
                                   f"see {outs[rank]}.log")
        seconds = time.monotonic() - began
        digests = []
        for out in outs:
            with open(out) as f:
                digests.append(f.read().splitlines())
        return digests, seconds

    def metrics(self, rank):
        return metric_totals(fetch(self.link.ns[rank],
                                   f"http://127.0.0.1:{self.admin_ports[rank]}/metrics"))

    def settled_metrics(self, seconds=10):
        """Both gateways' metrics once each has received what the other says it delivered (the
        last acknowledgements may still be on their way when the workers finish)."""
        deadline = time.monotonic() + seconds
        while True:
            both = [self.metrics(rank) for rank in range(2)]
            sent = [m.get("gradgate_transport_messages_sent_total", -1) for m in both]
            received = [m.get("gradgate_transport_messages_received_total", -2) for m in both]
            if (sent[0] == received[1] and sent[1] == received[0]) or time.monotonic() > deadline:
                return both
            time.sleep(0.1)

    def close(self):
        stop_all([gateway for gateway in self.gateways if gateway is not None], seconds=20)


def run_job(args, link, work, name, transport, codec, collective, tensors, steps, inject=None):
    """(digests, seconds, both gateways' metrics) of one job."""
    job = Job(args, link, work, name, transport, codec, collective, inject)
    try:
        digests, seconds = job.run(tensors, steps)
        return digests, seconds, job.settled_metrics()
    finally:
        job.close()


def every_codec(args, link, work):
    failures = []
    for index, (codec, collective) in enumerate(CODECS):
        reference = None  # the TCP job's results
        for name, transport, loss in PATHS:
            digests, seconds, _ = run_job(args, link, work, f"codec{index}_{name}", transport,
                                          codec, collective, CODEC_TENSORS, CODEC_STEPS, loss)
            print(json.dumps({"job": "codec", "codec": codec, "collective": collective,
                              "path": name, "seconds": round(seconds, 2)}))
            what = f"{codec} ({collective}) over {name}"
            if digests[0] != digests[1]:
                failures.append(f"{what}: the workers differ")
            if len(digests[0]) != CODEC_STEPS * len(CODEC_TENSORS):
                failures.append(f"{what}: {len(digests[0])} results")
            if reference is None:
                reference = digests[0]
            elif digests[0] != reference:
                failures.append(f"{what}: the results differ from TCP's")
    return failures


def mixed_sizes_with_loss(args, link, work, steps):
    clean, clean_seconds, _ = run_job(args, link, work, "mixed_clean", "dpdk", "none", "auto",
                                      MIXED_TENSORS, steps)
    lossy, lossy_seconds, metrics = run_job(args, link, work, "mixed_lossy", "dpdk", "none",
                                            "auto", MIXED_TENSORS, steps, LOSS)
    retransmits = [m.get("gradgate_transport_retransmits_total", 0) for m in metrics]
    sent = [m.get("gradgate_transport_messages_sent_total", 0) for m in metrics]
    received = [m.get("gradgate_transport_messages_received_total", 0) for m in metrics]
    errors = [m.get("gradgate_errors_total", 0) for m in metrics]
    print(json.dumps({"job": "mixed", "allreduces": steps * len(MIXED_TENSORS),
                      "bytes_per_step": sum(int(t.split(":")[1]) * 4 for t in MIXED_TENSORS),
                      "clean_seconds": round(clean_seconds, 2),
                      "lossy_seconds": round(lossy_seconds, 2), **LOSS,
                      "retransmits": retransmits, "messages_sent": sent,
                      "messages_received": received, "errors": errors}))
    failures = []
    if len(clean[0]) != steps * len(MIXED_TENSORS) or clean[0] != clean[1]:
        failures.append("mixed sizes, no loss: the workers' results are missing or differ")
    if lossy != clean:
        failures.append("mixed sizes with loss: results differ from the loss-free run")
    if min(retransmits) <= 0:
        failures.append(f"mixed sizes with loss: retransmissions not counted: {retransmits}")
    if sent[0] != received[1] or sent[1] != received[0] or min(sent) <= 0:
        failures.append(f"mixed sizes with loss: sent {sent} vs received {received}")
    if max(errors) > 0:
        failures.append(f"mixed sizes with loss: errors counted {errors}")
    return failures


def killed_gateway(args, link, work):
    """Gateway 1 is killed while worker 0's all-reduce waits on it (gateway 1 has no worker):
    the worker gets an error within the collective timeout plus the peer timeout, gateway 0 stays
    up, and once gateway 1 is back the job runs again (under new tensor names, as a new run)."""
    timeout_ms = 3000
    job = Job(args, link, work, "killed", "dpdk", "topk:density=0.01", "auto",
              timeout_ms=timeout_ms)
    failures = []
    try:
        waiting = job.start_worker(0, ["w:50000"], 1, os.path.join(job.dir, "waiting"))
        if not wait_for_text(os.path.join(job.dir, "gateway0.log"), "local worker 0 joined",
                             waiting, 20):
            return ["killed gateway: worker 0 never joined"]
        killed_at = time.monotonic()
        job.gateways[1].kill()
        job.gateways[1].wait()
        try:
            code = waiting.wait(timeout=60)
        except subprocess.TimeoutExpired:
            waiting.kill()
            return ["killed gateway: the waiting worker never got an error"]
        delay = time.monotonic() - killed_at
        job.start_gateway(1)
        digests, seconds = job.run(["w.run2:50000"], 3, "after")
        print(json.dumps({"job": "killed_gateway", "worker_exit": code,
                          "error_after_s": round(delay, 2), "recovered_seconds": round(seconds, 2)}))
        if code == 0 or delay > timeout_ms / 1000 + PEER_TIMEOUT_S + 2:
            failures.append(f"killed gateway: worker exit {code} after {delay:.2f} s")
        if job.gateways[0].poll() is not None:
            failures.append("killed gateway: gateway 0 went down too")
        if len(digests[0]) != 3 or digests[0] != digests[1]:
            failures.append("killed gateway: the job did not recover")
    finally:
        job.close()
    return failures


def membership_from_the_controller(args, link, work):
    """job.size over DPDK: each gateway claims its rank from a controller, registers its DPDK
    address there and takes the other's; the job then runs like one with job.nodes. Gateway 0
    then comes back at another DPDK address: gateway 1 finds it there through the controller."""
    directory = os.path.join(work, "controller")
    os.makedirs(directory)
    config = os.path.join(directory, "control.yaml")
    with open(config, "w") as f:
        f.write(f'server:\n  listen: "{link.addr[0]}:0"\n')
    ready = os.path.join(directory, "control.ready")
    controller = subprocess.Popen(
        ["ip", "netns", "exec", link.ns[0], args.gradgate, "control", "-c", config,
         "--ready-file", ready], stdout=open(os.path.join(directory, "control.log"), "w"),
        stderr=subprocess.STDOUT)
    try:
        port = wait_ready(ready, controller, "controller")["port"]
        job = Job(args, link, work, "membership", "dpdk", "topk:density=0.01", "auto",
                  controller=f"{link.addr[0]}:{port}", network_status_rank=1)
        try:
            digests, seconds = job.run(CODEC_TENSORS, CODEC_STEPS)
            job.gateways[0].kill()
            job.gateways[0].wait()
            job.dpdk_nodes[0] = MOVED_NODE
            job.start_gateway(0)
            # Gateway 1 loses the old gateway 0 after its peer timeout (a step started before
            # that would fail), then finds the new one through the controller. (Their ranks are
            # claimed by node name in the order the claims arrive: gateway 0 may hold rank 1.)
            moved_to = f"moved from {DPDK_NODES[0]} to {MOVED_NODE}"
            if not wait_for_text(os.path.join(job.dir, "gateway1.log"), moved_to,
                                 job.gateways[1], PEER_TIMEOUT_S + 10):
                raise RuntimeError("membership: gateway 1 never followed gateway 0's move")
            moved, moved_seconds = job.run(["w.moved:50000"], 3, "moved")
        finally:
            job.close()
    finally:
        controller.send_signal(signal.SIGTERM)
        controller.wait(timeout=20)
    print(json.dumps({"job": "membership", "seconds": round(seconds, 2),
                      "after_move_seconds": round(moved_seconds, 2)}))
    failures = []
    if len(digests[0]) != CODEC_STEPS * len(CODEC_TENSORS) or digests[0] != digests[1]:
        failures.append("membership from the controller: the workers' results missing or differ")
    if len(moved[0]) != 3 or moved[0] != moved[1]:
        failures.append("membership from the controller: no job after gateway 0 moved")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gradgate", required=True)
    parser.add_argument("--worker", required=True)
    parser.add_argument("--steps", type=int, default=12, help="steps of the mixed-size job")
    parser.add_argument("--skip-codecs", action="store_true", help="the mixed-size job only")
    args = parser.parse_args()

    def body(link, work):
        failures = []
        if not args.skip_codecs:
            failures += every_codec(args, link, work)
            failures += killed_gateway(args, link, work)
            failures += membership_from_the_controller(args, link, work)
        return failures + mixed_sizes_with_loss(args, link, work, args.steps)

    return run_on_link("dpdk_collectives", body)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # cleanup runs on ctest's timeout
    sys.exit(main())
