# Steps of a check script on a GPU machine (sourced by check.sh and path_check.sh): each step runs
# under a timeout cut to the script's deadline and leaves "name|outcome|seconds" in $steps for the
# summary. Needs $deadline (in $SECONDS) and $steps (a file) set by the caller.

# run NAME LIMIT_S LOG CMD...: CMD under a timeout cut to the deadline, its output in LOG.
run() {
  local name=$1 limit=$2 log=$3 left status start
  shift 3
  left=$((deadline - SECONDS))
  ((limit > left)) && limit=$left
  if ((limit < 5)); then
    echo "$name|skipped (deadline)|0" >>"$steps"
    return 1
  fi
  start=$SECONDS
  timeout -k 5 "$limit" "$@" >>"$log" 2>&1
  status=$?
  if ((status == 0)); then
    echo "$name|ok|$((SECONDS - start))" >>"$steps"
  elif ((status == 124 || status == 137)); then
    echo "$name|timed out after ${limit}s|$((SECONDS - start))" >>"$steps"
  else
    echo "$name|failed (exit $status)|$((SECONDS - start))" >>"$steps"
  fi
  return "$status"
}

skip() { echo "$1|skipped ($2)|0" >>"$steps"; }

# The GPU's name in $gpu, and have_gpu=1 when nvidia-smi lists one.
find_gpu() {
  have_gpu=0
  if ! command -v nvidia-smi >/dev/null; then
    gpu="none (no nvidia-smi)"
  elif gpu=$(timeout 20 nvidia-smi -L 2>&1); then
    have_gpu=1
  fi
}

# Puts CUDA's libraries (libcudart, cuBLAS) of the machine's toolkit on LD_LIBRARY_PATH, for
# programs built elsewhere.
use_toolkit_libraries() {
  local toolkit
  toolkit=$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")/../lib64
  LD_LIBRARY_PATH=$toolkit:${LD_LIBRARY_PATH:-}
  export LD_LIBRARY_PATH
}

# The folder of the kernels-only build: BUILD_DIR, by default build-gpu.
kernels_build_dir() { echo "${BUILD_DIR:-build-gpu}"; }

# kernel_program PATH: a kernel program by its path in the kernels-only build: from the bundle in
# KERNELS_BIN (tools/gpu/bundle.sh) when set, else from that build.
kernel_program() {
  if [[ -n ${KERNELS_BIN:-} ]]; then
    echo "$KERNELS_BIN/$(basename "$1")"
  else
    echo "$(kernels_build_dir)/$1"
  fi
}
