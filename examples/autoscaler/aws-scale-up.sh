#!/usr/bin/env bash
# Example scale-up hook for AWS EC2 (not run by the tests): starts COUNT instances of the
# pool's launch template and prints their instance ids, which the instances' agents use as
# node ids (the template's user data runs, e.g.:
#   gantry agent --server https://gantry.internal:8443 --token-file /etc/gantry/pool.token \
#     --node-id "$(ec2-metadata --instance-id | cut -d' ' -f2)" --data-dir /var/lib/gantry-agent \
#     --spot-notice-command /etc/gantry/hooks/aws-spot-notice.sh
# with /etc/gantry/pool.token holding the pool's agent token: users.yaml role agent, pool: POOL).
# Exit 3 when AWS has no capacity, so a spot pool's jobs fall back to on-demand.
# Usage: aws-scale-up.sh POOL COUNT
set -euo pipefail
pool=$1 count=$2
market=()
[[ $pool == *-spot ]] && market=(--instance-market-options 'MarketType=spot')
if ! out=$(aws ec2 run-instances --launch-template "LaunchTemplateName=gantry-$pool" --count "$count" \
  "${market[@]}" --tag-specifications "ResourceType=instance,Tags=[{Key=gantry-pool,Value=$pool}]" \
  --query 'Instances[].InstanceId' --output text 2>&1); then
  echo "$out" >&2
  case $out in
    *InsufficientInstanceCapacity* | *MaxSpotInstanceCountExceeded* | *SpotMaxPriceTooLow*) exit 3 ;;
    *) exit 1 ;;
  esac
fi
tr '\t' '\n' <<<"$out"
