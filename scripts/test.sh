#!/usr/bin/env bash
# README command 2: install what is missing, build, and run every test under
# AddressSanitizer + UBSan; then build the optimized gantry binary too (its warnings are
# errors at -O2 as well). One sanitized build keeps CI well inside its time.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

echo "== build and run every test under AddressSanitizer + UBSan"
bash scripts/build.sh build-asan -DGANTRY_SANITIZE=ON -DGANTRY_BUILD_BENCH=OFF
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs"

echo "== build the optimized binary (RelWithDebInfo)"
GANTRY_NINJA_FLAGS=gantry bash scripts/build.sh build
./build/gantry --version
