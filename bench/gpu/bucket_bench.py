#!/usr/bin/env python3
"""Time per all-reduce of one large gradient bucket through gradgate's GPU data path, against the
same bucket copied to the host and encoded on the CPU, and against torch.distributed without
compression, all in one run on one machine.

Two gateways on loopback (gradgate gateway, one local worker each) and two worker processes that
each hold a bucket of --elements fp32 values on their GPU (cuda:0 and cuda:1 when there are two
GPUs, both on cuda:0 otherwise). Per codec, each worker times --steps all-reduces after --warmup:
  gpu:   the bucket declared over its GPU memory (Client.declare_cuda, CUDA IPC), summed on the
         GPU by the gateway and encoded and decoded where --placement says (compression.placement:
         gpu by default; auto lets the gateway's probe choose; cpu stages the sum through host
         memory);
  host:  the bucket copied into a shared-memory buffer, encoded on the CPU, copied back (what the
         hook does with device_path="host");
and once, without gradgate: torch.distributed.all_reduce of the bucket with NCCL (two GPUs) or
gloo (one GPU: NCCL cannot put two ranks on one GPU). Prints one JSON line per measurement:
median seconds per all-reduce, its ratio to the uncompressed baseline, and the gateways' own
encode / communicate / decode split. --device cpu runs the host path and gloo only (a check of
the script without a GPU).

Usage: bucket_bench.py --gradgate BUILD/cli/gradgate [--elements 25000000] [--codecs ...]
                       [--placement gpu|auto|cpu] [--segment-bytes N]
"""
import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "client" / "python"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(run, steps, warmup, sync):
    """Median seconds of run() over `steps` after `warmup`, and the infos it returned."""
    seconds, infos = [], []
    for step in range(warmup + steps):
        sync()
        start = time.perf_counter()
        info = run()
        sync()
        if step >= warmup:
            seconds.append(time.perf_counter() - start)
            infos.append(info)
    return statistics.median(seconds), infos


def split(infos):
    if not infos or infos[0] is None:
        return {}
    return {key: statistics.median(getattr(info, key) for info in infos)
            for key in ("encode_seconds", "communicate_seconds", "decode_seconds", "wire_bytes")}


def worker(args):
    """One rank: its measurements, as JSON lines on stdout."""
    import torch
    import torch.distributed as dist
    import gradgate

    rank = args.rank
    on_gpu = args.device == "cuda"
    device = torch.device(f"cuda:{rank % torch.cuda.device_count()}") if on_gpu else "cpu"
    sync = (lambda: torch.cuda.synchronize(device)) if on_gpu else (lambda: None)
    generator = torch.Generator(device=device).manual_seed(rank)
    bucket = torch.randn(args.elements, generator=generator, device=device)
    gradient = bucket.clone()

    def emit(path, codec, seconds, infos):
        print(json.dumps({"rank": rank, "path": path, "codec": codec, "elements": args.elements,
                          "seconds": seconds, "device": str(device), **split(infos)}), flush=True)

    for codec, socket_path in zip(args.codecs, args.sockets):
        client = gradgate.Client(socket_path, 0)
        try:
            if on_gpu:
                ready = torch.cuda.Event(interprocess=True)
                tensor = client.declare_cuda(f"gpu.{codec}", bucket, ready_event=ready)

                def through_gpu():
                    bucket.copy_(gradient)
                    ready.record(torch.cuda.current_stream(device))
                    return tensor.allreduce().wait(args.timeout_ms)

                emit("gpu", codec, *timed(through_gpu, args.steps, args.warmup, sync))
            shared = client.declare(f"host.{codec}", args.elements, "fp32")
            view = torch.frombuffer(shared.buffer, dtype=torch.float32)

            def through_host():
                bucket.copy_(gradient)
                view.copy_(bucket)
                info = shared.allreduce().wait(args.timeout_ms)
                bucket.copy_(view)
                return info

            emit("host", codec, *timed(through_host, args.steps, args.warmup, sync))
        finally:
            client.close()

    backend = "nccl" if on_gpu and torch.cuda.device_count() >= 2 else "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{args.dist_port}", rank=rank,
                            world_size=2)
    try:
        def uncompressed():
            bucket.copy_(gradient)
            dist.all_reduce(bucket)

        emit(f"torch-{backend}", "none", *timed(uncompressed, args.steps, args.warmup, sync))
    finally:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gradgate")
    parser.add_argument("--elements", type=int, default=25_000_000)
    parser.add_argument("--codecs", nargs="+", default=["topk:density=0.01", "fp16", "none"])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--timeout-ms", type=int, default=120000)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--placement", choices=["gpu", "auto", "cpu"], default="gpu",
                        help="the gateways' compression.placement for the gpu path")
    parser.add_argument("--segment-bytes", type=int, default=4 << 20,
                        help="the gateways' collective.segment_bytes (0: never cut)")
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--sockets", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--dist-port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank is not None:
        worker(args)
        return 0
    if not args.gradgate:
        parser.error("--gradgate is required")

    from gradgate.cluster import LocalCluster

    work = Path(tempfile.mkdtemp(prefix="gradgate-bucket-bench-"))
    clusters = []
    try:
        for index, codec in enumerate(args.codecs):
            (work / str(index)).mkdir()
            clusters.append(LocalCluster(args.gradgate, nodes=2, workdir=work / str(index),
                                         codec=codec, min_compress_elements=0,
                                         collective_timeout_ms=args.timeout_ms,
                                         log_level="warn",
                                         extra={"compression": {"placement": args.placement},
                                                "collective": {"segment_bytes":
                                                               args.segment_bytes}}).start())
        common = [sys.executable, __file__, "--elements", str(args.elements), "--steps",
                  str(args.steps), "--warmup", str(args.warmup), "--timeout-ms",
                  str(args.timeout_ms), "--device", args.device, "--dist-port",
                  str(free_port()), "--codecs", *args.codecs]
        workers = [subprocess.Popen(
            common + ["--rank", str(rank), "--sockets",
                      *[str(cluster.sockets[rank]) for cluster in clusters]],
            stdout=subprocess.PIPE, text=True) for rank in range(2)]
        outputs = [w.communicate(timeout=3600)[0] for w in workers]
        if any(w.returncode != 0 for w in workers):
            print(f"a worker failed: logs in {work}", file=sys.stderr)
            return 1
        rows = [json.loads(line) for line in outputs[0].splitlines() if line.startswith("{")]
        baseline = next((row["seconds"] for row in rows if row["path"].startswith("torch-")), None)
        for row in rows:
            row["gpu_model"] = gpu_model() if args.device == "cuda" else "none"
            row["placement"] = args.placement if row["path"] == "gpu" else "cpu"
            row["segment_bytes"] = args.segment_bytes
            if baseline:
                row["vs_uncompressed"] = row["seconds"] / baseline
            print(json.dumps(row))
    finally:
        for cluster in clusters:
            cluster.stop()
    return 0


def gpu_model():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
