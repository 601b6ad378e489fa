#!/usr/bin/env bash
# README command 2: install what is missing, build, and run every test under
# AddressSanitizer + UBSan. One sanitized build (at -O1) keeps CI well inside its time; the
# optimized build (-O2, warnings are errors there too) is README command 1's.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

echo "== build and run every test under AddressSanitizer + UBSan"
bash scripts/install-npm.sh
bash scripts/build.sh build-asan -DGANTRY_SANITIZE=ON -DGANTRY_BUILD_BENCH=OFF
# The Kubernetes tests' API server and controller manager: built once per source version,
# then cached.
started=$(date +%s)
echo "kube-apiserver, kube-controller-manager: $(bash scripts/kube-scratch.sh build) ($(($(date +%s) - started)) s)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs"
./build-asan/gantry --version

echo "== fuzz the parsers of outside input (libFuzzer, a short pass over the corpus)"
bash scripts/fuzz.sh "${GANTRY_FUZZ_SECONDS:-20}"
