#!/usr/bin/env bash
# Elastic capacity on one machine: a server with two node pools (spot and on-demand) on the
# fake cloud (scripts/fake-cloud.sh starts real agents with fake A100s), a burst of jobs
# that grows the pools from nothing, a spot reclaim that moves a checkpointing job to
# another node, and the pools shrinking back; then the timeline, `gantry pools`, the
# hooks' audit trail, the pools' metrics and the month's spot line.
#
#   bash scripts/elastic-demo.sh            # needs scripts/install-deps.sh run once
#   GANTRY_BINARY=build-asan/gantry bash scripts/elastic-demo.sh   # a binary built already (ctest elastic_demo)
# It exits non-zero when a job does not succeed, the reclaimed job does not resume from its
# checkpoint elsewhere, or the pools do not shrink back.
set -euo pipefail
cd "$(dirname "$0")/.."
g=$(bash scripts/gantry-binary.sh)
cloud=$(realpath scripts/fake-cloud.sh)
work=$(mktemp -d /tmp/gantry-elastic-demo.XXXXXX)
chmod 755 "$work"
server_pid=""
cleanup() {
  FAKE_CLOUD_DIR="$work/cloud" "$cloud" stop-all >/dev/null 2>&1 || true
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  echo "(logs were in $work; removed)"
  rm -rf "$work"
}
trap cleanup EXIT
t0=$SECONDS
step() { echo; echo "== [$((SECONDS - t0)) s] $*"; }
wait_for() {  # wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds
  local until=$((SECONDS + $1)) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -ge $until ] && { echo "elastic-demo: timed out waiting for $what" >&2; exit 1; }
    sleep 0.2
  done
}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export GANTRY_SERVER="http://127.0.0.1:$port"

mkdir -p "$work/config" "$work/ckpt"
chmod 777 "$work/ckpt"
me=$(id -un); root=false; [ "$(id -u)" -eq 0 ] && root=true
printf 'teams:\n  vision: {unix_account: %s, allow_root: %s, non_preemptible: true, priorities: [critical, high, medium, low]}\nusers:\n' \
  "$me" "$root" >"$work/config/users.yaml"
token() {  # token NAME TEAM ROLE [--pool POOL]: writes NAME.token and its users.yaml entry
  local out name=$1; shift 1
  out=$("$g" token --user "$name" --team "$1" --role "$2" "${@:3}")
  sed -n 's/^token .*: //p' <<<"$out" >"$work/$name.token"
  grep '^  - ' <<<"$out" >>"$work/config/users.yaml"
}
token alice vision user
token ops ops admin
token agent-spot ops agent --pool spot
token agent-ondemand ops agent --pool ondemand
hook() {  # hook POOL VERB: the fake cloud's command for the pool
  echo "FAKE_CLOUD_DIR=$work/cloud GANTRY_BINARY=$g GANTRY_SERVER=$GANTRY_SERVER FAKE_CLOUD_TOKEN_FILE=$work/agent-$1.token FAKE_CLOUD_AGENT_ARGS='--config $work/config' $cloud $2"
}
cat >"$work/config/pools.yaml" <<YAML
autoscaler: {scale_up_after: 2s, scale_down_after: 5s, register_timeout: 1m, spot_fallback_after: 10s, hook_timeout: 30s}
pools:
  - name: spot
    gpu_type: A100-80GB
    gpus_per_node: 2
    capacity: spot
    min_nodes: 0
    max_nodes: 4
    scale_up_command: "$(hook spot up)"
    scale_down_command: "$(hook spot down)"
  - name: ondemand
    gpu_type: A100-80GB
    gpus_per_node: 2
    min_nodes: 0
    max_nodes: 2
    scale_up_command: "$(hook ondemand up)"
    scale_down_command: "$(hook ondemand down)"
YAML

step "a server with two pools, spot and on demand, both empty"
"$g" server --config "$work/config" --data-dir "$work/data" --db "$work/cluster.db" --listen "127.0.0.1:$port" \
  --node-timeout 4 --ready-file "$work/ready" >"$work/server.log" 2>&1 &
server_pid=$!
wait_for 20 "the server" test -s "$work/ready"
sed -e 's/^/  /' "$work/config/pools.yaml" | head -4
alice=(--token-file "$work/alice.token")
ops=(--token-file "$work/ops.token")

step "a burst: a checkpointing trainer, three 2-GPU jobs, one critical job"
train="s=\$(cat $work/ckpt/step 2>/dev/null || echo 0); echo \"run \$GANTRY_RESTART_COUNT from step \$s\" >> $work/ckpt/runs; trap 'echo \$s > $work/ckpt/step; exit 143' TERM; while [ \$s -lt 60 ]; do s=\$((s+1)); sleep 0.25; done"
trainer=$("$g" submit "${alice[@]}" --name trainer --gpus 2 --gpu-type A100-80GB -- "$train" | sed -n 's/^submitted job \([0-9]*\).*/\1/p')
burst=()
for i in 1 2 3; do
  burst+=("$("$g" submit "${alice[@]}" --name "burst-$i" --gpus 2 --gpu-type A100-80GB -- sleep 8 | sed -n 's/^submitted job \([0-9]*\).*/\1/p')")
done
critical=$("$g" submit "${alice[@]}" --name critical --priority critical --not-preemptible --gpus 2 --gpu-type A100-80GB \
  -- sleep 8 | sed -n 's/^submitted job \([0-9]*\).*/\1/p')
# The queue while the autoscaler's first request runs (nodes start fast here, so it may be
# gone before a look: then the queue as last seen).
for _ in $(seq 40); do
  "$g" queue "${alice[@]}" >"$work/queue-now.txt"
  grep -q "(no job waits)" "$work/queue-now.txt" && break
  cp "$work/queue-now.txt" "$work/queue.txt"
  grep -q "waiting for a node" "$work/queue.txt" && break
  sleep 0.1
done
cut -c1-220 "$work/queue.txt"
running() { [ "$("$g" jobs "${alice[@]}" --state running | tail -n +2 | wc -l)" -eq 5 ]; }
wait_for 60 "every job to run" running
step "every job runs"
"$g" pools "${alice[@]}"
"$g" jobs "${alice[@]}" --state running | cut -c1-150

field() {  # field JOB EXPR: a value of the job's JSON (j)
  "$g" job "${alice[@]}" "$1" -o json | python3 -c "import json,sys; j=json.load(sys.stdin); j=j.get('job', j); print($2)"
}
node_of() { field "$1" '(j.get("placement") or [{}])[0].get("node", "")'; }
reclaimed=$(node_of "$trainer")
step "the cloud reclaims $reclaimed (the trainer's node) with 3 s of notice"
FAKE_CLOUD_DIR="$work/cloud" "$cloud" reclaim "$reclaimed" 3
moved() { n=$(node_of "$trainer"); [ -n "$n" ] && [ "$n" != "$reclaimed" ]; }
wait_for 60 "the trainer to start again elsewhere" moved
echo "  the trainer runs again, on $(node_of "$trainer")"
succeeded() { for j in "$trainer" "${burst[@]}" "$critical"; do [ "$(field "$j" 'j["state"]')" = succeeded ] || return 1; done; }
wait_for 90 "every job to succeed" succeeded
step "every job succeeded"
sed -e 's/^/  /' "$work/ckpt/runs"
grep -q "run 1 from step [1-9]" "$work/ckpt/runs" || { echo "elastic-demo: the trainer did not resume from its checkpoint" >&2; exit 1; }
"$g" job "${alice[@]}" "$trainer" | grep -E "reclaim|stopping|requeued|started" | cut -c1-160

shrunk() { [ "$(FAKE_CLOUD_DIR="$work/cloud" "$cloud" nodes | wc -l)" -eq 0 ]; }
wait_for 60 "the pools to shrink back" shrunk
step "idle nodes went back: both pools are empty again"
"$g" pools "${alice[@]}"

step "the autoscaler's log, its audit trail and metrics"
grep -E "autoscaler|reclaimed" "$work/server.log" | sed -e 's/^/  /'
"$g" audit "${ops[@]}" --limit 200 >"$work/audit.txt"
grep -E "scale_(up|down)" "$work/audit.txt" | head -12 | cut -c1-160 || true
curl -s -H "Authorization: Bearer $(cat "$work/ops.token")" "$GANTRY_SERVER/metrics" >"$work/metrics.txt"
grep -E '^gantry_(pool_(scale_up_calls|scale_down_calls|nodes_returned|scale_up_failures)_total|spot_reclaims_total)' \
  "$work/metrics.txt" | sed -e 's/^/  /' || true
step "this month's bill: spot against on demand"
"$g" report "${ops[@]}" >"$work/report.txt"
grep -iE "spot|on-demand" "$work/report.txt" | head -5 || true
grep -q '^gantry_spot_reclaims_total{pool="spot"} 1' "$work/metrics.txt" ||
  { echo "elastic-demo: the reclaim is not in the metrics" >&2; exit 1; }
echo
echo "elastic-demo: OK in $((SECONDS - t0)) s"
