#!/usr/bin/env bash
# The scheduling sweep of issue 20: the shared Philly slice replayed on 256, 384, 512 and
# 1,024 GPUs, with run-time estimates exact and off by up to 25% and 50% (seeds 1-3), for
# policies backfill, gantry and las. Team guarantees are each team's share of the slice's
# GPU-hours (scripts/philly-guarantees.py), with the two smallest teams left out of the
# quota file so they run on default_team (1 GPU guaranteed). Prints one table row per
# cell (the mean over seeds) and writes every run's JSON under OUT; runs already there are
# kept (delete OUT to rerun). "util q" is gantry's GPU utilization while jobs waited, "util u"
# the same over what waiting jobs could have used. "evictions" counts a job evicted twice twice, "jobs evicted" once.
#
#   bash scripts/sweep.sh [TRACE] [OUT]      # GANTRY=build/gantry SWEEP_SIZES="256 512" to narrow
#   SWEEP_CONFIG=DIR runs every policy with that config directory (gantry sim --config)
set -euo pipefail
cd "$(dirname "$0")/.."
trace=${1:-traces/philly/philly-2017-09-04_2017-11-14.csv}
out=${2:-build/sweep}
gantry=${GANTRY:-build/gantry}
config=${SWEEP_CONFIG:-}  # a config directory for every run (default: the built-in one)
sizes=${SWEEP_SIZES:-256 384 512 1024}
errors=${SWEEP_ERRORS:-0 0.25 0.5}
seeds=${SWEEP_SEEDS:-1 2 3}
mkdir -p "$out"
start=$(date +%s)

runs=()
for gpus in $sizes; do
  nodes=$((gpus / 8))
  sed "s/count: 64/count: $nodes/; s/philly-512/philly-$gpus/" examples/clusters/philly-512.yaml >"$out/cluster-$gpus.yaml"
  {
    python3 scripts/philly-guarantees.py "$trace" "$gpus" | head -n -2
    echo "default_team: {guaranteed: {any: 1}, weight: 1}"
  } >"$out/quotas-$gpus.yaml"
  for error in $errors; do
    for seed in $([ "$error" = 0 ] && echo 1 || echo "$seeds"); do
      runs+=("$gpus $error $seed")
    done
  done
done

run_one() {
  read -r gpus error seed <<<"$1"
  json="$out/run-$gpus-$error-$seed.json"
  [ -s "$json" ] && return 0
  "$gantry" sim ${config:+--config "$config"} --cluster "$out/cluster-$gpus.yaml" --trace "$trace" \
    --quotas "$out/quotas-$gpus.yaml" \
    --compare backfill,gantry,las --estimate-error "$error" --seed "$seed" --json "$json.tmp" >/dev/null
  mv "$json.tmp" "$json"
}
export -f run_one
export out trace gantry config
printf '%s\n' "${runs[@]}" | xargs -P "$(nproc)" -I{} bash -c 'run_one "{}"'

python3 - "$out" $sizes <<'PY'
import glob, json, sys, collections
out, sizes = sys.argv[1], sys.argv[2:]
cells = collections.defaultdict(list)
for path in sorted(glob.glob(f"{out}/run-*.json")):
    _, gpus, error, seed = path[:-5].rsplit("/", 1)[1].split("-")
    cells[(int(gpus), float(error))].append(json.load(open(path))["policies"])
def mean(rs, key):
    return sum(r[key] for r in rs) / len(rs)
print("| GPUs | error | util q | util u | policy | JCT mean (s) | vs backfill | delay p95 (s) | vs backfill | max starvation (s) | evictions | jobs evicted |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for (gpus, error), seeds in sorted(cells.items()):
    by = {p: [s[p] for s in seeds] for p in ("backfill", "gantry", "las")}
    queued = [r["gpu_utilization_when_queued"] for r in by["gantry"] if r["gpu_utilization_when_queued"] is not None]
    util_q = sum(queued) / len(queued) if queued else float("nan")
    usable = [r.get("gpu_utilization_when_queued_usable") for r in by["gantry"]]
    usable = [u for u in usable if u is not None]
    util_u = sum(usable) / len(usable) if usable else float("nan")
    b_jct, b_p95 = mean(by["backfill"], "jct_mean_s"), mean(by["backfill"], "queue_delay_p95_s")
    for p in ("backfill", "gantry", "las"):
        jct, p95 = mean(by[p], "jct_mean_s"), mean(by[p], "queue_delay_p95_s")
        starve = max(r["max_team_starvation_s"] for r in by[p])
        evicted = mean(by[p], "preemptions") / by[p][0]["jobs_total"]
        jobs_evicted = mean(by[p], "jobs_preempted") / by[p][0]["jobs_total"]
        vs = lambda x, b: f"{100 * (x / b - 1):+.1f}%" if b > 0 else ("+0.0%" if x == 0 else "n/a")
        print(f"| {gpus} | {error:g} | {util_q:.2f} | {util_u:.3f} | {p} | {jct:,.0f} | {vs(jct, b_jct)} | {p95:,.0f} | "
              f"{vs(p95, b_p95)} | {starve:,.0f} | {100 * evicted:.2f}% | {100 * jobs_evicted:.2f}% |")
PY
echo "sweep: $(( $(date +%s) - start )) s on $(nproc) cores"
