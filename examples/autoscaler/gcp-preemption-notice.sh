#!/usr/bin/env bash
# Example spot notice command for Google Cloud (not run by the tests), for
#   gantry agent --spot-notice-command /etc/gantry/hooks/gcp-preemption-notice.sh
# A Spot or preemptible VM learns of its preemption 30 s ahead: the metadata server's
# instance/preempted turns TRUE. Prints the seconds left and exits 0 then; exit 1 before.
set -uo pipefail
preempted=$(curl -sf -m 2 -H 'Metadata-Flavor: Google' \
  'http://metadata.google.internal/computeMetadata/v1/instance/preempted') || exit 1
[[ $preempted == TRUE ]] || exit 1
echo 30
