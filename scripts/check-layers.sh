#!/usr/bin/env bash
# Fails when a library includes a header from a layer it may not depend on: the layers of
# docs/DESIGN.md, checked on every file under src/. Run by ctest (test "layering").
set -euo pipefail
cd "$(dirname "$0")/.."

# Each folder under src/ and the folders its files may include (besides its own).
declare -A allowed=(
  [core]=""
  [sched]="core"
  [billing]="core"
  [sim]="core sched"
  [protocol]="core"
  [net]="core"
  [agent]="core protocol net"
  [identity]="core"
  [state]="core sched billing protocol"
  [server]="core sched billing protocol identity state"
  [client]="core protocol billing net"
  [kube]="core protocol state"
  [cli]="core sched billing sim protocol net agent state server client kube identity"
)

status=0
for dir in src/*/; do
  layer=$(basename "$dir")
  if [[ -z ${allowed[$layer]+set} ]]; then
    echo "layering: src/$layer/ is not a known layer (add it to scripts/check-layers.sh and docs/DESIGN.md)"
    status=1
    continue
  fi
  while IFS= read -r line; do
    file=${line%%:*}
    target=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"$line")
    [[ $target == "$layer" ]] && continue
    if [[ " ${allowed[$layer]} " != *" $target "* ]]; then
      echo "layering: $file includes $target/ (${layer}/ may include: ${allowed[$layer]:-nothing else})"
      status=1
    fi
  done < <(grep -HE '^#include "[a-z_]+/' "$dir"*.h "$dir"*.cc 2>/dev/null || true)
done
# The state machine is driven by what it is given: no HTTP, no store, no threads, no clock,
# files or environment of its own (its time comes from SetTime; whether mail can go, from
# its options).
if grep -nE '#include <(httplib\.h|thread|mutex|shared_mutex|condition_variable|future|atomic|sqlite3\.h|pqxx/[a-z_]+|boost/[a-z_/]+\.hpp|unistd\.h|fstream|filesystem)>|::now\(|\btime\(nullptr\)|\bgetenv\(|::access\(|core/clock\.h' \
  src/state/*.h src/state/*.cc; then
  echo "layering: src/state/ uses HTTP, a store, threads or a clock of its own (above); it is given those"
  status=1
fi
# The node's runs touch the machine only through NodeEnv and the
# JobLauncher, and read time only from the Clock they are given: no files, accounts, /proc,
# processes, threads or wall clock of their own.
if grep -nE '#include <(filesystem|fstream|thread|future|pwd\.h|grp\.h|sys/stat\.h|unistd\.h|httplib\.h)>|"/proc/|\b(popen|fopen|getpw[a-z_]*|getgr[a-z_]*|chown|chmod|geteuid|getenv)\(|::now\(|WallClock\(|core/read_file\.h|core/host\.h' \
  src/agent/node_runs*.h src/agent/node_runs*.cc; then
  echo "layering: src/agent/node_runs* reaches the machine or a clock itself (above); it is given NodeEnv, JobLauncher and Clock"
  status=1
fi
if [[ $status -eq 0 ]]; then echo "layering: every include points down"; fi
exit $status
