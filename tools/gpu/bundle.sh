#!/usr/bin/env bash
# Bundles the GPU data path's programs, the kernel tests and the kernel bench for a GPU machine
# that has the CUDA toolkit and Python with torch but no Debian -dev packages
# (tools/gpu/path_check.sh runs the bundle there; tools/gpu/check.sh runs its kernel programs
# with KERNELS_BIN=BUNDLE_DIR/bin instead of building them there):
#
#   tools/gpu/bundle.sh [BUNDLE_DIR]      (default .gpu/bundle; run here, from the repository root)
#
# Builds the gateway, libgradgate and the GPU tests in BUILD_DIR (default build/, configured with
# CUDA as ./gradgate.sh build does) and copies them into BUNDLE_DIR/bin and BUNDLE_DIR/lib with the
# shared libraries they load from this machine, less the C library (the GPU machine's is newer)
# the C++ runtime and CUDA's libraries (the GPU machine's own, newer, serve them).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bundle=${1:-.gpu/bundle}
build=${BUILD_DIR:-build}
programs=(cli/gradgate tests/unit/core/gradgate_core_tests
          tests/integration/ingress/gradgate_ingress_tests tests/tools/gradgate_cuda_test_worker
          tests/gradgate_kernels_tests tests/unit/kernels_cuda/gradgate_kernels_cuda_tests
          bench/kernels/gradgate_kernel_bench)

grep -q 'GRADGATE_HAVE_CUDA 1' "$build/generated/gradgate/config.h" 2>/dev/null ||
  { echo "bundle: $build is not a build with CUDA (./gradgate.sh build makes one)" >&2; exit 2; }
# Each program's target is its file name; libgradgate is gradgate_client.
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target gradgate_client "${programs[@]##*/}"

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
for program in "${programs[@]}"; do cp "$build/$program" "$bundle/bin/"; done
cp -L "$build/client/libgradgate.so" "$bundle/lib/libgradgate.so"
ln -s libgradgate.so "$bundle/lib/libgradgate.so.0"
for file in "$bundle"/bin/* "$bundle/lib/libgradgate.so"; do
  ldd "$file" | awk '$3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
  case $name in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) ;;
    libstdc++.so.* | libgcc_s.so.*) ;;  # the GPU machine's newer ones serve (torch needs them)
    libcuda.so.* | libcudart.so.* | libcublas*.so.* | libgradgate.so*) ;;
    *) cp -L "$path" "$bundle/lib/$name" ;;
  esac
done
du -sh "$bundle"
