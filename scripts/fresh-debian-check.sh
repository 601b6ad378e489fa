#!/usr/bin/env bash
# A newcomer's fresh Debian 12 machine: debootstrap a minbase bookworm chroot, bind /proc,
# /dev and /sys, clone this repository's committed HEAD into /root/gantry (0700, as Debian
# makes /root), copy ../shared beside it when there is one (as CI has it), then run the
# README's two commands there as root, timing each. Unmounts whatever happens.
#
#   bash scripts/fresh-debian-check.sh [WORKDIR]   # default /var/tmp/gantry-fresh
#   GANTRY_FRESH_STEPS="demo" ...                   # only README command 1 ("demo test": both;
#                                                   # "kube": the Kubernetes tests' API server build)
#   GANTRY_FRESH_KEEP=1 ...                         # keep the chroot afterwards (else removed)
#
# The chroot is made anew each run (debootstrap takes a minute or two from a Debian mirror).
# When this machine's network needs extra CA certificates (NODE_EXTRA_CA_CERTS is set, as
# for an intercepting proxy), the host's bundle is copied into the chroot for npm and the
# script says so.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/var/tmp/gantry-fresh}
steps=${GANTRY_FRESH_STEPS:-demo test}
root="$work/chroot"
mirror=${GANTRY_DEBIAN_MIRROR:-http://deb.debian.org/debian}

if [ "$(id -u)" -ne 0 ]; then
  echo "fresh-debian-check: run as root (debootstrap and chroot need it)" >&2
  exit 2
fi
command -v debootstrap >/dev/null || {
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
}

mounted=()
# Unmounts everything under the chroot, deepest first (podman's storage mounts too).
unmount_all() {
  awk -v r="$root" '$2 == r || index($2, r "/") == 1 {print $2}' /proc/mounts | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
}
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
  unmount_all
  if [ -z "${GANTRY_FRESH_KEEP:-}" ] && [ -d "$root" ]; then rm -rf --one-file-system "$root"; fi
}
trap cleanup EXIT

# Whatever an earlier run left mounted or unpacked goes first.
unmount_all
rm -rf --one-file-system "$root"
mkdir -p "$work"

t0=$(date +%s)
echo "== debootstrap --variant=minbase bookworm ($mirror)"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
echo "   $(($(date +%s) - t0)) s"

# /proc, /dev and /sys from the host. A chroot is not a whole machine: podman cannot remount
# its / to unpack an image there, so the container tests skip (they run on this machine and
# in CI); with the chroot bind-mounted onto itself images unpack, but containers still do not
# start in it.
for m in proc dev dev/pts sys; do
  mount --bind "/$m" "$root/$m"
  mounted+=("$root/$m")
done
cp /etc/resolv.conf "$root/etc/resolv.conf"
extra_env=()
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
  cp "$NODE_EXTRA_CA_CERTS" "$root/etc/host-extra-ca.crt"
  extra_env+=("NODE_EXTRA_CA_CERTS=/etc/host-extra-ca.crt")
  echo "   this machine's network needs its CA bundle ($NODE_EXTRA_CA_CERTS): copied into the chroot for npm"
fi

git clone -q --no-local "$src" "$root/root/gantry"
chmod 0700 "$root/root"
if [ -d "$src/../shared" ]; then cp -r "$src/../shared" "$root/root/shared"; fi

run_in_chroot() {
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${extra_env[@]}" \
    bash -c "cd /root/gantry && $1"
}

declare -A took
for step in $steps; do
  case "$step" in
    demo) cmd="bash scripts/demo.sh" ;;
    test) cmd="bash scripts/test.sh" ;;
    kube) cmd="bash scripts/install-deps.sh && bash scripts/kube-scratch.sh build" ;;  # the API server's build alone
    *) echo "fresh-debian-check: unknown step $step" >&2; exit 2 ;;
  esac
  echo "== README command: $cmd (in the chroot, /root/gantry)"
  s=$(date +%s)
  if ! run_in_chroot "$cmd" >"$work/$step.log" 2>&1; then
    tail -n 60 "$work/$step.log" >&2
    echo "fresh-debian-check: '$cmd' failed after $(($(date +%s) - s)) s (log: $work/$step.log)" >&2
    GANTRY_FRESH_KEEP=${GANTRY_FRESH_KEEP:-1}
    exit 1
  fi
  took[$step]=$(($(date +%s) - s))
  tail -n 5 "$work/$step.log"
  echo "   $cmd: ${took[$step]} s"
done
echo "fresh-debian-check: passed ($(for s in $steps; do printf '%s %s s; ' "$s" "${took[$s]}"; done)log in $work)"
