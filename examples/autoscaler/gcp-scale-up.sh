#!/usr/bin/env bash
# Example scale-up hook for Google Cloud (not run by the tests): creates COUNT VMs from the
# pool's instance template and prints their names (the node ids their agents register
# with: the template's startup script passes --node-id "$(hostname)"). Spot pools ask for
# Spot VMs; exit 3 when the zone has no capacity.
# Usage: gcp-scale-up.sh POOL COUNT
set -euo pipefail
pool=$1 count=$2
zone=${GANTRY_GCP_ZONE:-us-central1-a}
names=()
for _ in $(seq "$count"); do names+=("gantry-$pool-$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')"); done
spot=()
[[ $pool == *-spot ]] && spot=(--provisioning-model=SPOT --instance-termination-action=DELETE)
if ! out=$(gcloud compute instances create "${names[@]}" --zone "$zone" \
  --source-instance-template "gantry-$pool" "${spot[@]}" --format 'value(name)' 2>&1); then
  echo "$out" >&2
  case $out in
    *ZONE_RESOURCE_POOL_EXHAUSTED* | *STOCKOUT* | *QUOTA_EXCEEDED*) exit 3 ;;
    *) exit 1 ;;
  esac
fi
printf '%s\n' "${names[@]}"
