#!/usr/bin/env python3
"""Container start overhead: for bare jobs and for container jobs (podman, the busybox test
image of tests/containers/make-test-image.sh), the time from the submit's answer to the
job's first output line, read through the server's log endpoint every 5 ms, on a
standalone server with fake GPUs. Prints a table (median, p90, of N jobs each, one at a
time). Usage: python3 bench/container_start.py [path/to/gantry] [N] (default build/gantry, 20)."""
import json, os, statistics, subprocess, sys, tempfile, time, urllib.request

gantry = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/gantry")
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
image = "localhost/gantry-test:1"
subprocess.run(["bash", f"{root}/tests/containers/make-test-image.sh", image], check=True)
work = tempfile.mkdtemp()
server = subprocess.Popen([gantry, "server", "--standalone", "--fake-gpus", "1x8xA100-80GB", "--listen",
                           "127.0.0.1:0", "--data-dir", f"{work}/data", "--ready-file", f"{work}/ready",
                           "--container-run-options", "--ulimit nproc=4096:4096"],
                          stdout=open(f"{work}/server.log", "w"), stderr=subprocess.STDOUT)
for _ in range(200):
    if os.path.exists(f"{work}/ready") and open(f"{work}/ready").read().strip():
        break
    time.sleep(0.05)
base = open(f"{work}/ready").read().strip()
token = open(f"{work}/data/admin.token").read().strip()


def call(method, path, body=None):
    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return r.read()


def first_line_after_submit(spec):
    t0 = time.monotonic()
    job = json.loads(call("POST", "/v1/jobs", spec))["id"]
    while not call("GET", f"/v1/jobs/{job}/logs"):
        time.sleep(0.005)
    seconds = time.monotonic() - t0
    while json.loads(call("GET", f"/v1/jobs/{job}"))["state"] not in ("succeeded", "failed", "cancelled"):
        time.sleep(0.02)
    return seconds


try:
    rows = []
    for name, extra in (("bare", {}), ("container", {"container_image": image})):
        times = sorted(first_line_after_submit({"gpus": 1, "command": "echo first", **extra}) for _ in range(runs))
        rows.append((name, statistics.median(times), times[int(0.9 * (len(times) - 1))]))
    print(f"{'job':<10} {'median s':>9} {'p90 s':>7}   (submit answered -> first output line, {runs} jobs each)")
    for name, median, p90 in rows:
        print(f"{name:<10} {median:>9.3f} {p90:>7.3f}")
    print(f"container overhead (median): {rows[1][1] - rows[0][1]:.3f} s")
finally:
    server.terminate()
    server.wait()
