#!/usr/bin/env python3
"""Gantry as the scheduler of Kubernetes pods at scale: submit-to-bind latency and the
controller's CPU per pod.

Starts a throw-away kube-apiserver (scripts/kube-scratch.sh), makes NODES GPU Node objects
(8 GPUs each, three models, no kubelet), starts `gantry server --kube-pods` on SQLite
against it, then makes PODS pods (1 or 2 GPUs, `schedulerName: gantry`) as fast as four
connections can, while a watch of the pods notes when each is bound. Prints, as JSON:
  - submit-to-bind latency per pod (from the API server's answer to its create, to the
    watch event that shows spec.nodeName): p50, p90, p99, max, in ms;
  - the time from the first create to the last bind, and pods bound per second;
  - the controller's CPU time (user + system, /proc/PID/stat) over the run, per pod.
The pods fit (NODES x 8 GPUs >= what they ask), so the figures are the scheduler's and the
binder's, not waiting for capacity. docs/BENCHMARKS.md has the figures and the machine.

    python3 bench/kube_pods_bench.py --binary build-rel/gantry [--nodes 1000] [--pods 5000]
"""
import argparse
import hashlib
import http.client
import json
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRODUCTS = ["NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "Tesla-T4"]


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


class Api:
    """One keep-alive HTTPS connection to the API server, as its admin."""

    def __init__(self, url, ca, token):
        u = urllib.parse.urlparse(url)
        self.host, self.port = u.hostname, u.port
        self.ctx = ssl.create_default_context(cafile=ca)
        self.token = token
        self.conn = None

    def call(self, method, path, body=None):
        for attempt in range(3):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=60)
                data = json.dumps(body).encode() if body is not None else None
                self.conn.request(method, path, body=data,
                                  headers={"Authorization": "Bearer " + self.token, "Content-Type": "application/json"})
                r = self.conn.getresponse()
                return r.status, json.loads(r.read() or b"null")
            except (http.client.HTTPException, OSError):
                self.conn = None
                if attempt == 2:
                    raise


def node(name, product):
    gpus = "8"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product}},
            "status": {"capacity": {"nvidia.com/gpu": gpus, "cpu": "64", "memory": "512Gi"},
                       "allocatable": {"nvidia.com/gpu": gpus, "cpu": "62", "memory": "500Gi"}}}


def pod(name, gpus, product):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": "gantry", "automountServiceAccountToken": False,
                     "nodeSelector": {"nvidia.com/gpu.product": product},
                     "containers": [{"name": "main", "image": "pytorch",
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "gantry"))
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=5000)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="gantry-kube-bench-")
    kube_dir = os.path.join(work, "kube")
    server = None
    try:
        out = subprocess.run(["bash", os.path.join(ROOT, "scripts/kube-scratch.sh"), "start", kube_dir],
                             check=True, capture_output=True, text=True).stdout
        url = [w for w in out.split() if w.startswith("https://")][-1]
        ca = os.path.join(kube_dir, "ca.crt")
        token = open(os.path.join(kube_dir, "admin-token")).read().strip()
        api = Api(url, ca, token)
        status, _ = api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "bench"}})
        api.call("POST", "/api/v1/namespaces/bench/serviceaccounts", {"metadata": {"name": "default"}})
        for i in range(args.nodes):
            status, body = api.call("POST", "/api/v1/nodes", node(f"gpu-{i:04}", PRODUCTS[i % 3]))
            assert status == 201, body

        os.makedirs(os.path.join(work, "config"))
        with open(os.path.join(work, "config", "users.yaml"), "w") as f:
            digest = hashlib.sha256(b"bench-admin-token").hexdigest()
            f.write("teams:\n  bench: {}\nusers:\n"
                    f"  - {{name: root, team: ops, role: admin, token_sha256: {digest}}}\n")
        ready = os.path.join(work, "ready")
        log = open(os.path.join(work, "server.log"), "w")
        server = subprocess.Popen(
            [args.binary, "server", "--data-dir", os.path.join(work, "data"), "--config", os.path.join(work, "config"),
             "--db", os.path.join(work, "gantry.db"), "--listen", "127.0.0.1:0", "--ready-file", ready,
             "--kube-api", url, "--kube-ca", ca, "--kube-token-file", os.path.join(kube_dir, "admin-token"),
             "--kube-pods", "--node-timeout", "600"], stdout=log, stderr=subprocess.STDOUT)
        for _ in range(600):
            if os.path.exists(ready):
                break
            time.sleep(0.1)
        gantry = open(ready).read().strip()
        g = urllib.parse.urlparse(gantry)
        for _ in range(600):
            c = http.client.HTTPConnection(g.hostname, g.port, timeout=30)
            c.request("GET", "/v1/nodes?limit=1", headers={"Authorization": "Bearer bench-admin-token"})
            if json.loads(c.getresponse().read()).get("total", 0) >= args.nodes:
                break
            time.sleep(0.2)

        created, bound = {}, {}
        lock = threading.Lock()
        done = threading.Event()

        def watch():
            w = Api(url, ca, token)
            status, listed = w.call("GET", "/api/v1/namespaces/bench/pods")
            version = listed["metadata"]["resourceVersion"]
            conn = http.client.HTTPSConnection(w.host, w.port, context=w.ctx, timeout=600)
            conn.request("GET", f"/api/v1/namespaces/bench/pods?watch=1&resourceVersion={version}",
                         headers={"Authorization": "Bearer " + token})
            r = conn.getresponse()
            while not done.is_set():
                line = r.readline()
                if not line:
                    break
                event = json.loads(line)
                obj = event.get("object", {})
                name = obj.get("metadata", {}).get("name")
                if obj.get("spec", {}).get("nodeName") and name not in bound:
                    with lock:
                        bound[name] = time.monotonic()
                        if len(bound) >= args.pods:
                            done.set()

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        time.sleep(1)
        cpu_before = cpu_seconds(server.pid)
        started = time.monotonic()

        def make(start, step):
            a = Api(url, ca, token)
            for i in range(start, args.pods, step):
                name = f"p-{i:05}"
                status, body = a.call("POST", "/api/v1/namespaces/bench/pods", pod(name, 1 + i % 2, PRODUCTS[i % 3]))
                assert status == 201, body
                with lock:
                    created[name] = time.monotonic()

        makers = [threading.Thread(target=make, args=(k, 4)) for k in range(4)]
        for m in makers:
            m.start()
        for m in makers:
            m.join()
        done.wait(timeout=900)
        ended = time.monotonic()
        cpu_after = cpu_seconds(server.pid)
        latencies = [(bound[n] - created[n]) * 1000 for n in created if n in bound]
        result = {
            "nodes": args.nodes, "pods": args.pods, "bound": len(latencies),
            "latency_ms": {"p50": round(percentile(latencies, 50), 1), "p90": round(percentile(latencies, 90), 1),
                           "p99": round(percentile(latencies, 99), 1), "max": round(max(latencies), 1),
                           "mean": round(statistics.mean(latencies), 1)},
            "first_create_to_last_bind_s": round(max(bound.values()) - started, 2),
            "pods_bound_per_s": round(len(latencies) / (max(bound.values()) - started), 1),
            "creates_per_s": round(args.pods / (max(created.values()) - started), 1),
            "controller_cpu_s": round(cpu_after - cpu_before, 2),
            "controller_cpu_ms_per_pod": round((cpu_after - cpu_before) * 1000 / args.pods, 3),
            "wall_s": round(ended - started, 2),
        }
        print(json.dumps(result, indent=2))
        return 0 if len(latencies) == args.pods else 1
    finally:
        if server:
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                print("gantry server did not stop within 60 s of SIGTERM", file=sys.stderr)
                server.kill()
        subprocess.run(["bash", os.path.join(ROOT, "scripts/kube-scratch.sh"), "stop", kube_dir],
                       capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
