#!/usr/bin/env bash
# Fails when a C++ file differs from what clang-format (.clang-format) would write.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.h' '*.cc')
[ -z "$files" ] && exit 0
clang-format --dry-run -Werror $files
echo "format: $(echo "$files" | wc -w) files clean"
