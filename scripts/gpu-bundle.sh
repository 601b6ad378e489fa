#!/usr/bin/env bash
# Packs build/gantry with the shared libraries it needs (all but the C library's own) into
# gpu-bundle/, with an RPATH of $ORIGIN/lib, so the GPU check runs it on a machine that has
# none of them (the lent GPU machine: another distribution, nothing to install from).
# On that machine: cp -a gpu-bundle/. build/ && bash scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/gantry ] || { echo "build/gantry is missing: bash scripts/build.sh build first"; exit 1; }
command -v patchelf >/dev/null || apt-get install -y patchelf
rm -rf gpu-bundle
mkdir -p gpu-bundle/lib
cp build/gantry gpu-bundle/gantry
strip --strip-debug gpu-bundle/gantry
ldd build/gantry | awk '/=> \// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;;
    *) cp -L "$lib" gpu-bundle/lib/ ;;
  esac
done
patchelf --set-rpath '$ORIGIN/lib' gpu-bundle/gantry
du -sh gpu-bundle
