#!/usr/bin/env bash
# Builds the tiny image the container tests run (no registry needed): Debian's
# busybox-static in a root tree, imported with `podman import` as IMAGE (default
# localhost/gantry-test:1). Idempotent: an image already there is kept.
set -euo pipefail
image=${1:-localhost/gantry-test:1}
podman image exists "$image" && exit 0
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/etc" "$root/tmp"
cp /bin/busybox "$root/bin/busybox"
for tool in sh echo id sleep test touch cat ls env true false kill; do ln -s busybox "$root/bin/$tool"; done
echo "gantry test image" > "$root/etc/gantry-image"
chmod 1777 "$root/tmp"
tar -C "$root" -c . | podman import --quiet - "$image" > /dev/null
