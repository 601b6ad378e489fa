#!/usr/bin/env bash
# Example scale-down hook for AWS EC2 (not run by the tests): terminates the given nodes
# (instance ids). Usage: aws-scale-down.sh POOL NODE_ID...
set -euo pipefail
shift
[[ $# -gt 0 ]] || exit 0
aws ec2 terminate-instances --instance-ids "$@" --output text >/dev/null
