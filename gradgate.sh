#!/usr/bin/env bash
# gradgate's entry point on a Debian 12 machine: installs what is missing, builds, runs.
#
#   ./gradgate.sh demo [ARGS...]   the main job: gateways on loopback + PyTorch DDP workers training on
#                                  Fashion-MNIST through them (tools/demo/run_demo.py ARGS)
#   ./gradgate.sh test             builds and runs the whole test suite (unit tests, an
#                                  ASan+UBSan build of the libraries' tests, a bounded fuzz run)
#   ./gradgate.sh build            installs dependencies and builds into build/
#
# Environment: GRADGATE_FUZZ_SECONDS (default 60) bounds the fuzz run; JOBS the build parallelism.
set -euo pipefail
cd "$(dirname "$0")"

readonly PACKAGES=(cmake ninja-build g++ clang libclang-rt-14-dev libgtest-dev nlohmann-json3-dev
                   libcli11-dev libyaml-cpp-dev libboost-dev libspdlog-dev prometheus-cpp-dev
                   prometheus iproute2
                   python3-torch python3-numpy python3-setuptools python3-pip libopenblas0-pthread
                   dataset-fashion-mnist)
JOBS=${JOBS:-$(nproc)}

log() { printf '\n== %s\n' "$*" >&2; }

install_dependencies() {
  local missing=()
  for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    local sudo=""
    [[ $(id -u) -eq 0 ]] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# configure_and_build DIR [CMAKE ARGS...]
configure_and_build() {
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja -DGRADGATE_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
}

build() {
  install_dependencies
  log "building build/ (Release)"
  configure_and_build build -DCMAKE_BUILD_TYPE=Release
}

run_tests() {
  build
  log "unit tests"
  ctest --test-dir build --output-on-failure -j "$JOBS"

  log "libraries' tests under AddressSanitizer + UndefinedBehaviorSanitizer"
  configure_and_build build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRADGATE_SANITIZE=ON \
    -DGRADGATE_BUILD_APPS=OFF -DGRADGATE_WITH_CUDA=OFF
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$JOBS"

  log "fuzzing the frame decoders for ${GRADGATE_FUZZ_SECONDS:-60} s"
  configure_and_build build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined" -DGRADGATE_BUILD_FUZZERS=ON -DGRADGATE_BUILD_TESTS=OFF \
    -DGRADGATE_BUILD_APPS=OFF -DGRADGATE_WITH_CUDA=OFF -DGRADGATE_WERROR=OFF
  local corpus
  corpus=$(mktemp -d)
  build-fuzz/tests/fuzz/frame_decode_fuzz -max_total_time="${GRADGATE_FUZZ_SECONDS:-60}" \
    -max_len=4096 -print_final_stats=1 "$corpus" 2>&1 | tail -n 12
  rm -rf "$corpus"
}

case "${1:-}" in
  demo)
    shift
    build
    log "demo: tools/demo/run_demo.py $*"
    exec /usr/bin/python3 tools/demo/run_demo.py --gradgate build/cli/gradgate "$@"
    ;;
  test) run_tests ;;
  build) build ;;
  *)
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
