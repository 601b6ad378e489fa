#!/usr/bin/env bash
# Two controllers on one throw-away PostgreSQL, two agents with fake GPUs, a submit storm
# from three CLI clients, and a kill -9 of the leader in the middle of it; then what
# happened: the take-over time, what each side logged, every acknowledged job there exactly
# once, the running jobs adopted (not started again), and the leadership metrics.
#
#   bash scripts/ha-demo.sh           # needs scripts/install-deps.sh run once
#   LEASE=8 bash scripts/ha-demo.sh   # the default lease (the demo uses 3 s)
#   GANTRY_BINARY=build-asan/gantry bash scripts/ha-demo.sh   # a binary built already (ctest ha_demo)
# It exits non-zero when an acknowledged job is missing or doubled, or a long job did not
# run on through the take-over as its one run.
set -euo pipefail
cd "$(dirname "$0")/.."
g=$(bash scripts/gantry-binary.sh)
lease=${LEASE:-3}
work=$(mktemp -d /tmp/gantry-ha-demo.XXXXXX)
servers=""  # both controllers' addresses, once known (the cleanup cancels the long jobs through them)
chmod 755 "$work"
pids=()
cleanup() {
  [ -n "$servers" ] && "$g" cancel --server "$servers" --token-file "$work/alice.token" $(cat "$work/long-jobs" 2>/dev/null) \
    >/dev/null 2>&1 || true
  sleep 1
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  bash scripts/pg-scratch.sh stop "$work/pg"
  echo "(logs were in $work; removed)"
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
step() { echo; echo "== $*"; }
wait_for() {  # wait_for SECONDS COMMAND...: until COMMAND succeeds
  local until=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -ge $until ] && { echo "ha-demo: timed out waiting for: $*" >&2; exit 1; }
    sleep 0.1
  done
}

step "a throw-away PostgreSQL on loopback"
db=$(bash scripts/pg-scratch.sh start "$work/pg")
echo "$db"

# Users: alice submits, an admin reads metrics, one agent token per node.
mkdir -p "$work/config"
me=$(id -un); root=false; [ "$(id -u)" -eq 0 ] && root=true
printf 'teams:\n  vision: {unix_account: %s, allow_root: %s}\nusers:\n' "$me" "$root" >"$work/config/users.yaml"
token() {  # token NAME TEAM ROLE [NODE]: writes NAME.token and its users.yaml entry
  local out
  out=$("$g" token --user "$1" --team "$2" --role "$3" ${4:+--node "$4"})
  sed -n 's/^token .*: //p' <<<"$out" >"$work/$1.token"
  grep '^  - ' <<<"$out" >>"$work/config/users.yaml"
}
token alice vision user
token ops ops admin
token agent-n1 ops agent n1
token agent-n2 ops agent n2

port_a=$(free_port); port_b=$(free_port)
a=http://127.0.0.1:$port_a b=http://127.0.0.1:$port_b
servers=$a,$b
server() {  # server NAME PORT: a controller on the shared store, in the background
  "$g" server --db "$db" --config "$work/config" --data-dir "$work/$1" --listen "127.0.0.1:$2" \
    --leader-lease "$lease" --node-timeout 30 >"$work/$1.log" 2>&1 &
  pids+=($!)
}
step "two controllers on the same store (lease ${lease} s): the first leads, the second stands by"
server ctl-a "$port_a"
wait_for 20 curl -sf "$a/healthz"
pid_a=${pids[-1]}
server ctl-b "$port_b"
wait_for 20 grep -q "standby on" "$work/ctl-b.log"
echo "ctl-a ($a):"; sed 's/^/  /' "$work/ctl-a.log"
echo "ctl-b ($b):"; sed 's/^/  /' "$work/ctl-b.log"
echo "a request to the standby: $(curl -s "$b/v1/jobs")"

step "two agents, 4 fake A100s each, given both controllers' addresses"
for n in n1 n2; do
  "$g" agent --server "$servers" --token-file "$work/agent-$n.token" --node-id "$n" --data-dir "$work/$n" \
    --fake-gpus 4xA100-80GB --heartbeat 0.5 >"$work/$n.log" 2>&1 &
  pids+=($!)
done
export GANTRY_SERVER=$servers GANTRY_TOKEN_FILE=$work/alice.token
wait_for 20 bash -c "[ \$(curl -s -H 'Authorization: Bearer $(cat "$work/ops.token")' $a/v1/nodes | grep -o '\"id\"' | wc -l) -ge 2 ]"
"$g" nodes 2>/dev/null || true

step "four long jobs start (they must run on through the take-over, not start again)"
for i in 1 2 3 4; do
  "$g" submit -o json -g 1 --name "long-$i" -- sleep 600 | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
done >"$work/long-jobs"
wait_for 30 bash -c "[ \$('$g' jobs --state running -o json | grep -o '\"state\": *\"running\"' | wc -l) -ge 4 ]"
"$g" jobs --state running

step "a submit storm: three CLI clients, each job under its own idempotency key"
storm() {  # storm CLIENT: submits until $work/stop exists; logs what was acknowledged
  local n=0
  while [ ! -e "$work/stop" ]; do
    n=$((n + 1))
    if "$g" submit -o json -g 1 --name "storm-$1-$n" --idempotency-key "storm-$1-$n" -- sleep 0.2 \
      >"$work/storm-$1.last" 2>&1; then
      echo "storm-$1-$n" >>"$work/acked"
    else
      echo "storm-$1-$n: $(cat "$work/storm-$1.last")" >>"$work/failed"
    fi
  done
}
touch "$work/acked" "$work/failed"
for c in 1 2 3; do storm "$c" & pids+=($!); done
sleep 3
before=$(wc -l <"$work/acked")
echo "$before jobs acknowledged so far"

step "kill -9 the leader (ctl-a)"
killed=$(date +%s.%N)
{ kill -9 "$pid_a"; wait "$pid_a"; } 2>/dev/null || true
wait_for 60 curl -sf "$b/healthz"
led=$(date +%s.%N)
python3 -c "print(f'ctl-b serves as the leader {$led - $killed:.2f} s after the kill (lease $lease s)')"
sleep 4
touch "$work/stop"
for c in 1 2 3; do wait "${pids[-$c]}" 2>/dev/null || true; done

step "what ctl-b logged"
sed 's/^/  /' "$work/ctl-b.log"
step "what the agents logged"
for n in n1 n2; do echo "$n:"; sed 's/^/  /' "$work/$n.log"; done

step "the storm: acknowledged jobs against the store"
"$g" jobs -o json --limit 10000 >"$work/jobs.json"
python3 - "$work/jobs.json" "$work/acked" "$work/failed" "$work/long-jobs" <<'EOF'
import collections, json, sys
jobs = json.load(open(sys.argv[1]))["jobs"]
acked = [l.strip() for l in open(sys.argv[2]) if l.strip()]
failed = [l.strip() for l in open(sys.argv[3]) if l.strip()]
long_ids = [l.strip() for l in open(sys.argv[4]) if l.strip()]
names = collections.Counter(j["name"] for j in jobs)
missing = [n for n in acked if names[n] == 0]
doubled = [n for n, c in names.items() if c > 1]
print(f"acknowledged: {len(acked)}; in the store: {sum(1 for n in acked if names[n] == 1)} exactly once; "
      f"missing: {len(missing)}; doubled: {len(doubled)}; submits that failed for good: {len(failed)}")
for line in failed[:5]:
    print("  failed:", line)
by_id = {j["id"]: j for j in jobs}
adopted = 0
for i in long_ids:
    j = by_id.get(i, {})
    adopted += j.get("state") == "running" and j.get("runs") == 1
    print(f"long job {i}: {j.get('state')}, runs {j.get('runs')}, started at {j.get('started_at')}")
sys.exit(1 if missing or doubled or failed or adopted != len(long_ids) else 0)
EOF

step "leadership metrics on ctl-b"
curl -s -H "Authorization: Bearer $(cat "$work/ops.token")" "$b/metrics" | grep '^gantry_leader'
