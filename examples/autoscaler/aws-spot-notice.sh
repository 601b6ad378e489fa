#!/usr/bin/env bash
# Example spot notice command for AWS (not run by the tests), for
#   gantry agent --spot-notice-command /etc/gantry/hooks/aws-spot-notice.sh
# Asks the instance metadata service (IMDSv2) for a spot interruption; when there is one,
# prints the time it happens ("2026-11-27T10:02:00Z") and exits 0. Exit 1: no notice.
set -uo pipefail
imds=http://169.254.169.254
token=$(curl -sf -m 2 -X PUT "$imds/latest/api/token" -H 'X-aws-ec2-metadata-token-ttl-seconds: 60') || exit 1
action=$(curl -sf -m 2 -H "X-aws-ec2-metadata-token: $token" "$imds/latest/meta-data/spot/instance-action") || exit 1
# {"action": "terminate", "time": "2026-11-27T10:02:00Z"}
time=$(sed -n 's/.*"time" *: *"\([^"]*\)".*/\1/p' <<<"$action")
echo "${time:-120}"
