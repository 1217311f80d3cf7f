#!/usr/bin/env bash
# The one check of the CUDA kernels on a GPU machine, run from the repository root:
#
#   tools/gpu/check.sh OUT_DIR
#
# Builds the kernels alone (GRADGATE_KERNELS_ONLY: CMake, nvcc and a C++ compiler, nothing else;
# or takes the programs from KERNELS_BIN, a bundle made by tools/gpu/bundle.sh),
# runs both kernel test binaries, the kernel benchmark from 2^20 to 2^28 elements with torch.topk
# on the same tensor, compute-sanitizer racecheck on the top-k tests and memcheck on the CUDA
# tests (small sizes; each also on the staged top-k first pass, topk:first_pass=staged), and
# prints a summary.
# GoogleTest is built from its sources, because a GPU machine may have no -dev packages:
# GTEST_SOURCE_DIR, else .gpu/googletest (a copy of /usr/src/googletest shipped with the tree),
# else /usr/src/googletest.
# Every step has a timeout and the whole run a deadline (DEADLINE_S, 400 s); without a GPU the GPU
# steps are skipped. Writes at most 8 files into OUT_DIR: build.log, kernels_tests.log,
# cuda_tests.log, racecheck.log, memcheck.log, bench.jsonl, torch_topk.jsonl, summary.txt. Exit
# status 0 when every step that ran passed.
set -u
out=${1:?usage: tools/gpu/check.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
source "$root/tools/gpu/steps.sh"
build=$(kernels_build_dir)
gtest=${GTEST_SOURCE_DIR:-$root/.gpu/googletest}
[[ -n ${GTEST_SOURCE_DIR:-} || -d $gtest ]] || gtest=/usr/src/googletest
deadline=$((SECONDS + ${DEADLINE_S:-400}))
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
dump=$scratch/gaussian.f32
steps=$scratch/steps  # step|status|seconds, for the summary
: >"$steps"

find_gpu
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

built=0
tests_bin=$(kernel_program tests/gradgate_kernels_tests)
cuda_tests_bin=$(kernel_program tests/unit/kernels_cuda/gradgate_kernels_cuda_tests)
bench_bin=$(kernel_program bench/kernels/gradgate_kernel_bench)
if [[ -n ${KERNELS_BIN:-} ]]; then
  # Programs built elsewhere (tools/gpu/bundle.sh): saves the build's minutes on the GPU machine.
  [[ -x $tests_bin && -x $cuda_tests_bin && -x $bench_bin ]] && built=1
  use_toolkit_libraries
  echo "build|$( ((built)) && echo "ok" || echo "failed (not in $KERNELS_BIN)")|0" >>"$steps"
else
  if run configure 90 "$out/build.log" cmake -S . -B "$build" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DGRADGATE_KERNELS_ONLY=ON -DGRADGATE_WERROR=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGRADGATE_WITH_CUDA=ON -DGRADGATE_GTEST_SOURCE_DIR="$gtest" &&
    run build 200 "$out/build.log" cmake --build "$build" -j "$(nproc)" --target \
      gradgate_kernels_tests gradgate_kernels_cuda_tests gradgate_kernel_bench; then
    built=1
  fi
fi

if ((built)); then
  run kernels_tests 60 "$out/kernels_tests.log" "$tests_bin"
  run cuda_tests 60 "$out/cuda_tests.log" \
    "$cuda_tests_bin"
else
  skip kernels_tests "no build"
  skip cuda_tests "no build"
fi

if ((built && have_gpu)); then
  run bench 120 "$out/bench.jsonl" "$bench_bin" \
    --sizes 2^20,2^22,2^24,2^26,2^28 --dump "$dump"
  if [[ -s $dump ]]; then
    run torch_topk 60 "$out/torch_topk.jsonl" python3 bench/kernels/torch_topk.py "$dump"
  else
    skip torch_topk "no dump"
  fi
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  # The sanitizers slow every kernel by orders of magnitude: not the large sizes nor the 100-step
  # loops.
  large='*1048579*:*ErrorFeedbackInvariantHoldsOver100Steps*:*SeveralTilesPerBlock*'
  # Shared-memory hazards of top-k's ordered compactions (block scan, look-back, tile broadcast):
  # its tests at the small sizes; then the staged first pass, whose stages are reused only when a
  # block has several tiles: one large test, only its first-pass kernel instrumented.
  run racecheck 90 "$out/racecheck.log" "$sanitizer" --tool racecheck --error-exitcode 1 \
    "$cuda_tests_bin" "--gtest_filter=*Topk*-$large:*ThresholdCountsStayInTheWindow*"
  run racecheck_staged 60 "$out/racecheck.log" "$sanitizer" --tool racecheck --error-exitcode 1 \
    --kernel-name kns=collect_kernel "$cuda_tests_bin" \
    "--gtest_filter=*SeveralTilesPerBlock/topk_density_0_01_select_exact"
  # The top-k tests at the small sizes with the staged first pass (its first tiles, the partial
  # last one, the rescans); then every test at the small sizes. Last, so that it takes whatever
  # time is left.
  run memcheck_staged 60 "$out/memcheck.log" "$sanitizer" --tool memcheck --error-exitcode 1 \
    "$cuda_tests_bin" "--gtest_filter=*TopkStagedFirstPass*OnSmallTensors*"
  run memcheck 180 "$out/memcheck.log" "$sanitizer" --tool memcheck --error-exitcode 1 \
    "$cuda_tests_bin" "--gtest_filter=-$large:PowersgdGpuTest.ValuesMatchTheCpuCodecWithinTolerance"
else
  for step in racecheck racecheck_staged memcheck_staged memcheck bench torch_topk; do skip "$step" "$( ((built)) && echo no GPU || echo no build)"; done
fi

{
  echo "GPU: ${gpu:-none}"
  python3 tools/gpu/summarize.py "$out" "$steps" ||
    sed 's/|/  /g' "$steps"
} | tee "$out/summary.txt"
failed=$(grep -c -v '|ok|\|skipped' "$steps")
((failed == 0))
