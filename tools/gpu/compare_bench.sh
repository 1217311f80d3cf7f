#!/usr/bin/env bash
# Compares variants of the kernel bench on one GPU in one run, each variant codec keys added to
# every spec the bench runs (first_pass=staged, say), run from the repository root:
#
#   tools/gpu/compare_bench.sh OUT_DIR NAME[:KEY=VALUE[,KEY=VALUE...]]...
#   e.g. tools/gpu/compare_bench.sh out registers staged:first_pass=staged
#
# The variants run in turns, ROUNDS times (default 3), so that a drift of the GPU's clocks or of the
# copy reference falls on all of them alike; each run takes SPECS (default the threshold and exact
# top-k at 1 %) at SIZES (default 2^28) after 12 warm-up steps. Writes OUT_DIR/NAME.jsonl per
# variant and OUT_DIR/compare.txt, the medians over the rounds (tools/gpu/compare_summary.py).
# The bench comes from KERNELS_BIN (tools/gpu/bundle.sh) or the kernels-only build.
set -euo pipefail
out=${1:?usage: tools/gpu/compare_bench.sh OUT_DIR NAME[:KEY=VALUE,...]...}
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
    keys=""
    [[ $variant == *:* ]] && keys=",${variant#*:}"
    variant_specs=()
    for spec in "${specs[@]}"; do variant_specs+=("$spec$keys"); done
    echo "round $round: $name ${variant_specs[*]}" >&2
    timeout -k 5 "${LIMIT_S:-120}" "$bench" --sizes "${SIZES:-2^28}" \
      --warmup 12 --reps 10 "${variant_specs[@]}" >>"$out/$name.jsonl" ||
      echo "compare_bench: $name failed in round $round (exit $?)" >&2
  done
done
python3 tools/gpu/compare_summary.py "$out" "$@" | tee "$out/compare.txt"
