#!/usr/bin/env bash
# Compares variants of the kernel bench on one GPU in one run, each variant an environment under
# which gradgate_kernel_bench runs (GRADGATE_TOPK_FIRST_PASS, say), run from the repository root:
#
#   tools/gpu/compare_bench.sh OUT_DIR NAME[:VAR=VALUE[,VAR=VALUE...]]...
#   e.g. tools/gpu/compare_bench.sh out registers staged:GRADGATE_TOPK_FIRST_PASS=staged
#
# The variants run in turns, ROUNDS times (default 3), so that a drift of the GPU's clocks or of the
# copy reference falls on all of them alike; each run takes SPECS (default the threshold and exact
# top-k at 1 %) at SIZES (default 2^28) after 12 warm-up steps. Writes OUT_DIR/NAME.jsonl per
# variant and OUT_DIR/compare.txt, the medians over the rounds (tools/gpu/compare_summary.py).
# The bench comes from KERNELS_BIN (tools/gpu/bundle.sh) or the kernels-only build.
set -euo pipefail
out=${1:?usage: tools/gpu/compare_bench.sh OUT_DIR NAME[:VAR=VALUE,...]...}
shift
(($# > 0)) || { echo "compare_bench: name at least one variant" >&2; exit 2; }
mkdir -p "$out"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
source tools/gpu/steps.sh
bench=$(kernel_program bench/kernels/gradgate_kernel_bench)
[[ -n ${KERNELS_BIN:-} ]] && use_toolkit_libraries
read -r -a specs <<<"${SPECS:-topk:density=0.01 topk:density=0.01,select=exact}"

names=()
for variant in "$@"; do
  name=${variant%%:*}
  [[ $name =~ ^[A-Za-z0-9_-]+$ ]] || { echo "compare_bench: bad variant name '$name'" >&2; exit 2; }
  names+=("$name")
  : >"$out/$name.jsonl"
done
for ((round = 1; round <= ${ROUNDS:-3}; ++round)); do
  for variant in "$@"; do
    name=${variant%%:*}
    assignments=()
    [[ $variant == *:* ]] && IFS=, read -r -a assignments <<<"${variant#*:}"
    echo "round $round: $name ${assignments[*]}" >&2
    env "${assignments[@]}" timeout -k 5 "${LIMIT_S:-120}" "$bench" --sizes "${SIZES:-2^28}" \
      --warmup 12 --reps 10 "${specs[@]}" >>"$out/$name.jsonl" ||
      echo "compare_bench: $name failed in round $round (exit $?)" >&2
  done
done
python3 tools/gpu/compare_summary.py "$out" "${names[@]}" | tee "$out/compare.txt"
