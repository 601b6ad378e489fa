#!/usr/bin/env bash
# Builds the shipped binaries (gantry, gantryd) as a packager would, in each build type with
# each compiler, warnings as errors, and prints one line per variant: what a Release (-O3),
# RelWithDebInfo or Debug build on GCC or clang needs before it is tagged. Build dirs are
# build-variant-<compiler>-<type>, kept between runs.
# Usage: scripts/build-variants.sh [gcc|clang ...] [-- Release RelWithDebInfo Debug]
set -uo pipefail
cd "$(dirname "$0")/.."
compilers=() types=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do compilers+=("$1"); shift; done
[ $# -gt 0 ] && shift
types=("$@")
[ ${#compilers[@]} -eq 0 ] && compilers=(gcc clang)
[ ${#types[@]} -eq 0 ] && types=(Release RelWithDebInfo Debug)
failed=0
for cc in "${compilers[@]}"; do
  case "$cc" in
    gcc) c=gcc cxx=g++ ;;
    clang) c=clang cxx=clang++ ;;
    *) echo "unknown compiler $cc (gcc or clang)" >&2; exit 2 ;;
  esac
  for type in "${types[@]}"; do
    dir="build-variant-$cc-$type"
    mkdir -p "$dir"
    log="$dir/variant.log"
    start=$(date +%s)
    if CC=$c CXX=$cxx cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$type" -DGANTRY_WERROR=ON \
      -DGANTRY_BUILD_TESTS=OFF -DGANTRY_BUILD_BENCH=OFF >"$log" 2>&1 && ninja -C "$dir" gantry gantryd >>"$log" 2>&1; then
      echo "$cc $type: built in $(($(date +%s) - start)) s, $(grep -c 'warning:' "$log") warnings"
    else
      echo "$cc $type: FAILED after $(($(date +%s) - start)) s (see $log):"
      grep -m 5 -E 'error:|warning:' "$log"
      failed=1
    fi
  done
done
exit $failed
