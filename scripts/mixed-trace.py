#!/usr/bin/env python3
"""Writes a synthetic trace (gantry sim --trace-format csv) for examples/clusters/mixed-47.yaml:
six teams, each asking for two or three of the cluster's seven GPU models (one team for
any), Poisson arrivals every 120 s on average, 1-8 GPUs (at most a node of the model),
log-normal run times (median about 30 min, a long tail). About 2.1 times what the cluster
can run: a team whose models are scarce waits behind others, as with no quota file.

Usage: scripts/mixed-trace.py [JOBS] [SEED] > trace.csv        (defaults 3000, 7)
"""
import random
import sys


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    random.seed(int(sys.argv[2]) if len(sys.argv) > 2 else 7)
    types = ["T4", "A10G", "L40S", "V100-32GB", "A100-80GB", "H100-80GB", "H200-141GB", ""]
    teams = {"vision": [4, 5], "nlp": [5, 6], "speech": [3, 4], "rec": [0, 1], "infra": [7], "research": [2, 5, 6]}
    node_size = {"T4": 4, "A10G": 4, "H200-141GB": 3}
    print("id,submit_time,duration_s,num_gpus,gpu_types,team,user")
    t = 0.0
    for i in range(jobs):
        t += random.expovariate(1 / 120)
        team = random.choice(list(teams))
        gpu_type = types[random.choice(teams[team])]
        gpus = min(random.choice([1, 1, 1, 1, 2, 2, 4, 8]), node_size.get(gpu_type, 8))
        duration = int(random.lognormvariate(7.5, 1.5)) + 30
        print(f"j{i},{int(t)},{duration},{gpus},{gpu_type},{team},{team}-u")


if __name__ == "__main__":
    main()
