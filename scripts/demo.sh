#!/usr/bin/env bash
# README command 1: install what is missing, build, and run Gantry's main job: the
# scheduling demo on the example cluster and job scenario (plans, placements, reasons).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh build
./build/gantry demo --cluster examples/clusters/demo.yaml --scenario examples/scenarios/demo.yaml
