#!/usr/bin/env bash
# Where an encode's GPU time goes, kernel by kernel, on a GPU machine, from the repository root:
#
#   tools/gpu/kernel_times.sh OUT_DIR [SPEC [SIZE]]   (default topk:density=0.01 at 2^28)
#
# Runs the kernel benchmark on one codec spec and size under Nsight Compute, timing every kernel
# launch (gpu__time_duration, clocks as the GPU runs them), and prints each kernel's launches and
# median, smallest and largest time (tools/gpu/kernel_times.py). The bench program comes from
# KERNELS_BIN (a bundle of tools/gpu/bundle.sh) or BUILD_DIR (default build-gpu, as check.sh
# builds it). Writes ncu.csv and kernel_times.txt into OUT_DIR; at most TIMEOUT_S (120) seconds.
set -u
out=${1:?usage: tools/gpu/kernel_times.sh OUT_DIR [SPEC [SIZE]]}
spec=${2:-topk:density=0.01}
size=${3:-2^28}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
source "$root/tools/gpu/steps.sh"
bench=$(kernel_program bench/kernels/gradgate_kernel_bench)
[[ -n ${KERNELS_BIN:-} ]] && use_toolkit_libraries
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout "${TIMEOUT_S:-120}" "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv \
  --log-file "$out/ncu.csv" "$bench" --sizes "$size" --warmup 2 --reps 3 "$spec" >/dev/null ||
  { echo "kernel_times: ncu or the bench failed (exit $?)" >&2; exit 1; }
python3 "$root/tools/gpu/kernel_times.py" "$out/ncu.csv" | tee "$out/kernel_times.txt"
