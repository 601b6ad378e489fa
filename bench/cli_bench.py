#!/usr/bin/env python3
"""How fast the CLI starts, and a shell loop of submits as a Slurm user writes one.

Starts a standalone server (SQLite, fake GPUs, its node drained so every job queues), then
measures, with the server running on the same machine:
  - `gantry --version`: N calls, median and p90 in ms (the binary's start alone), and the
    same for `gantryd` beside it (it links everything, as the one binary did before);
  - `gantry submit -g 1 -- true`: N calls one after another, median and p90 in ms;
  - a bash loop `for i in $(seq N); do gantry submit ...; done`: jobs per second;
and the shared libraries each binary loads (ldd). Slurm's `sbatch` loop ran at 217 jobs/s
on this machine class (issue 33); docs/BENCHMARKS.md has the figures.

    python3 bench/cli_bench.py [--binary build/gantry] [--calls 300]
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def timed_calls(argv, env, calls):
    ms = []
    for _ in range(calls):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        ms.append((time.perf_counter() - t0) * 1000)
    return ms


def libraries(path):
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    return len([line for line in out.splitlines() if "=>" in line or line.strip().startswith("/")])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(os.path.dirname(__file__), "..", "build", "gantry"))
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
    gantry = os.path.realpath(args.binary)
    work = tempfile.mkdtemp(prefix="gantry-cli-bench-")
    ready = os.path.join(work, "ready")
    server = subprocess.Popen(
        [gantry, "server", "--standalone", "--fake-gpus", "1x8xA100-80GB", "--data-dir", os.path.join(work, "data"),
         "--listen", "127.0.0.1:0", "--ready-file", ready, "--container-runtime", "/nonexistent"],
        stdout=open(os.path.join(work, "server.log"), "w"), stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            if os.path.exists(ready):
                break
            time.sleep(0.05)
        address = open(ready).read().strip()
        env = dict(os.environ, GANTRY_SERVER=address,
                   GANTRY_TOKEN_FILE=os.path.join(work, "data", "admin.token"))
        subprocess.run([gantry, "drain", "a100-80gb-0"], env=env, check=True, stdout=subprocess.DEVNULL)
        version = timed_calls([gantry, "--version"], env, args.calls)
        daemon = os.path.join(os.path.dirname(gantry), "gantryd")
        # gantryd links everything, as the one binary did before the split: the baseline.
        daemon_version = timed_calls([daemon, "--version"], env, args.calls) if os.path.exists(daemon) else None
        submit = timed_calls([gantry, "submit", "-g", "1", "--", "true"], env, args.calls)
        t0 = time.perf_counter()
        subprocess.run(["bash", "-c", f'for i in $(seq {args.calls}); do "$0" submit -g 1 -- true >/dev/null 2>&1; done',
                        gantry], env=env, check=True)
        loop_s = time.perf_counter() - t0
        print(f"binary: {gantry} ({libraries(gantry)} shared libraries"
              + (f"; gantryd {libraries(daemon)}" if os.path.exists(daemon) else "") + ")")
        print(f"gantry --version: median {statistics.median(version):.2f} ms, p90 {percentile(version, 90):.2f} ms "
              f"({args.calls} calls)")
        if daemon_version:
            print(f"gantryd --version: median {statistics.median(daemon_version):.2f} ms, "
                  f"p90 {percentile(daemon_version, 90):.2f} ms ({args.calls} calls)")
        print(f"gantry submit:    median {statistics.median(submit):.2f} ms, p90 {percentile(submit, 90):.2f} ms "
              f"({args.calls} calls, one after another, node drained: every job queues)")
        print(f"bash submit loop: {args.calls / loop_s:.0f} jobs/s ({args.calls} jobs in {loop_s:.2f} s)")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
