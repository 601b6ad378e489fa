#!/usr/bin/env bash
# Prints the absolute path of the gantry binary the demos run: $GANTRY_BINARY when set (a
# build made already, e.g. by ctest), else build/gantry, built first (its output on stderr).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${GANTRY_BINARY:-}" ]; then
  GANTRY_TARGETS="gantry gantryd" bash scripts/build.sh build >&2
  GANTRY_BINARY=build/gantry
fi
realpath "$GANTRY_BINARY"
