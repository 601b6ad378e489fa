#!/usr/bin/env bash
# A throw-away Kubernetes API server on loopback, for the Kubernetes tests: kube-apiserver
# built from Debian's `kubernetes` source package (no server is packaged for Debian 12) with
# Debian's Go, on Debian's etcd, with its own CA, a token file and RBAC.
#
#   bash scripts/kube-scratch.sh build        # builds once into the cache; prints the binary's path
#   bash scripts/kube-scratch.sh start DIR    # prints the URL (https://127.0.0.1:PORT); DIR/admin-token,
#                                             # DIR/ca.crt and DIR/kubeconfig are the admin's
#   bash scripts/kube-scratch.sh stop DIR     # stops etcd and the server, deletes DIR
#
# With GANTRY_KUBE_CONTROLLERS set (say "job"), start also runs kube-controller-manager with
# those controllers only (built beside the server), so a batch/v1 Job makes its pods.
#
# The build is cached by the source package's version under GANTRY_KUBE_CACHE (default
# /var/cache/gantry-kube), with Go's own cache beside it: the first build takes minutes,
# later ones nothing. The vendored github.com/modern-go/reflect2 1.0.1 crashes the server
# built with Go 1.19 (a SIGSEGV iterating a map on the first object written); Debian's
# golang-github-modern-go-reflect2-dev (1.0.2) replaces it before the build.
set -euo pipefail
action=${1:?build, start or stop}
cache_root=${GANTRY_KUBE_CACHE:-/var/cache/gantry-kube}

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# The source package's version: deb-src for bookworm main is added when the machine has none.
source_version() {
  if ! apt-cache showsrc kubernetes 2>/dev/null | grep -q '^Version:'; then
    local list=/etc/apt/sources.list.d/gantry-kubernetes-src.sources
    local uri
    uri=$(grep -h -m1 '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}')
    printf 'Types: deb-src\nURIs: %s\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "${uri:-http://deb.debian.org/debian}" | as_root tee "$list" >/dev/null
    as_root apt-get update -qq >/dev/null
  fi
  apt-cache showsrc kubernetes | awk '/^Version:/ {print $2; exit}'
}

build() {
  local version dir
  version=$(source_version)
  dir="$cache_root/$version"
  if [ -x "$dir/bin/kube-apiserver" ] && [ -x "$dir/bin/kube-controller-manager" ]; then
    echo "$dir/bin/kube-apiserver"
    return
  fi
  for tool in go rsync jq etcd; do
    command -v "$tool" >/dev/null || { echo "kube-scratch: $tool is missing (run scripts/install-deps.sh)" >&2; exit 2; }
  done
  local reflect2=/usr/share/gocode/src/github.com/modern-go/reflect2
  [ -d "$reflect2" ] || { echo "kube-scratch: $reflect2 is missing (golang-github-modern-go-reflect2-dev)" >&2; exit 2; }
  mkdir -p "$dir"
  local work="$dir/src"
  rm -rf "$work"
  mkdir -p "$work"
  echo "kube-scratch: building kube-apiserver and kube-controller-manager $version into $dir (minutes, once)" >&2
  (cd "$work" && apt-get source -qq kubernetes >/dev/null 2>&1) || {
    echo "kube-scratch: apt-get source kubernetes failed" >&2
    exit 1
  }
  local tree
  tree=$(find "$work" -maxdepth 1 -mindepth 1 -type d -name 'kubernetes-*' | head -n 1)
  local vendored="$tree/vendor/github.com/modern-go/reflect2"
  rm -f "$vendored"/*.go "$vendored"/*.s
  cp "$reflect2"/*.go "$reflect2"/*.s "$vendored"/ 2>/dev/null || cp "$reflect2"/*.go "$vendored"/
  rm -f "$vendored"/*_test.go
  (
    cd "$tree"
    mkdir -p .go/src/k8s.io
    ln -sfn ../../.. .go/src/k8s.io/kubernetes
    cd .go/src/k8s.io/kubernetes
    GOPATH="$tree/.go" GOCACHE="$cache_root/go-build" CGO_ENABLED=0 GOFLAGS=-mod=vendor \
      make WHAT="cmd/kube-apiserver cmd/kube-controller-manager" >"$dir/build.log" 2>&1
  ) || {
    tail -n 30 "$dir/build.log" >&2
    exit 1
  }
  mkdir -p "$dir/bin"
  for binary in kube-apiserver kube-controller-manager; do
    cp "$tree/_output/local/bin/linux/amd64/$binary" "$dir/bin/" 2>/dev/null ||
      cp "$(find "$tree/_output" -name "$binary" -type f | head -n 1)" "$dir/bin/"
  done
  rm -rf "$work"
  echo "$dir/bin/kube-apiserver"
}

# await DIR NAME TRIES CHECK...: polls CHECK every 0.2 s while DIR/NAME.pid runs; on failure
# (it exited, or TRIES ran out) the process is killed and the status is 1.
await() {
  local dir=$1 name=$2 tries=$3
  shift 3
  for _ in $(seq 1 "$tries"); do
    "$@" >/dev/null 2>&1 && return 0
    kill -0 "$(cat "$dir/$name.pid")" 2>/dev/null || break
    sleep 0.2
  done
  kill "$(cat "$dir/$name.pid")" 2>/dev/null || true
  return 1
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start() {
  local dir=${1:?a directory for the server}
  local server
  server=$(build)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  chmod 0700 "$dir"
  # A CA, the server's certificate (127.0.0.1 and the in-cluster names) and the service
  # account signing key.
  (
    cd "$dir"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=gantry-test-kube-ca \
      -keyout ca.key -out ca.crt 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=kube-apiserver \
      -keyout server.key -out server.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n' >san.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext \
      -out server.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >admin-token
    printf '%s,gantry-test-admin,gantry-test-admin,"system:masters"\n' "$(cat admin-token)" >tokens.csv
  )
  local etcd_port peer_port port
  for try in 1 2 3 4 5; do
    etcd_port=$(free_port)
    peer_port=$(free_port)
    etcd --data-dir "$dir/etcd" --listen-client-urls "http://127.0.0.1:$etcd_port" \
      --advertise-client-urls "http://127.0.0.1:$etcd_port" --listen-peer-urls "http://127.0.0.1:$peer_port" \
      --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
      --initial-cluster "default=http://127.0.0.1:$peer_port" --unsafe-no-fsync >"$dir/etcd.log" 2>&1 &
    echo $! >"$dir/etcd.pid"
    await "$dir" etcd 50 curl -fsS "http://127.0.0.1:$etcd_port/health" && break
    [ "$try" = 5 ] && { tail -n 20 "$dir/etcd.log" >&2; exit 1; }
  done
  for try in 1 2 3 4 5; do
    port=$(free_port)
    "$server" --etcd-servers "http://127.0.0.1:$etcd_port" --bind-address 127.0.0.1 --secure-port "$port" \
      --tls-cert-file "$dir/server.crt" --tls-private-key-file "$dir/server.key" --client-ca-file "$dir/ca.crt" \
      --token-auth-file "$dir/tokens.csv" --authorization-mode RBAC \
      --service-account-key-file "$dir/sa.pub" --service-account-signing-key-file "$dir/sa.key" \
      --service-account-issuer https://kubernetes.default.svc --api-audiences https://kubernetes.default.svc \
      --service-cluster-ip-range 10.96.0.0/16 --allow-privileged=true \
      --kubelet-preferred-address-types Hostname --cert-dir "$dir/certs" >"$dir/apiserver.log" 2>&1 &
    echo $! >"$dir/apiserver.pid"
    await "$dir" apiserver 150 curl -fsS --cacert "$dir/ca.crt" -H "Authorization: Bearer $(cat "$dir/admin-token")" \
      "https://127.0.0.1:$port/readyz" && break
    [ "$try" = 5 ] && { tail -n 30 "$dir/apiserver.log" >&2; exit 1; }
  done
  local url="https://127.0.0.1:$port"
  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: scratch
  cluster: {server: "$url", certificate-authority: "$dir/ca.crt"}
users:
- name: admin
  user: {token: "$(cat "$dir/admin-token")"}
contexts:
- name: scratch
  context: {cluster: scratch, user: admin}
current-context: scratch
EOF
  if [ -n "${GANTRY_KUBE_CONTROLLERS:-}" ]; then
    "$(dirname "$server")/kube-controller-manager" --kubeconfig "$dir/kubeconfig" \
      --controllers "$GANTRY_KUBE_CONTROLLERS" --leader-elect=false --port 0 --secure-port 0 \
      --use-service-account-credentials=false >"$dir/controller-manager.log" 2>&1 &
    echo $! >"$dir/controller-manager.pid"
  fi
  echo "$url" >"$dir/url"
  echo "$url"
}

stop() {
  local dir=${1:?the directory start made}
  for p in controller-manager apiserver etcd; do
    if [ -f "$dir/$p.pid" ]; then
      local pid
      pid=$(cat "$dir/$p.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$dir"
}

case "$action" in
  build) build ;;
  start) start "${2:-}" ;;
  stop) stop "${2:-}" ;;
  *)
    echo "kube-scratch: unknown action $action" >&2
    exit 2
    ;;
esac
