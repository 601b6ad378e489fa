#!/usr/bin/env bash
# README command 2: install what is missing, build, and run every test: once in the
# normal build, once under AddressSanitizer + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

echo "== build and test (RelWithDebInfo)"
bash scripts/build.sh build -DGANTRY_BUILD_BENCH=OFF
ctest --test-dir build --output-on-failure -j "$jobs"

echo "== build and test under AddressSanitizer + UBSan"
bash scripts/build.sh build-asan -DGANTRY_SANITIZE=ON -DGANTRY_BUILD_BENCH=OFF
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs"
