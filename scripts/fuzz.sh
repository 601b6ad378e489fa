#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each briefly over its
# corpus in tests/fuzz/corpus/<target>. New inputs go to a scratch directory, not the repo;
# a crash leaves its input in build-fuzz/ and fails the run.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
bash scripts/install-deps.sh
targets=(job_spec duration job_arrays jobs_file agent_report http_request kube_objects server_answer identity_tokens
  stream_frames port_answer)
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGANTRY_WERROR=ON -DGANTRY_FUZZ=ON \
    -DGANTRY_BUILD_TESTS=OFF -DGANTRY_BUILD_BENCH=OFF >/dev/null
fi
ninja -C build-fuzz "${targets[@]/#/fuzz_}"
for t in "${targets[@]}"; do
  scratch=$(mktemp -d)
  log="build-fuzz/fuzz_$t.log"
  echo "== fuzz_$t for ${seconds}s (corpus tests/fuzz/corpus/$t)"
  rc=0
  (cd build-fuzz && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "./fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    "$scratch" "../tests/fuzz/corpus/$t") > "$log" 2>&1 || rc=$?
  grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::new_units_added)" "$log" || true
  rm -rf "$scratch"
  if [ "$rc" -ne 0 ]; then
    tail -n 40 "$log"
    echo "fuzz_$t failed (exit $rc); the input that failed is in build-fuzz/"
    exit 1
  fi
done
