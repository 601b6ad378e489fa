#!/usr/bin/env bash
# Gantry as the scheduler of Kubernetes pods, on one machine: a throw-away API server
# (scripts/kube-scratch.sh), three GPU Node objects, two namespaces as two teams, and pods
# made with kubectl as a Kubernetes user makes them (schedulerName: gantry). Shows a pod
# bound with the GPUs Gantry chose, a gang of two bound whole, two half-GPU pods on one
# GPU, a pod too large to fit with Gantry's reason in `kubectl describe`, `gantry queue`,
# and an urgent pod preempting one that a PodDisruptionBudget guards (the eviction is
# refused, then done past --kube-eviction-wait). No kubelet runs here: the script ends pods
# as a kubelet would.
#
#   bash scripts/kube-pods-demo.sh            # needs scripts/install-deps.sh run once; the first
#                                             # run builds kube-apiserver (minutes, then cached)
#   GANTRY_BINARY=build-asan/gantry bash scripts/kube-pods-demo.sh   # a binary built already
# It exits non-zero when a pod is not bound, bound in part, or not told why it waits.
set -euo pipefail
cd "$(dirname "$0")/.."
g=$(bash scripts/gantry-binary.sh)
work=$(mktemp -d /tmp/gantry-kube-pods-demo.XXXXXX)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  bash scripts/kube-scratch.sh stop "$work/kube" >/dev/null 2>&1 || true
  echo "(logs were in $work; removed)"
  rm -rf "$work"
}
trap cleanup EXIT
t0=$SECONDS
step() { echo; echo "== [$((SECONDS - t0)) s] $*"; }
fail() { echo "kube-pods-demo: $*" >&2; tail -n 20 "$work/server.log" >&2 || true; exit 1; }
wait_for() {  # wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds
  local until=$((SECONDS + $1)) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -ge $until ] && fail "timed out waiting for $what"
    sleep 0.2
  done
}

step "a Kubernetes API server on loopback (kube-apiserver and etcd; no kubelet)"
url=$(bash scripts/kube-scratch.sh start "$work/kube")
export KUBECONFIG=$work/kube/kubeconfig
k() { kubectl "$@"; }
echo "  $url"

step "three GPU nodes as GPU Feature Discovery labels them, two namespaces, a PriorityClass"
for spec in a100-0:NVIDIA-A100-SXM4-80GB:8 a100-1:NVIDIA-A100-SXM4-80GB:8 t4-0:Tesla-T4:2; do
  IFS=: read -r name product gpus <<<"$spec"
  k create -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata:
  name: $name
  labels: {nvidia.com/gpu.present: "true", nvidia.com/gpu.product: $product}
status:
  capacity: {nvidia.com/gpu: "$gpus", cpu: "64", memory: 512Gi}
  allocatable: {nvidia.com/gpu: "$gpus", cpu: "62", memory: 500Gi}
YAML
done
for ns in vision nlp; do
  k create namespace "$ns" >/dev/null
  k -n "$ns" create serviceaccount default >/dev/null  # no controller manager makes it here
done
k create priorityclass urgent --value=100000 >/dev/null
k get nodes -L nvidia.com/gpu.product

step "Gantry, the scheduler of pods that name it (--kube-pods)"
mkdir -p "$work/config"
printf 'teams:\n  vision: {priorities: [critical, high, medium, low]}\n  nlp: {priorities: [critical, high, medium, low]}\n' \
  >"$work/config/users.yaml"
token=$("$g" token --user ops --team ops --role admin)
sed -n 's/^token .*: //p' <<<"$token" >"$work/ops.token"
printf 'users:\n' >>"$work/config/users.yaml"
grep '^  - ' <<<"$token" >>"$work/config/users.yaml"
# Victims have 5 s to checkpoint; a pod need not have run 10 minutes to be preempted.
# Shares time-slice one GPU together (nodes without a Gantry agent run no MPS daemon).
sed -e 's/grace_period: 120s/grace_period: 5s/' -e 's/min_runtime: 10m/min_runtime: 0s/' \
  -e 's/time_slice_packing: false/time_slice_packing: true/' \
  config/scheduler_config.yaml >"$work/config/scheduler_config.yaml"
grep -q 'time_slice_packing: true' "$work/config/scheduler_config.yaml" || fail "config/scheduler_config.yaml changed"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export GANTRY_SERVER="http://127.0.0.1:$port" GANTRY_TOKEN_FILE="$work/ops.token"
"$g" server --config "$work/config" --data-dir "$work/data" --db "$work/gantry.db" --listen "127.0.0.1:$port" \
  --ready-file "$work/ready" --kube-api "$url" --kube-ca "$work/kube/ca.crt" \
  --kube-token-file "$work/kube/admin-token" --kube-pods --kube-priority-class urgent=high \
  --kube-eviction-wait 8 >"$work/server.log" 2>&1 &
server_pid=$!
wait_for 30 "the server" test -s "$work/ready"
wait_for 30 "Gantry's nodes" bash -c "[ \$('$g' nodes | grep -c -E 'a100-|t4-') -eq 3 ]"
"$g" nodes | cut -c1-120

pod() {  # pod NAMESPACE NAME GPUS|share PRODUCT [METADATA LINES] [SPEC LINES]
  local limits="limits: {nvidia.com/gpu: \"$3\"}"
  [ "$3" = share ] && limits=""
  k -n "$1" create -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $2
${5:-}
spec:
  schedulerName: gantry
  automountServiceAccountToken: false
  nodeSelector: {nvidia.com/gpu.product: $4}
  containers: [{name: main, image: pytorch, resources: {$limits}}]
${6:-}
YAML
}
node_of() { k -n "$1" get pod "$2" -o jsonpath='{.spec.nodeName}'; }
bound() { [ -n "$(node_of "$1" "$2")" ]; }

step "vision: a 2-GPU pod"
pod vision train 2 NVIDIA-A100-SXM4-80GB
wait_for 30 "vision/train to be bound" bound vision train
k -n vision get pod train -o jsonpath='{.spec.nodeName}{"  GPUs "}{.metadata.annotations.gantry\.io/visible-devices}{"  job "}{.metadata.annotations.gantry\.io/job}{"\n"}'

step "nlp: a gang of two 4-GPU pods (gantry.io/gang), bound whole or not at all"
for i in 0 1; do
  pod nlp "ddp-$i" 4 NVIDIA-A100-SXM4-80GB \
    '  labels: {gantry.io/gang: ddp}
  annotations: {gantry.io/gang-min-members: "2"}'
done
wait_for 30 "the gang" bash -c "[ -n \"\$(kubectl -n nlp get pod ddp-0 -o jsonpath='{.spec.nodeName}')\" ] && [ -n \"\$(kubectl -n nlp get pod ddp-1 -o jsonpath='{.spec.nodeName}')\" ]"
[ "$(node_of nlp ddp-0)" != "$(node_of nlp ddp-1)" ] || fail "the gang's members share a node"
k -n nlp get pods -o custom-columns='POD:.metadata.name,NODE:.spec.nodeName,RANK:.metadata.annotations.gantry\.io/gang-rank,GPUS:.metadata.annotations.gantry\.io/gpus'

step "two half-GPU pods (gantry.io/gpu-fraction: \"0.5\") share one T4"
pod vision half-a share Tesla-T4 '  annotations: {gantry.io/gpu-fraction: "0.5"}'
pod nlp half-b share Tesla-T4 '  annotations: {gantry.io/gpu-fraction: "0.5"}'
wait_for 30 "the half-GPU pods" bash -c "[ -n \"\$(kubectl -n vision get pod half-a -o jsonpath='{.spec.nodeName}')\" ] && [ -n \"\$(kubectl -n nlp get pod half-b -o jsonpath='{.spec.nodeName}')\" ]"
a=$(k -n vision get pod half-a -o jsonpath='{.metadata.annotations.gantry\.io/gpus}')
b=$(k -n nlp get pod half-b -o jsonpath='{.metadata.annotations.gantry\.io/gpus}')
echo "  half-a: GPU $a of $(node_of vision half-a); half-b: GPU $b of $(node_of nlp half-b)"
[ "$a" = "$b" ] && [ "$(node_of vision half-a)" = "$(node_of nlp half-b)" ] || fail "the shares are not on one GPU"

step "a pod that cannot fit now (8 A100s on one node): it waits, and says why where Kubernetes users look"
pod vision big 8 NVIDIA-A100-SXM4-80GB
told() { k -n vision get pod big -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}' | grep -q .; }
wait_for 30 "vision/big's reason" told
k -n vision describe pod big | sed -n '/^Conditions:/,/^Volumes:/p;/^Events:/,$p' | cut -c1-220
echo "  gantry queue says the same:"
"$g" queue | cut -c1-160
k -n vision delete pod big --wait=false >/dev/null

step "a PodDisruptionBudget guards nlp's gang; vision's urgent pod (PriorityClass urgent) needs a node's 8 A100s"
# The kubelet would say the gang runs (the API server evicts a Pending pod whatever its budget).
for p in ddp-0 ddp-1; do
  curl -fsS --cacert "$work/kube/ca.crt" -H "Authorization: Bearer $(cat "$work/kube/admin-token")" -X PATCH \
    -H 'Content-Type: application/merge-patch+json' -d '{"status": {"phase": "Running"}}' \
    "$url/api/v1/namespaces/nlp/pods/$p/status" >/dev/null
done
k -n nlp create -f - >/dev/null <<YAML
apiVersion: policy/v1beta1
kind: PodDisruptionBudget
metadata: {name: keep-ddp}
spec:
  minAvailable: 2
  selector: {matchLabels: {gantry.io/gang: ddp}}
YAML
pod vision urgent 8 NVIDIA-A100-SXM4-80GB "" "  priorityClassName: urgent"
deleting() { [ -n "$(k -n "$1" get pod "$2" -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null)" ]; }
events() { k -n nlp get events --field-selector "involvedObject.name=$1" -o jsonpath='{range .items[*]}{.reason}{": "}{.message}{"\n"}{end}'; }
refused() { events ddp-0 | grep -q '^EvictionRefused'; }
wait_for 30 "the gang's eviction to be refused" refused
deleting nlp ddp-0 && fail "the budget was not honoured"
echo "  the gang is preempted; its budget refuses the eviction for now:"
events ddp-0 | cut -c1-220 | sed 's/^/    /'
wait_for 30 "the eviction past --kube-eviction-wait (8 s)" deleting nlp ddp-0
echo "  after 8 s Gantry deletes it all the same, saying so:"
events ddp-0 | grep '^EvictionOverridden' | cut -c1-220 | sed 's/^/    /'
# What a kubelet does once the victims' containers stopped: the pods go.
for p in ddp-0 ddp-1; do k -n nlp delete pod "$p" --grace-period=0 --force >/dev/null 2>&1 || true; done
wait_for 30 "vision/urgent to be bound" bound vision urgent
echo "  vision/urgent is bound to $(node_of vision urgent)"

step "what Gantry billed so far, by team (pods and bare jobs share one ledger)"
"$g" usage --by team | cut -c1-120
echo
echo "kube-pods-demo: every pod was bound whole, shared, told why it waited, or preempted as it should be"
