#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds Gantry.
# Usage: scripts/build.sh [BUILD_DIR] [extra cmake args...]
# GANTRY_TARGETS (e.g. "gantry") builds only those targets; default: everything.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
dir="${1:-build}"
shift || true
# Configure on first use, and again whenever options are given (they may differ).
if [ ! -f "$dir/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGANTRY_WERROR=ON "$@" >/dev/null
fi
# shellcheck disable=SC2086  # both are word lists
ninja -C "$dir" ${GANTRY_NINJA_FLAGS:-} ${GANTRY_TARGETS:-}
