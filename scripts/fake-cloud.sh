#!/usr/bin/env bash
# A fake cloud for node pools, for the tests and the demo: the scale-up hook starts real
# `gantry agent --fake-gpus` processes on loopback, the scale-down hook stops them, and two
# knobs play the cloud's part: no spot capacity, and reclaiming a node.
#
#   fake-cloud.sh up POOL COUNT        start COUNT nodes of POOL; prints their ids
#                                      (exit 3 when DIR/no-capacity/POOL exists)
#   fake-cloud.sh down POOL ID...      stop those nodes
#   fake-cloud.sh reclaim ID SECONDS   a spot reclaim notice now; the node dies SECONDS later
#   fake-cloud.sh nodes                the nodes running now, one per line
#   fake-cloud.sh stop-all             stop every node (and its jobs)
#
# Settings come from the environment (pools.yaml's hook command can set them):
#   FAKE_CLOUD_DIR    the cloud's state: node data, logs, pids (required)
#   GANTRY_BINARY     the gantry binary (default: gantry on PATH)
#   GANTRY_SERVER     the server's address(es) for the agents (required for up)
#   FAKE_CLOUD_TOKEN_FILE  the pool's agent token (users.yaml: role agent, pool: POOL)
#   FAKE_CLOUD_GPUS   GPUs per node, e.g. 2xA100-80GB (default 2xA100-80GB)
#   FAKE_CLOUD_AGENT_ARGS  more agent flags (e.g. --config DIR --run-as agent)
set -euo pipefail

dir=${FAKE_CLOUD_DIR:?FAKE_CLOUD_DIR must name the fake cloud directory}
gantry=${GANTRY_BINARY:-gantry}
mkdir -p "$dir/nodes" "$dir/no-capacity"

valid_name() { [[ $1 =~ ^[A-Za-z0-9._-]{1,100}$ ]] || { echo "fake-cloud: bad name '$1'" >&2; exit 2; }; }
alive() { [[ -f $dir/nodes/$1/pid ]] && kill -0 "$(cat "$dir/nodes/$1/pid")" 2>/dev/null; }

# Kills a node's agent and the jobs it started (their shims name the node's data dir).
kill_node() {
  local id=$1
  if [[ -f $dir/nodes/$id/pid ]]; then kill -9 "$(cat "$dir/nodes/$id/pid")" 2>/dev/null || true; fi
  pkill -9 -f -- "$dir/nodes/$id/data" 2>/dev/null || true
  rm -f "$dir/nodes/$id/pid" "$dir/nodes/$id/notice"
  echo "$(date -u +%FT%T.%3NZ) $id stopped" >>"$dir/events.log"
}

cmd=${1:-}
shift || true
case $cmd in
  up)
    pool=${1:?pool}; count=${2:?count}
    valid_name "$pool"
    [[ $count =~ ^[0-9]+$ && $count -ge 1 && $count -le 100 ]] || { echo "fake-cloud: bad count '$count'" >&2; exit 2; }
    if [[ -e $dir/no-capacity/$pool ]]; then
      echo "fake-cloud: no capacity in pool $pool" >&2
      exit 3
    fi
    : "${GANTRY_SERVER:?GANTRY_SERVER must give the server address}"
    token=${FAKE_CLOUD_TOKEN_FILE:?FAKE_CLOUD_TOKEN_FILE must name the pool token file}
    started=()
    # Like a cloud's instance ids, a node id is never used again.
    n=$(cat "$dir/next-$pool" 2>/dev/null || echo 0)
    while [[ ${#started[@]} -lt $count ]]; do
      id="$pool-$n"
      n=$((n + 1))
      echo "$n" >"$dir/next-$pool"
      mkdir -p "$dir/nodes/$id/data"
      rm -f "$dir/nodes/$id/notice"
      # shellcheck disable=SC2086  # FAKE_CLOUD_AGENT_ARGS is a list of flags
      setsid "$gantry" agent --server "$GANTRY_SERVER" --token-file "$token" --node-id "$id" \
        --data-dir "$dir/nodes/$id/data" --fake-gpus "${FAKE_CLOUD_GPUS:-2xA100-80GB}" --heartbeat 0.5 \
        --spot-notice-file "$dir/nodes/$id/notice" --spot-notice-interval 0.5 ${FAKE_CLOUD_AGENT_ARGS:-} \
        </dev/null >>"$dir/nodes/$id/agent.log" 2>&1 &
      echo $! >"$dir/nodes/$id/pid"
      echo "$(date -u +%FT%T.%3NZ) $id started" >>"$dir/events.log"
      started+=("$id")
    done
    printf '%s\n' "${started[@]}"
    ;;
  down)
    pool=${1:?pool}; shift
    valid_name "$pool"
    for id in "$@"; do
      valid_name "$id"
      kill_node "$id"
    done
    ;;
  reclaim)
    id=${1:?node}; seconds=${2:?seconds}
    valid_name "$id"
    [[ $seconds =~ ^[0-9]+$ ]] || { echo "fake-cloud: bad seconds '$seconds'" >&2; exit 2; }
    alive "$id" || { echo "fake-cloud: node $id is not running" >&2; exit 1; }
    # Whole or not at all: an agent that looked between the creation and the write would
    # read an empty notice (2 minutes).
    echo "$seconds" >"$dir/nodes/$id/notice.new" && mv "$dir/nodes/$id/notice.new" "$dir/nodes/$id/notice"
    echo "$(date -u +%FT%T.%3NZ) $id reclaim notice ($seconds s)" >>"$dir/events.log"
    (sleep "$seconds"; "$0" kill "$id") </dev/null >/dev/null 2>&1 &
    ;;
  kill)
    valid_name "${1:?node}"
    kill_node "$1"
    ;;
  nodes)
    for d in "$dir"/nodes/*/; do
      id=$(basename "$d")
      if alive "$id"; then echo "$id"; fi
    done
    ;;
  stop-all)
    for d in "$dir"/nodes/*/; do
      [[ -d $d ]] && kill_node "$(basename "$d")"
    done
    ;;
  *)
    sed -n '2,22p' "$0" >&2
    exit 2
    ;;
esac
