#!/usr/bin/env bash
# The sweep of scripts/sweep.sh on windows of a trace rather than the whole of it: the
# Philly slice cut into WINDOWS runs of consecutive jobs of equal count (default 4, about
# 16,000 jobs each, loads 0.7 to 1.2 of 512 GPUs), each replayed with its own guarantees on
# SWEEP_SIZES GPUs (default 512) at every estimate error and seed of sweep.sh. A window
# is a load the whole slice never shows for long (it overloads 512 GPUs for weeks), as a
# site's own month would be. Prints one table per window; runs are kept under OUT.
#
#   bash scripts/sweep-windows.sh [TRACE] [OUT]   # WINDOWS=4 SWEEP_SIZES=512 GANTRY=build/gantry
set -euo pipefail
cd "$(dirname "$0")/.."
trace=${1:-traces/philly/philly-2017-09-04_2017-11-14.csv}
out=${2:-build/sweep-windows}
windows=${WINDOWS:-4}
export SWEEP_SIZES=${SWEEP_SIZES:-512}
mkdir -p "$out"

python3 - "$trace" "$out" "$windows" <<'PY'
import sys
trace, out, windows = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = open(trace).read().splitlines()
header, rows = lines[0], lines[1:]
for k in range(windows):
    part = rows[k * len(rows) // windows:(k + 1) * len(rows) // windows]
    with open(f"{out}/window-{k + 1}.csv", "w") as f:
        f.write("\n".join([header] + part) + "\n")
PY

for k in $(seq 1 "$windows"); do
  window="$out/window-$k.csv"
  first=$(sed -n 2p "$window" | cut -d, -f1)
  last=$(tail -n 1 "$window" | cut -d, -f1)
  echo "### Window $k of $windows: $(($(wc -l <"$window") - 1)) jobs, $first to $last"
  echo
  bash scripts/sweep.sh "$window" "$out/runs-$k"
  echo
done
