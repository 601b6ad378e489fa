#!/usr/bin/env bash
# Builds the image the Kubernetes manifests run (deploy/kubernetes/Containerfile) from this
# checkout with podman, then runs it as the manifests do: the controller as uid 10001 with a
# read-only root and no capabilities, an agent as root with the DaemonSet's capabilities,
# and a job submitted with the image's own CLI, which must run on the agent and succeed.
#
#   bash scripts/image-check.sh [TAG]     # default gantry:check; needs podman (root)
#   GANTRY_IMAGE_REUSE=1 ...              # run TAG as it is when it exists (no build)
#
# The Containerfile starts from docker.io/library/debian:bookworm(-slim). Where no registry
# can be reached, the script makes both from a debootstrap minbase bookworm (as the fresh
# machine check does) and says so: the build then runs on that instead of Debian's images.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
tag=${1:-gantry:check}
work=$(mktemp -d /var/tmp/gantry-image-check.XXXXXX)
podman_() { podman --runtime runc --cgroup-manager cgroupfs "$@"; }
containers=()
cleanup() {
  for c in "${containers[@]}"; do podman_ rm -f "$c" >/dev/null 2>&1 || true; done
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

for base in bookworm bookworm-slim; do
  image=docker.io/library/debian:$base
  podman image exists "$image" && continue
  if podman pull -q "$image" >/dev/null 2>&1; then continue; fi
  if ! podman image exists docker.io/library/debian:bookworm; then
    echo "== no registry: docker.io/library/debian:bookworm from debootstrap --variant=minbase bookworm"
    command -v debootstrap >/dev/null || { echo "image-check: needs debootstrap or a registry" >&2; exit 2; }
    debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 ||
      { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
    rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb
    tar -C "$work/rootfs" -c . | podman import -q - docker.io/library/debian:bookworm >/dev/null
    rm -rf --one-file-system "$work/rootfs"
  fi
  podman tag docker.io/library/debian:bookworm "$image"
done

if [ -n "${GANTRY_IMAGE_REUSE:-}" ] && podman image exists "$tag"; then
  echo "== $tag exists (GANTRY_IMAGE_REUSE): not built again"
else
  echo "== podman build -t $tag -f deploy/kubernetes/Containerfile ."
  t0=$(date +%s)
  podman_ build --network host -q -t "$tag" -f "$src/deploy/kubernetes/Containerfile" "$src" >"$work/build.log" 2>&1 ||
    { tail -n 40 "$work/build.log" >&2; exit 1; }
  echo "   $(($(date +%s) - t0)) s; $(podman image inspect "$tag" --format '{{.Size}}' | awk '{printf "%.0f MB", $1/1e6}')"
fi

# Explicit limits: in a nested sandbox runc may not set its defaults (nor this shell's own
# process limit: "error setting rlimit type 6"), as the agent's container probe finds too.
limits=(--ulimit "nofile=$(ulimit -Sn):$(ulimit -Hn)" --ulimit nproc=4096:4096)
run() { podman_ run --rm --network host "${limits[@]}" "$@"; }
echo "== the binaries and their libraries"
run "$tag" --version
missing=$(run --entrypoint sh "$tag" -c 'ldd /usr/local/bin/gantryd /usr/local/bin/gantry | grep "not found" || true')
[ -z "$missing" ] || { echo "image-check: libraries missing in the image: $missing" >&2; exit 1; }

# users.yaml as the trial's Secret holds it, plus one agent bound to its node.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
admin=gtk_image_check_admin
agent=gtk_image_check_agent
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
mkdir -p "$work/config" "$work/agent-secret"
cp "$src"/deploy/kubernetes/base/config/*.yaml "$work/config/"
cat >"$work/config/users.yaml" <<EOF
teams:
  ops: {unix_account: gantry}
users:
  - {name: admin, team: ops, role: admin, token_sha256: $(sha $admin)}
  - {name: agent-check, team: ops, role: agent, node: check-node, token_sha256: $(sha $agent)}
EOF
printf %s "$agent" >"$work/agent-secret/token"
chmod 0400 "$work/agent-secret/token"
chmod -R a+rX "$work/config"

echo "== the controller as the Deployment runs it (uid 10001, read-only root, no capabilities)"
podman_ run -d --name gantry-check-controller --network host "${limits[@]}" --user 10001:10001 --read-only --cap-drop ALL \
  --security-opt no-new-privileges --tmpfs /var/lib/gantry:rw,mode=1777 -v "$work/config:/etc/gantry:ro" \
  "$tag" server --listen "127.0.0.1:$port" --db /var/lib/gantry/gantry.db --config /etc/gantry \
  --data-dir /var/lib/gantry --node-timeout 30 >/dev/null
containers+=(gantry-check-controller)
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fsS "http://127.0.0.1:$port/readyz" || { podman logs gantry-check-controller >&2; exit 1; }
echo

echo "== an agent as the DaemonSet runs it (root, its capabilities, read-only root; fake GPUs here)"
podman_ run -d --name gantry-check-agent --network host "${limits[@]}" --read-only --cap-drop ALL \
  --cap-add SYS_ADMIN,SETUID,SETGID,CHOWN,FOWNER,DAC_OVERRIDE,KILL --tmpfs /tmp --tmpfs /var/lib/gantry-agent \
  -v "$work/config:/etc/gantry:ro" -v "$work/agent-secret:/var/run/secrets/gantry:ro" \
  "$tag" agent --server "http://127.0.0.1:$port" --node-id check-node --address 127.0.0.1 \
  --token-file /var/run/secrets/gantry/token --data-dir /var/lib/gantry-agent --config /etc/gantry \
  --fake-gpus 1x2xT4 >/dev/null
containers+=(gantry-check-agent)

cli() {
  run --entrypoint /usr/local/bin/gantry -e GANTRY_SERVER="http://127.0.0.1:$port" -e GANTRY_TOKEN="$admin" \
    "$tag" "$@"
}
for _ in $(seq 1 100); do
  cli nodes 2>/dev/null | grep -q check-node && break
  sleep 0.2
done
cli nodes
echo "== a job through the image's CLI"
id=$(cli submit -o json -g 1 -- 'echo "hello from $(id -un) on $CUDA_VISIBLE_DEVICES"' |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
state=
for _ in $(seq 1 150); do
  state=$(cli job -o json "$id" | python3 -c 'import json, sys; print(json.load(sys.stdin)["state"])')
  case $state in succeeded | failed | cancelled) break ;; esac
  sleep 0.2
done
cli logs "$id"
if [ "$state" != succeeded ]; then
  echo "image-check: job $id ended $state" >&2
  podman logs gantry-check-agent >&2
  exit 1
fi
echo "image-check: $tag built and ran a job ($id: $state)"
