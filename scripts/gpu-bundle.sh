#!/usr/bin/env bash
# Packs build/gantry and build/gantryd with the shared libraries they need (all but the C library's own) into
# gpu-bundle/, with an RPATH of $ORIGIN/lib, so the GPU check runs it on a machine that has
# none of them (the lent GPU machine: another distribution, nothing to install from).
# On that machine: cp -a gpu-bundle/. build/ && bash scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
for b in gantry gantryd; do
  [ -x build/$b ] || { echo "build/$b is missing: bash scripts/build.sh build first"; exit 1; }
done
command -v patchelf >/dev/null || apt-get install -y patchelf
rm -rf gpu-bundle
mkdir -p gpu-bundle/lib
for b in gantry gantryd; do
  cp build/$b gpu-bundle/$b
  strip --strip-debug gpu-bundle/$b
  ldd build/$b | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;;
      *) cp -L "$lib" gpu-bundle/lib/ ;;
    esac
  done
  patchelf --set-rpath '$ORIGIN/lib' gpu-bundle/$b
done
du -sh gpu-bundle
