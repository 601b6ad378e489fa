#!/usr/bin/env bash
# The floor under a CLI call's start on this machine: how long the kernel and the dynamic
# loader take for a program that does nothing, as C, as C++ (libstdc++ static and shared),
# as C++ linking libcrypto (Debian builds it with BIND_NOW: every symbol bound at start) or
# libcpp-httplib, against `gantry --version`. Elapsed and page faults from `perf stat`
# (Debian's linux-perf).
#   bash bench/start_floor.sh [build/gantry] [RUNS]
set -euo pipefail
gantry="${1:-$(dirname "$0")/../build/gantry}"
runs="${2:-200}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/hello.cc" <<'CC'
#include <iostream>
int main() { std::cout << "hello\n"; }
CC
cat >"$work/httplib.cc" <<'CC'
#include <httplib.h>
#include <iostream>
int main(int argc, char**) { if (argc > 5) httplib::Client("http://127.0.0.1:1").Get("/"); std::cout << "hello\n"; }
CC
g++ -O2 -static-libstdc++ -static-libgcc "$work/hello.cc" -o "$work/hello-static"
g++ -O2 "$work/hello.cc" -o "$work/hello-shared"
g++ -O2 "$work/hello.cc" -o "$work/hello-libcrypto" -Wl,--no-as-needed -lcrypto
g++ -O2 "$work/httplib.cc" -o "$work/hello-httplib" $(pkg-config --cflags --libs cpp-httplib)
measure() {  # label, command...
  local label=$1
  shift
  perf stat -r "$runs" -e task-clock,page-faults "$@" 2>"$work/stat" >/dev/null
  awk -v label="$label" '/page-faults/ {faults = $1} /seconds time elapsed/ {ms = $1 * 1000}
    END {printf "| %s | %.2f ms | %s |\n", label, ms, faults}' "$work/stat"
}
echo "| program | elapsed (mean of $runs) | page faults |"
echo "|---|---|---|"
measure "/bin/true" /bin/true
measure "C++ hello, libstdc++ static" "$work/hello-static"
measure "C++ hello, libstdc++ shared" "$work/hello-shared"
measure "C++ hello that links libcrypto" "$work/hello-libcrypto"
measure "C++ hello that links libcpp-httplib" "$work/hello-httplib"
measure "gantry --version" "$gantry" --version
