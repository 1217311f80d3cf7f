#!/usr/bin/env bash
# The GPU data path's check on a GPU machine, run from the repository root with the bundle that
# tools/gpu/bundle.sh made (carried as .gpu/bundle, or BUNDLE):
#
#   tools/gpu/path_check.sh OUT_DIR
#
# Runs the in-process test of 2 gateways x 2 workers with buffers in GPU memory (every codec, bit
# for bit against the host path; the placements and their probe), the CUDA IPC ingress test (a
# killed worker leaves no mapping open), the Python hook's CUDA tests (workers as processes sharing
# the GPU), and the 25M-parameter bucket benchmark (bench/gpu/bucket_bench.py), with the codec on
# the GPU and then placed by the gateways' probe (both skipped when SKIP_BENCH is set); then prints
# a summary. Every step has
# a timeout and the whole run a deadline (DEADLINE_S, 500 s). Writes core_gpu.log,
# ingress_cuda.log, python_cuda.log, bucket_bench.jsonl, bucket_bench_auto.jsonl and summary.txt
# into OUT_DIR. Exit status 0
# when every step that ran passed.
set -u
out=${1:?usage: tools/gpu/path_check.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
bundle=$(cd "${BUNDLE:-.gpu/bundle}" && pwd) || exit 2
deadline=$((SECONDS + ${DEADLINE_S:-500}))
steps=$(mktemp)
trap 'rm -f "$steps"' EXIT
source "$root/tools/gpu/steps.sh"
find_gpu

use_toolkit_libraries
export LD_LIBRARY_PATH=$bundle/lib:$LD_LIBRARY_PATH
export GRADGATE_BINARY=$bundle/bin/gradgate GRADGATE_LIBRARY=$bundle/lib/libgradgate.so
export GRADGATE_CUDA_TEST_WORKER=$bundle/bin/gradgate_cuda_test_worker

run version 20 "$out/core_gpu.log" "$bundle/bin/gradgate" version
if ((have_gpu)); then
  run core_gpu 240 "$out/core_gpu.log" "$bundle/bin/gradgate_core_tests" \
    --gtest_filter='*GpuPath*:*GpuPlacement*:*PlacementProbe*'
  run ingress_cuda 90 "$out/ingress_cuda.log" "$bundle/bin/gradgate_ingress_tests" \
    --gtest_filter='*Cuda*'
  run python_cuda 240 "$out/python_cuda.log" python3 tests/python/test_hook.py CudaDeviceTest
  if [[ -n ${SKIP_BENCH:-} ]]; then
    skip bucket_bench SKIP_BENCH
    skip bucket_bench_auto SKIP_BENCH
  else
    run bucket_bench 300 "$out/bucket_bench.jsonl" python3 bench/gpu/bucket_bench.py \
      --gradgate "$bundle/bin/gradgate"
    run bucket_bench_auto 150 "$out/bucket_bench_auto.jsonl" python3 bench/gpu/bucket_bench.py \
      --gradgate "$bundle/bin/gradgate" --placement auto --codecs topk:density=0.01 fp16 --steps 5
  fi
else
  for step in core_gpu ingress_cuda python_cuda bucket_bench bucket_bench_auto; do
    skip "$step" "no GPU"
  done
fi

{
  echo "GPU: ${gpu:-none}"
  sed 's/|/  /g' "$steps"
  grep -h '^{' "$out/bucket_bench.jsonl" "$out/bucket_bench_auto.jsonl" 2>/dev/null
} | tee "$out/summary.txt"
failed=$(grep -c -v '|ok|\|skipped' "$steps")
((failed == 0))
