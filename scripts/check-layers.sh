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
  [server]="core sched billing protocol identity"
  [client]="core protocol billing net"
  [kube]="core protocol server"
  [cli]="core sched billing sim protocol net agent server client kube identity"
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
if [[ $status -eq 0 ]]; then echo "layering: every include points down"; fi
exit $status
