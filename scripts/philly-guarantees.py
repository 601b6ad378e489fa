#!/usr/bin/env python3
"""Writes team guarantees for a Philly trace replay: each team (the trace's "cluster"
column) is guaranteed its share of the slice's GPU-hours times the cluster's GPUs, at
least one GPU, rounded down so the guarantees fit the cluster.

Usage: scripts/philly-guarantees.py TRACE.csv GPUS > examples/quotas/philly-512.yaml
"""
import csv
import sys
from collections import defaultdict


def main() -> None:
    trace, gpus = sys.argv[1], int(sys.argv[2])
    used = defaultdict(float)
    with open(trace, newline="") as f:
        for row in csv.DictReader(f):
            used[row["cluster"]] += float(row["gpu_time"])
    total = sum(used.values())
    guarantee = {team: max(1, int(gpus * u / total)) for team, u in used.items()}
    while sum(guarantee.values()) > gpus:  # the "at least one" may overshoot: trim the largest
        biggest = max(guarantee, key=guarantee.get)
        guarantee[biggest] -= 1
    print(f"# Guarantees for replaying {trace.split('/')[-1]} on {gpus} GPUs: each team's share")
    print("# of the slice's GPU-hours, at least 1 GPU (scripts/philly-guarantees.py). Teams may")
    print("# borrow any idle GPU; the fair-share weight equals the guarantee.")
    print("teams:")
    for team in sorted(guarantee, key=lambda t: -guarantee[t]):
        share = used[team] / total
        print(f"  \"{team}\": {{guaranteed: {{any: {guarantee[team]}}}, weight: {guarantee[team]}}}  # {share:.2%}")


if __name__ == "__main__":
    main()
