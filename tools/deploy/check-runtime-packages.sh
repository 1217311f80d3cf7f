#!/usr/bin/env bash
# Checks that tools/packages/runtime.txt is complete for a binary: every shared library the binary
# needs (its DT_NEEDED entries, and theirs for the libraries this project builds) must come from a
# Debian package named in the list, or from the explicit list of exceptions below.
#
#   tools/deploy/check-runtime-packages.sh BINARY [PACKAGE...]
#
# PACKAGEs are installed next to the list's (the container image adds the CUDA runtime from
# NVIDIA's repository). Prints one line on success; on failure lists every library whose package
# is missing and exits 1. Needs dpkg, ldd and readelf (binutils).
set -euo pipefail

RUNTIME_LIST=$(cd "$(dirname "$0")/../packages" && pwd)/runtime.txt
readonly RUNTIME_LIST

# Libraries that no package of the list provides, by soname, and why none is needed.
declare -rA BUILT_HERE=(
  [libgradgate.so.0]="built by this project, shipped with the binary; its own needs are checked"
)
declare -rA PROVIDED_OUTSIDE_THE_LIST=(
  [libcuda.so.1]="the NVIDIA driver's library: the NVIDIA Container Toolkit mounts it from the host"
  [libcudart.so.13]="the CUDA runtime: NVIDIA's cuda-cudart package (the image installs it)"
  [libcublas.so.13]="cuBLAS (the CUDA codecs): NVIDIA's libcublas package (the image installs it)"
)

usage() {
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# needed_libraries FILE: one "SONAME PATH" line per DT_NEEDED entry of FILE, PATH where the dynamic
# loader finds it ("-" when it finds none).
needed_libraries() {
  local file=$1 soname arrow path
  local -A found=()
  while read -r soname arrow path _; do
    if [[ $arrow == "=>" && $path == /* ]]; then
      found[$soname]=$path
    elif [[ $soname == /* ]]; then # the loader itself: "/lib64/ld-linux-x86-64.so.2 (0x...)"
      found[$(basename "$soname")]=$soname
    fi
  done < <(ldd "$file" 2>/dev/null || true)
  readelf --dynamic "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p' | while read -r soname; do
    echo "$soname ${found[$soname]:--}"
  done
}

# package_of PATH: the Debian package owning PATH. dpkg records a library under /lib or /usr/lib
# (merged /usr), so both spellings of the path and of its target are asked.
package_of() {
  local path=$1 real candidate owner
  real=$(realpath "$path")
  for candidate in "$path" "$real" "${path#/usr}" "${real#/usr}" "/usr$path" "/usr$real"; do
    owner=$(dpkg-query --search "$candidate" 2>/dev/null | grep -v '^diversion' | head -n 1 |
      cut -d: -f1) || true
    [[ -n $owner ]] && echo "$owner" && return 0
  done
  return 1
}

main() {
  (($# >= 1)) || usage
  local binary=$1
  shift
  [[ -f $binary ]] || { echo "check-runtime-packages: $binary: no such file" >&2; exit 2; }

  local -A listed=()
  local -a packages
  local package
  mapfile -t packages < <(sed 's/#.*//; s/[[:space:]]//g; /^$/d' "$RUNTIME_LIST")
  for package in "${packages[@]}" "$@"; do listed[$package]=1; done

  local -a problems=() queue=("$binary")
  local -A seen=() used=()
  local file soname path
  while ((${#queue[@]})); do
    file=${queue[0]}
    queue=("${queue[@]:1}")
    while read -r soname path; do
      [[ -n ${seen[$soname]:-} ]] && continue
      seen[$soname]=1
      if [[ -n ${BUILT_HERE[$soname]:-} ]]; then
        [[ $path == - ]] && problems+=("$soname: built by this project but not found next to $file")
        [[ $path != - ]] && queue+=("$path")
        continue
      fi
      [[ -n ${PROVIDED_OUTSIDE_THE_LIST[$soname]:-} ]] && continue
      if [[ $path == - ]]; then
        problems+=("$soname: not found by the dynamic loader (needed by $file)")
      elif ! package=$(package_of "$path"); then
        problems+=("$soname ($path): no Debian package owns it")
      elif [[ -z ${listed[$package]:-} ]]; then
        problems+=("$soname ($path): its package $package is missing from $RUNTIME_LIST")
      else
        used[$package]=1
      fi
    done < <(needed_libraries "$file")
  done

  if ((${#problems[@]})); then
    echo "check-runtime-packages: $binary needs libraries the runtime list does not provide:" >&2
    printf '  %s\n' "${problems[@]}" >&2
    exit 1
  fi
  echo "runtime packages: $(basename "$binary") needs ${#seen[@]} libraries, all from this" \
    "project or from $(printf '%s\n' "${!used[@]}" | sort | paste -sd' ')"
}

main "$@"
