#!/usr/bin/env bash
# Installs the Debian 12 packages Gantry needs to build and test; idempotent and quiet
# when everything is already there. Run as root (or with sudo available).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config clang-format
  nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libfmt-dev libspdlog-dev libboost1.74-dev
  libsqlite3-dev libpqxx-dev postgresql libcpp-httplib-dev libssl-dev libhowardhinnant-date-dev tzdata
  libcjose-dev libjansson-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  curl procps openssl clang libclang-rt-14-dev
  python3 python3-venv groff-base
  podman runc catatonit busybox-static
  chromium prometheus
  # The Kubernetes tests: kube-apiserver built from Debian's source (scripts/kube-scratch.sh)
  # with Debian's Go, on Debian's etcd.
  golang-go rsync jq dpkg-dev golang-github-modern-go-reflect2-dev etcd-server
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Node.js and npm run the browser tests only; a machine that has them another way (say
# NodeSource's nodejs, which bundles npm) keeps its own.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then missing+=(nodejs npm); fi
# kubectl the same way (Debian's kubernetes-client, unless another is installed).
if ! command -v kubectl >/dev/null; then missing+=(kubernetes-client); fi
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
