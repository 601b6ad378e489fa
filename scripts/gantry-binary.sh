#!/usr/bin/env bash
# Prints the absolute path of the gantry binary the demos run: $GANTRY_BINARY when set (a
# build made already, e.g. by ctest), else build/gantry: brought up to date when a build is
# there, else built first (its output on stderr).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${GANTRY_BINARY:-}" ]; then
  if [ -f build/build.ninja ] && [ -x build/gantry ] && [ -x build/gantryd ]; then
    # A build exists: bring it up to date only (nothing to do when the sources have not
    # changed), without installing or configuring again.
    ninja -C build gantry gantryd >&2
  else
    GANTRY_TARGETS="gantry gantryd" bash scripts/build.sh build >&2
  fi
  GANTRY_BINARY=build/gantry
fi
realpath "$GANTRY_BINARY"
