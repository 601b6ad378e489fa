#!/usr/bin/env bash
# The engine benchmark before and after a change, side by side on this machine: builds
# gantry_bench (RelWithDebInfo, -O2) at REV and at the working tree (HEAD plus what is not
# committed) in build dirs of their own, runs the two alternately ROUNDS times (each run
# gives the median of its repetitions), and prints the median of each side per benchmark
# with the change. Run it for every change to src/sched and give its output in the note.
#
#   bash scripts/bench-compare.sh REV [FILTER] [ROUNDS]
#   e.g. bash scripts/bench-compare.sh 8a2b98e 'BM_FullCycle|BM_PlaceOne' 2
#
# Build dirs: build-bench-a32 (this tree) and build-bench-REV-a32 (REV's source in
# .bench-src/REV, a git worktree); both are kept, so a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: bench-compare.sh REV [FILTER] [ROUNDS]}
filter=${2:-BM_FullCycle|BM_PlaceOne}
rounds=${3:-2}
repetitions=${GANTRY_BENCH_REPETITIONS:-3}
sha=$(git rev-parse --short=12 "$rev^{commit}")
bash scripts/install-deps.sh

# On x86-64 both sides keep every jump inside a 32-byte block: with Intel's JCC erratum fix
# a jump across one is slow, and the same engine code linked a little differently measured
# up to 8% apart (docs/BENCHMARKS.md). The build dirs' names say so, so dirs made without
# it are not reused.
align_flags=""
suffix=""
if [ "$(uname -m)" = x86_64 ]; then
  align_flags="-Wa,-mbranches-within-32B-boundaries"
  suffix="-a32"
fi

build_bench() {  # SOURCE_DIR BUILD_DIR
  if [ ! -f "$2/build.ninja" ]; then
    cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGANTRY_BUILD_TESTS=OFF \
      -DGANTRY_BUILD_BENCH=ON -DCMAKE_CXX_FLAGS="$align_flags" >/dev/null
  fi
  ninja -C "$2" gantry_bench >/dev/null
}

base_src=.bench-src/$sha
if [ ! -d "$base_src" ]; then
  mkdir -p .bench-src
  git worktree add --detach "$base_src" "$sha" >/dev/null 2>&1
fi
echo "== building gantry_bench at $sha and at the working tree ($(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- src bench CMakeLists.txt || echo '+changes'))"
build_bench "$base_src" "build-bench-$sha$suffix"
build_bench . "build-bench$suffix"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((r = 1; r <= rounds; r++)); do
  for side in base head; do
    bin=build-bench$suffix/gantry_bench
    [ "$side" = base ] && bin=build-bench-$sha$suffix/gantry_bench
    echo "== round $r/$rounds: $side"
    "$bin" --benchmark_filter="$filter" --benchmark_repetitions="$repetitions" \
      --benchmark_report_aggregates_only=true --benchmark_format=json >"$out/$side-$r.json" 2>/dev/null
  done
done

python3 - "$out" "$sha" "$rounds" <<'EOF'
import glob, json, statistics, sys
out, sha, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
def medians(side):
    runs = {}
    unit = {}
    for path in sorted(glob.glob(f"{out}/{side}-*.json")):
        for b in json.load(open(path))["benchmarks"]:
            if b.get("aggregate_name") != "median":
                continue
            name = b["run_name"]
            runs.setdefault(name, []).append(b["real_time"])
            unit[name] = b["time_unit"]
    return {n: (statistics.median(v), v, unit[n]) for n, v in runs.items()}
base, head = medians("base"), medians("head")
print(f"\n{'benchmark':<36} {sha:>14} {'working tree':>14} {'change':>8}   (median of {rounds} runs, each the median of its repetitions)")
for name in sorted(set(base) | set(head), key=lambda n: (n.split('/')[0], [int(x) if x.isdigit() else x for x in n.split('/')[1:]])):
    b, h = base.get(name), head.get(name)
    fmt = lambda m: "-" if m is None else f"{m[0]:.3f} {m[2]}"
    change = f"{(h[0] / b[0] - 1) * 100:+.1f}%" if b and h else ""
    print(f"{name:<36} {fmt(b):>14} {fmt(h):>14} {change:>8}")
EOF
