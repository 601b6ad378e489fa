#!/usr/bin/env python3
"""The simulator's view of GPU sharing: 600 latency-bound fractional jobs (a quarter or a
half of a GPU, 5 to 60 minutes, one every 20 s on average, seed 7) on 2 nodes x 4 H100,
under the shipped settings (plain fractions: MPS), time-slice packed, time-slice alone,
and the same jobs on whole GPUs. Prints makespan, mean JCT, allocation and useful work.
Usage: python3 bench/sharing_sim.py [path/to/gantry] (default build/gantry)."""
import json, os, random, re, subprocess, sys, tempfile

gantry = sys.argv[1] if len(sys.argv) > 1 else "build/gantry"
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
work = tempfile.mkdtemp()
random.seed(7)
rows, t = [], 0.0
for i in range(600):
    t += random.expovariate(1 / 20)
    rows.append((round(t), random.randint(300, 3600), random.choice([0.25, 0.25, 0.5]), f"team{i % 4}"))
with open(f"{work}/fractions.csv", "w") as f:
    f.write("submit_time,duration_s,num_gpus,gpu_fraction,team\n")
    f.writelines(f"{s},{d},1,{fr},{tm}\n" for s, d, fr, tm in rows)
with open(f"{work}/whole.csv", "w") as f:
    f.write("submit_time,duration_s,num_gpus,team\n")
    f.writelines(f"{s},{d},1,{tm}\n" for s, d, fr, tm in rows)
with open(f"{work}/cluster.yaml", "w") as f:
    f.write("node_groups:\n  - {name: h100, count: 2, gpu_type: H100-80GB, gpus_per_node: 4}\n")
shipped = open(f"{root}/config/scheduler_config.yaml").read()
cases = [("shipped (auto: MPS)", "fractions", shipped),
         ("time-slice, packed", "fractions",
          re.sub(r"time_slice_packing: false", "time_slice_packing: true", re.sub(r"default: auto", "default: time-slice", shipped))),
         ("time-slice, alone", "fractions", re.sub(r"default: auto", "default: time-slice", shipped)),
         ("whole GPUs", "whole", shipped)]
print(f"| sharing | makespan (h) | mean JCT (h) | GPU allocation | useful work |\n|---|---|---|---|---|")
for name, trace, config in cases:
    os.makedirs(f"{work}/{name}", exist_ok=True)
    open(f"{work}/{name}/scheduler_config.yaml", "w").write(config)
    subprocess.run([gantry, "sim", "--cluster", f"{work}/cluster.yaml", "--trace", f"{work}/{trace}.csv",
                    "--trace-format", "csv", "--config", f"{work}/{name}", "--policy", "gantry",
                    "--json", f"{work}/{name}/out.json"], check=True, capture_output=True)
    r = json.load(open(f"{work}/{name}/out.json"))
    print(f"| {name} | {r['makespan_s'] / 3600:.1f} | {r['jct_mean_s'] / 3600:.2f} | "
          f"{r['gpu_utilization']:.3f} | {r['useful_gpu_utilization']:.3f} |")
