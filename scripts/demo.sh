#!/usr/bin/env bash
# README command 1: install what is missing, build, and run Gantry's main job: a standalone
# server (SQLite store, in-process agent, fake GPUs) with a mixed workload from two teams,
# showing the queue, placements, usage, logs and a job's history, then a clean stop.
set -euo pipefail
cd "$(dirname "$0")/.."
GANTRY_TARGETS="gantry gantryd" bash scripts/build.sh build  # the binaries it runs, not the tests

g=./build/gantry
data=build/demo-data
rm -rf "$data" "$data.ready"
mkdir -p "$data"
# The demo's two teams run their jobs as you (root only because you are: a cluster names an
# unprivileged unix_account per team and leaves allow_root off; see docs/SECURITY.md).
cp -r examples/demo-config "$data/config"
me=$(id -un); root=false; [ "$(id -u)" -eq 0 ] && root=true
cat > "$data/config/users.yaml" <<EOF
teams:
  vision: {unix_account: $me, allow_root: $root, priorities: [high, medium, low]}
  nlp: {unix_account: $me, allow_root: $root, priorities: [high, medium, low]}
EOF
echo "== gantry server --standalone --fake-gpus 2x4xA100-80GB,1x4xT4,1x1xH100-80GB:mig"
$g server --standalone --fake-gpus 2x4xA100-80GB,1x4xT4,1x1xH100-80GB:mig --data-dir "$data" --listen 127.0.0.1:0 \
  --config "$data/config" \
  --ready-file "$data.ready" > "$data/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do [ -s "$data.ready" ] && break; sleep 0.1; done
cat "$data/server.log"
export GANTRY_SERVER; GANTRY_SERVER=$(cat "$data.ready")
export GANTRY_TOKEN_FILE="$data/admin.token" GANTRY_PROFILES=examples/profiles.yaml
step() { echo; echo "== $*"; }

step "team vision (alice, carol) and team nlp (bob) submit"
$g submit --team vision --user alice -f examples/jobs/train-resnet.yaml
$g submit --team vision --user alice --name notebook --gpu-fraction 0.25 --gpu-memory-gb 10 --estimate 10s \
  -- 'echo "notebook kernel on a $GANTRY_GPU_FRACTION share of $CUDA_VISIBLE_DEVICES"; sleep 5'
$g submit --team nlp --user bob --profile llama-7b-finetune --estimate 8s --name llama-ft \
  -- 'echo "fine-tuning on $CUDA_VISIBLE_DEVICES"; sleep 6; echo saved'
$g submit --team nlp --user bob -f examples/jobs/inference-mps.yaml
$g submit --team vision --user carol -g 4 -t A100-80GB --priority low --estimate 5s --name sweep -- 'sleep 4'
$g submit --team nlp --user bob --project sweeps --jobs-file examples/jobs/jobs.txt
step "refused at once, naming the field"
$g submit --team nlp --user bob -g 9 -- true || true
$g submit --team nlp --user bob -g 1 -t Z100 -- true || true

step "gantry queue: order, and why each job waits"
$g queue
step "gantry nodes: where everything runs"
$g nodes
step "gantry status: GPUs by type, utilization, usage by team"
$g status

step "a few seconds later"
sleep 8
$g jobs
step "gantry logs 1"
$g logs 1
step "gantry job 3: one job's history"
$g job 3
step "the waiting job got its GPUs"
$g jobs --state active || true
step "MIG: a 3g.40gb slice of the H100 in MIG mode; the agent makes the instance first"
mig=$($g submit --team vision --user carol --mig 3g.40gb --name mig-slice -o json -- 'echo "running on $CUDA_VISIBLE_DEVICES"' |
  sed -n 's/^  "id": "\(.*\)",$/\1/p')
sleep 1
$g logs "$mig"
$g nodes | grep -E "NODE|h100"
step "accounting: GPU-hours and cost by team, then by job"
$g usage
$g usage --by job
step "team nlp spent its demo budget (0.004 GPU-hours): its new jobs are held"
$g budgets
held=$($g submit --team nlp --user bob -g 1 -t T4 -o json -- true | sed -n 's/^  "id": "\(.*\)",$/\1/p')
$g queue --explain "$held"
step "a job with a cost limit of 0.002 USD is stopped once it has cost that much"
capped=$($g submit --team vision --user alice -g 1 -t A100-80GB --cost-limit 0.002 -o json -- sleep 60 |
  sed -n 's/^  "id": "\(.*\)",$/\1/p')
sleep 4
$g job "$capped" | head -4
$g alerts
step "the monthly bill (also --format json, csv, or html for a self-contained page)"
$g report
$g report --format html --out "$data/bill.html"
step "the web dashboard: served at $GANTRY_SERVER/ (sign in with the admin token); its history of the cluster"
curl -s "$GANTRY_SERVER/" | grep -o '<title>.*</title>'
curl -s -H "Authorization: Bearer $(cat "$data/admin.token")" "$GANTRY_SERVER/v1/history?range=1h" | head -c 300
echo
step "metrics (Prometheus text, a few lines)"
curl -s "$GANTRY_SERVER/metrics" |
  grep -E '^gantry_(gpus|jobs_total|submit_to_start_seconds_count|month_cost|budget_held)' || true
echo
echo "The server keeps its state in $data/gantry.db; the admin token is in $data/admin.token."
