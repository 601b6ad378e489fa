#!/usr/bin/env bash
# What GPU sharing pays, measured through Gantry on a GPU node: PyTorch jobs doing matrix
# multiplies (a synchronize after each step) run alone on the whole GPU, two time-sliced at
# 0.5, two MPS at 0.5 and four MPS at 0.25, for a latency-bound (512x512) and a
# compute-bound (2048x2048) workload. The fractions are submitted plainly (the site
# default, auto, gives MPS on a node that can run it) or with --sharing time-slice. All
# jobs of a case measure the same window; the table gives each case's steps/s summed over
# its jobs and the ratio to one job alone. Jobs' own SM readings (gpu_use) are recorded.
# Usage: bash scripts/sharing-bench.sh [SECONDS] (default 10); needs build/gantry, an
# NVIDIA GPU and python3 with torch. Writes sharing-bench.md and .json to $OUT (or .).
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
out=${OUT:-.}
mkdir -p "$out"
gantry=./build/gantry
work=$(mktemp -d)
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$work"' EXIT

# A config where time-sliced jobs may share a GPU (the measurement needs it; the shipped
# default keeps them apart).
mkdir -p "$work/config"
sed 's/time_slice_packing: false/time_slice_packing: true/' config/scheduler_config.yaml > "$work/config/scheduler_config.yaml"
$gantry server --standalone --config "$work/config" --data-dir "$work/data" --listen 127.0.0.1:0 \
  --ready-file "$work/ready" > "$out/sharing-bench-server.log" 2>&1 &
server=$!
for _ in $(seq 1 100); do [ -s "$work/ready" ] && break; sleep 0.1; done
[ -s "$work/ready" ] || { echo "the server did not start"; cat "$out/sharing-bench-server.log"; exit 1; }
export GANTRY_SERVER GANTRY_TOKEN_FILE="$work/data/admin.token"
GANTRY_SERVER=$(cat "$work/ready")

cat > "$work/steps.py" <<'PY'
# Multiplies two n x n matrices, synchronizing after each step; counts the steps done in
# the window [start, start + seconds) (wall clock, shared by all jobs of a case). A job
# that was late to the window divides by the part it measured, and says how late it was.
import sys, time, torch
n, start, seconds = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
a = torch.randn(n, n, device="cuda"); b = torch.randn(n, n, device="cuda")
for _ in range(20):
    c = a @ b
torch.cuda.synchronize()
while time.time() < start:  # warm up until the window opens
    c = a @ b; torch.cuda.synchronize()
begin, steps = time.time(), 0
while time.time() < start + seconds:
    c = a @ b; torch.cuda.synchronize(); steps += 1
print(f"steps_per_s {steps / max(1e-3, time.time() - begin):.1f} late_s {max(0, begin - start):.2f}", flush=True)
PY

# run_case NAME COUNT SIZE SUBMIT-ARGS...: COUNT jobs at once; prints the summed steps/s and
# each job's "mode:SM%sm/share%share" read mid-window.
run_case() {
  local name=$1 count=$2 size=$3
  shift 3
  local start ids=() use=""
  start=$(python3 -c "import time; print(time.time() + 12)")
  for i in $(seq 1 "$count"); do
    ids+=("$($gantry submit -o json --name "$name-$i" "$@" -- python3 "$work/steps.py" "$size" "$start" "$seconds" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')")
  done
  sleep "$(python3 -c "import time; print(max(0, $start + $seconds / 2 - time.time()))")"
  for id in "${ids[@]}"; do  # the jobs' own SM readings, mid-window
    use+=$($gantry job "$id" -o json | python3 -c '
import json, sys
j = json.load(sys.stdin)
u = (j.get("gpu_use") or [{}])[0]
print("%s:%s%%sm/%s%%share " % (j.get("sharing", "?"), u.get("sm_util_pct", "-"), u.get("share_used_pct", "-")), end="")')
  done
  local total=0
  for id in "${ids[@]}"; do
    $gantry wait "$id" > /dev/null 2>&1
    local rate
    rate=$($gantry logs "$id" 2>/dev/null | awk '/^steps_per_s/ {print $2}')
    [ -n "$rate" ] || { echo "job $id gave no rate:" >&2; $gantry job "$id" >&2; $gantry logs "$id" >&2; rate=0; }
    total=$(python3 -c "print($total + $rate)")
  done
  echo "$total $use"
}

rows=()
for size in 512 2048; do
  alone=$(run_case "alone-$size" 1 "$size" -g 1)
  ts2=$(run_case "ts2-$size" 2 "$size" --gpu-fraction 0.5 --sharing time-slice)
  mps2=$(run_case "mps2-$size" 2 "$size" --gpu-fraction 0.5)
  mps4=$(run_case "mps4-$size" 4 "$size" --gpu-fraction 0.25)
  rows+=("$size|$alone|$ts2|$mps2|$mps4")
  echo "size $size: alone [$alone] time-slice x2 [$ts2] plain 0.5 x2 [$mps2] plain 0.25 x4 [$mps4]"
done

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
python3 - "$out" "$seconds" "$gpu" "${rows[@]}" <<'PY'
import json, sys
out, seconds, gpu, rows = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
table = ["| workload | one job, whole GPU | 2 jobs time-sliced (0.5) | 2 jobs plain 0.5 (auto) | 4 jobs plain 0.25 (auto) |",
         "|---|---|---|---|---|"]
results = []
for row in rows:
    size, *cases = row.split("|")
    parsed = [c.split(" ", 1) + [""] for c in cases]
    alone = float(parsed[0][0]) or 1.0
    cells = [f"{float(parsed[0][0]):,.0f}"]
    for total, use, _ in parsed[1:]:
        mode = use.split(":", 1)[0] if use else "?"
        cells.append(f"{float(total):,.0f} ({float(total) / alone:.2f}x, {mode})")
    kind = "latency-bound" if size == "512" else "compute-bound"
    table.append(f"| {kind} ({size}x{size}) | " + " | ".join(cells) + " |")
    results.append({"size": int(size), "cases": [{"steps_per_s": float(p[0]), "gpu_use": p[1].split()}
                                                  for p in parsed]})
text = f"GPU: {gpu}; {seconds} s windows; aggregate steps/s of all jobs of a case\n\n" + "\n".join(table) + "\n"
print(text)
open(f"{out}/sharing-bench.md", "w").write(text)
json.dump({"gpu": gpu, "seconds": float(seconds), "results": results}, open(f"{out}/sharing-bench.json", "w"), indent=1)
PY
