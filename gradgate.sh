#!/usr/bin/env bash
# gradgate's entry point on a Debian 12 machine: installs what is missing, builds, runs.
#
#   ./gradgate.sh demo [ARGS...]   the main job: gateways on loopback + PyTorch DDP workers training on
#                                  Fashion-MNIST through them (tools/demo/run_demo.py ARGS)
#   ./gradgate.sh test             builds and runs the whole test suite (unit tests, the
#                                  deployment checks, an ASan+UBSan build of the libraries'
#                                  tests, a bounded fuzz run)
#   ./gradgate.sh build            installs dependencies and builds into build/
#
# Environment: GRADGATE_FUZZ_SECONDS (default 30) bounds the fuzz run; JOBS the build parallelism.
set -euo pipefail
cd "$(dirname "$0")"

# Debian packages, one list per purpose (tools/packages/README.md); the container image reads the
# build and runtime lists too.
readonly PACKAGE_LISTS=(tools/packages/build.txt tools/packages/runtime.txt tools/packages/test.txt
                        tools/packages/deploy.txt)
JOBS=${JOBS:-$(nproc)}

log() { printf '\n== [%d s] %s\n' "$SECONDS" "$*" >&2; }

install_dependencies() {
  local missing
  # Wanted packages (comments and blank lines dropped) that are neither installed nor provided by
  # an installed package (NodeSource's nodejs provides npm and conflicts with Debian's).
  mapfile -t missing < <(comm -23 \
    <(sed 's/#.*//' "${PACKAGE_LISTS[@]}" | tr -s ' \t' '\n' | sed '/^$/d' | sort -u) \
    <(dpkg-query -W -f='${db:Status-Abbrev}|${Package}|${Provides}\n' |
      awk -F'|' '$1 ~ /^ii/ { print $2; n = split($3, provided, /, */)
                              for (i = 1; i <= n; i++) { sub(/ .*/, "", provided[i]); print provided[i] }
                            }' | sort -u))
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

  log "deployment: Helm chart, dashboards, alert rules, image package list"
  tools/deploy/check-deploy.sh

  log "libraries' tests under AddressSanitizer + UndefinedBehaviorSanitizer"
  # Clang, the second compiler: it builds this tree in about half GCC's time, and its UBSan
  # checks more (enum values among them). -O1 -g1 as the sanitizers' documentation advises, with
  # line numbers in every report.
  configure_and_build build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DGRADGATE_SANITIZE=ON \
    -DGRADGATE_BUILD_APPS=OFF -DGRADGATE_WITH_CUDA=OFF
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$JOBS"

  log "fuzzing the frame decoders for ${GRADGATE_FUZZ_SECONDS:-30} s"
  configure_and_build build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined" -DGRADGATE_BUILD_FUZZERS=ON -DGRADGATE_BUILD_TESTS=OFF \
    -DGRADGATE_BUILD_APPS=OFF -DGRADGATE_WITH_CUDA=OFF -DGRADGATE_WERROR=OFF
  local corpus
  corpus=$(mktemp -d)
  build-fuzz/tests/fuzz/frame_decode_fuzz -max_total_time="${GRADGATE_FUZZ_SECONDS:-30}" \
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
