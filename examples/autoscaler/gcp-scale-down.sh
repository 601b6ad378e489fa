#!/usr/bin/env bash
# Example scale-down hook for Google Cloud (not run by the tests): deletes the given VMs.
# Usage: gcp-scale-down.sh POOL NODE_ID...
set -euo pipefail
shift
[[ $# -gt 0 ]] || exit 0
gcloud compute instances delete "$@" --zone "${GANTRY_GCP_ZONE:-us-central1-a}" --quiet
