#!/usr/bin/env bash
# The check on a machine with an NVIDIA GPU (one prepared run, under 10 minutes): builds
# (or uses a carried build/), reads the GPUs through NVML (and DCGM where installed) and
# compares with nvidia-smi, prints MIG instances and NVLink peers as found,
# runs a real CUDA job (a PyTorch matrix multiply) under a standalone server and checks
# that its process, memory and utilization are attributed to it, and measures the cost of
# polling; the job prints its cgroup (per-job cgroups where the machine allows); runs the
# GPU sharing benchmark (scripts/sharing-bench.sh) and checks that plain fractions got MPS
# and that the MPS daemons quit after their jobs; and makes one MPS client fault to see its
# neighbour requeued; runs torchrun from the variables Gantry gives; runs a container job on
# the GPU where podman and a CDI spec exist (GPU_CHECK_SECTIONS=sharing,mps_fault runs only
# those). Reads the
# card only: no MIG job is submitted, so no instance is made; no MIG mode, compute-mode,
# clock, power or persistence change, no reset. Writes its report to $OUT (or ./gpu-check-out).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check-out}
mkdir -p "$out"
log="$out/gpu-check.txt"
exec > >(tee "$log") 2>&1
say() { echo; echo "== $*"; }
fail=0

# start_server DATA_DIR LOG: a standalone server on this machine's GPUs, in the background
# ($server); GANTRY_SERVER and GANTRY_TOKEN_FILE point the CLI at it.
start_server() {
  ./build/gantry server --standalone --data-dir "$1" --listen 127.0.0.1:0 --ready-file "$1/ready" > "$2" 2>&1 &
  server=$!
  for _ in $(seq 1 100); do [ -s "$1/ready" ] && break; sleep 0.1; done
  export GANTRY_SERVER GANTRY_TOKEN_FILE="$1/admin.token"
  GANTRY_SERVER=$(cat "$1/ready")
}

say "machine"
date -u; uname -r; nvidia-smi -L || { echo "no nvidia-smi: not a GPU machine"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total,mig.mode.current,compute_mode --format=csv

say "build"
if [ ! -x build/gantry ]; then
  bash scripts/build.sh build -DGANTRY_BUILD_TESTS=OFF -DGANTRY_BUILD_BENCH=OFF || { echo "build failed"; exit 1; }
fi
./build/gantry --version


# NVML readings against nvidia-smi's; MIG and NVLink as found.
check_nvml() {
say "NVML provider against nvidia-smi"
./build/gantry gpus --provider nvml > "$out/nvml.json" || { echo "NVML provider failed"; fail=1; }
nvidia-smi --query-gpu=uuid,name,memory.total,temperature.gpu,power.draw,utilization.gpu \
  --format=csv,noheader,nounits > "$out/nvidia-smi.csv"
python3 - "$out/nvml.json" "$out/nvidia-smi.csv" <<'PY' || fail=1
import json, sys
nvml = json.load(open(sys.argv[1]))
rows = [[c.strip() for c in l.split(",")] for l in open(sys.argv[2]) if l.strip()]
by_uuid = {s["uuid"]: s for s in nvml["samples"]}
inv = {g["uuid"]: g for g in nvml["inventory"]["gpus"]}
bad = 0
for uuid, name, mem, temp, power, util in rows:
    g, s = inv.get(uuid), by_uuid.get(uuid)
    if not g:
        print("MISSING in NVML:", uuid); bad += 1; continue
    checks = [("name", g["name"] == name, g["name"], name),
              ("memory MiB", abs(g["memory_total_mib"] - float(mem)) <= 64, g["memory_total_mib"], mem),
              ("temperature C", abs(s["temp"] - float(temp)) <= 5, s["temp"], temp),
              ("power W", abs(s["power"] - float(power)) <= max(30, 0.2 * float(power)), s["power"], power)]
    for what, ok, ours, theirs in checks:
        print(f"{uuid[:12]} {what:14} gantry={ours} nvidia-smi={theirs} {'ok' if ok else 'DIFFERS'}")
        bad += 0 if ok else 1
print("NVML and nvidia-smi agree" if bad == 0 else f"{bad} differences")
for g in nvml["inventory"]["gpus"]:  # read only: MIG mode, its instances and NVLink as found
    print(f"GPU {g['index']}: MIG {'on' if g['mig_enabled'] else 'off'}, instances {g['mig']}, "
          f"NVLink peers {g.get('nvlink_peers', [])}")
print("provider:", nvml["provider"], "(+dcgm: DCGM loaded)")
for s in nvml["samples"]:
    print(s["uuid"][:12], "sm_active", s.get("sm_active"), "tensor_active", s.get("tensor_active"),
          "ecc_u_life", s.get("ecc_u_life"), "processes", s["procs"])
sys.exit(1 if bad else 0)
PY
nvidia-smi topo -m || true
}

# What polling the GPUs costs the agent.
check_polling() {
say "polling overhead: 10 s at a 1 s interval"
./build/gantry gpus --provider nvml --measure 10 --interval 1 | python3 -c \
  'import json,sys; p=json.load(sys.stdin)["polling"]; print(json.dumps(p)); sys.exit(0 if p["cpu_share_of_one_core_pct"] < 1 else 1)' \
  || { echo "polling costs 1% of a core or more"; fail=1; }
}

# A real CUDA job under a standalone server, its process and use attributed to it.
check_cuda_job() {
say "a real CUDA job under a standalone server"
data=$(mktemp -d)
start_server "$data" "$out/server.log"
./build/gantry nodes
grep -E 'cgroup|GPUs from' "$out/server.log"
cat > "$data/matmul.py" <<'PY'
import time, torch
assert torch.cuda.is_available(), "no CUDA"
a = torch.randn(8192, 8192, device="cuda"); b = torch.randn(8192, 8192, device="cuda")
print("device", torch.cuda.get_device_name(0), flush=True)
print("cgroup", open("/proc/self/cgroup").read().strip().splitlines()[-1], flush=True)
end = time.time() + 25
n = 0
while time.time() < end:
    c = a @ b; n += 1
torch.cuda.synchronize()
print("matmuls", n, flush=True)
PY
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  ./build/gantry submit -g 1 --name matmul -- python3 "$data/matmul.py"
  sleep 12
  node=$(./build/gantry nodes -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["nodes"][0]["id"])')
  curl -s -H "Authorization: Bearer $(cat "$data/admin.token")" "$GANTRY_SERVER/v1/nodes/$node/gpus" > "$out/gpus-during-job.json"
  python3 - "$out/gpus-during-job.json" <<'PY' || fail=1
import json, sys
gpus = json.load(open(sys.argv[1]))["gpus"]
mine = [g for g in gpus if "1" in g["jobs"]]
assert mine, "job 1 holds no GPU"
t = mine[0].get("telemetry", {})
procs = [p for p in t.get("processes", []) if p["job"] == "1"]
print("GPU", mine[0]["index"], "util", t.get("utilization_pct"), "% memory used", t.get("memory_used_mib"), "MiB;",
      "processes of job 1:", procs)
assert procs, "the job's process is not attributed to it"
assert procs[0]["used_memory_mib"] > 256, "the job's GPU memory is not seen"
assert t.get("utilization_pct", 0) > 30, "the job's utilization is not seen"
print("attribution ok")
PY
  curl -s "$GANTRY_SERVER/metrics" | grep -E '^DCGM_FI_DEV_(GPU_UTIL|FB_USED)' | tee "$out/metrics.txt"
  for _ in $(seq 1 60); do
    state=$(./build/gantry job 1 -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
    [ "$state" = succeeded ] || [ "$state" = failed ] && break; sleep 1
  done
  ./build/gantry job 1; ./build/gantry logs 1
  [ "$state" = succeeded ] || fail=1
else
  echo "PyTorch with CUDA is not installed here: the CUDA job was skipped"; fail=1
fi
kill $server; wait $server 2>/dev/null
}

# The sharing benchmark; plain fractions got MPS; the daemons quit.
check_sharing() {
say "GPU sharing: alone, time-slice x2, plain fractions (auto: MPS here) x2 and x4"
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  OUT="$out" bash scripts/sharing-bench.sh 10 || fail=1
  python3 - "$out/sharing-bench.json" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
bad = 0
for w in r["results"]:
    for case, want in zip(w["cases"][1:], ["time-slice", "mps", "mps"]):
        modes = {u.split(":", 1)[0] for u in case["gpu_use"]}
        ok = modes == {want} and case["steps_per_s"] > 0
        print(f"{w['size']}x{w['size']}: {sorted(modes)} (want {want}), {case['steps_per_s']:.0f} steps/s, "
              f"jobs' readings {case['gpu_use']} {'ok' if ok else 'WRONG'}")
        bad += 0 if ok else 1
sys.exit(1 if bad else 0)
PY
  pgrep -a nvidia-cuda-mps && { echo "an MPS daemon outlived its jobs"; fail=1; } || echo "no MPS daemon left running"
else
  echo "PyTorch with CUDA is not installed here: the sharing benchmark was skipped"; fail=1
fi
}

# An MPS client's fatal fault: two plain halves (MPS here); one triggers a device-side
# assert (an out-of-bounds index). MPS hands the fault to both; Gantry should requeue both
# as a fault (reason "XID ... under MPS"), not fail the healthy one for it.
check_mps_fault() {
  say "an MPS client fault: its neighbour is requeued, not failed"
  if ! python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    echo "PyTorch with CUDA is not installed here: skipped"; fail=1; return
  fi
  local data
  data=$(mktemp -d)
  start_server "$data" "$out/mps-fault-server.log"
  cat > "$data/client.py" <<'PY'
import sys, time, torch
x = torch.zeros(16, device="cuda")
print("mps client", sys.argv[1], "restart", __import__("os").environ.get("GANTRY_RESTART_COUNT"), flush=True)
end = time.time() + (8 if sys.argv[1] == "bad" else 40)
while time.time() < end:
    x += 1; torch.cuda.synchronize(); time.sleep(0.01)
if sys.argv[1] == "bad" and __import__("os").environ.get("GANTRY_RESTART_COUNT") == "0":
    i = torch.tensor([1 << 30], device="cuda")
    x[i] = 1  # out of bounds: a device-side assert, a fatal fault of this MPS client
    torch.cuda.synchronize()
print("done", flush=True)
PY
  local good bad
  good=$(./build/gantry submit -o json --gpu-fraction 0.5 --name good -- python3 "$data/client.py" good |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  bad=$(./build/gantry submit -o json --gpu-fraction 0.5 --name bad -- python3 "$data/client.py" bad |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  ./build/gantry wait "$good" > /dev/null 2>&1
  ./build/gantry wait "$bad" > /dev/null 2>&1
  ./build/gantry job "$good"; ./build/gantry logs "$good"; ./build/gantry job "$bad"; ./build/gantry logs "$bad"
  ./build/gantry nodes -o json | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["nodes"][0].get("gpus")))'
  curl -s "$GANTRY_SERVER/metrics" | grep -E 'mps_fault|xid' | head -5
  dmesg 2>/dev/null | grep -i xid | tail -3
  ./build/gantry job "$good" -o json | python3 -c '
import json, sys
j = json.load(sys.stdin)
print("good job: state", j["state"], "runs", j["runs"], "-",
      "the fault stayed with its own client" if j["runs"] == 1 else "requeued after the fault of the other client")
sys.exit(0 if j["state"] == "succeeded" else 1)' || { echo "the healthy MPS client did not survive its neighbour's fault"; fail=1; }
  kill $server; wait $server 2>/dev/null
}

# torchrun as a user writes it, from the variables Gantry gives (MASTER_ADDR, MASTER_PORT,
# WORLD_SIZE, NODE_RANK, NPROC_PER_NODE): an NCCL all-reduce over the job's GPUs.
check_torchrun() {
  say "torchrun from Gantry's variables: an NCCL all-reduce"
  if ! python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || ! command -v torchrun > /dev/null; then
    echo "PyTorch with CUDA (torchrun) is not installed here: skipped"; return
  fi
  local data id
  data=$(mktemp -d)
  start_server "$data" "$out/torchrun-server.log"
  cat > "$data/allreduce.py" <<'PY'
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
t = torch.ones(1, device="cuda") * (rank + 1)
dist.all_reduce(t)
print(f"rank {rank} of {dist.get_world_size()}: all-reduce {t.item():g}", flush=True)
dist.destroy_process_group()
PY
  # One string after --: the job's shell expands the variables (separate words are quoted).
  id=$(./build/gantry submit -o json -g 1 --name torchrun -- "torchrun --nnodes=\$WORLD_SIZE --node_rank=\$NODE_RANK \
--nproc_per_node=\$NPROC_PER_NODE --master_addr=\$MASTER_ADDR --master_port=\$MASTER_PORT $data/allreduce.py" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  ./build/gantry wait "$id" --timeout 3m || fail=1
  ./build/gantry job "$id" | grep -E "state|master|exit"
  ./build/gantry logs "$id"; ./build/gantry logs --stderr "$id" | tail -5
  kill $server; wait $server 2>/dev/null
}

# A container job on the GPU: runs only where podman and a CDI spec for the GPUs exist.
check_container() {
  say "a container job on the GPU (podman, CDI)"
  if ! command -v podman > /dev/null; then echo "podman is not installed here: skipped"; return; fi
  if ! grep -rqs "nvidia.com/gpu" /etc/cdi /var/run/cdi; then
    echo "no CDI spec for the GPUs (nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml): skipped"; return
  fi
  local data id image=${GPU_CHECK_IMAGE:-docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04}
  data=$(mktemp -d)
  start_server "$data" "$out/container-server.log"
  id=$(./build/gantry submit -o json -g 1 --container-image "$image" -- nvidia-smi -L |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  ./build/gantry wait "$id" --timeout 5m || fail=1
  ./build/gantry job "$id" | grep -E "state|exit"; ./build/gantry logs "$id"; ./build/gantry logs --stderr "$id" | tail -3
  kill $server; wait $server 2>/dev/null
}

sections=${GPU_CHECK_SECTIONS:-nvml,polling,cuda_job,sharing,mps_fault,torchrun,container}
for section in ${sections//,/ }; do "check_$section"; done

say "result"
[ $fail -eq 0 ] && echo "gpu-check: all checks passed" || echo "gpu-check: some checks FAILED"
exit $fail
