#!/usr/bin/env bash
# Installs the npm packages the browser tests use (tests/browser/package-lock.json:
# playwright-core, and oidc-provider as the sign-in tests' identity provider; the browser is
# Debian's chromium, never downloaded). The dashboard
# itself needs none: its one library (uPlot) is vendored under web/vendor with its licence.
set -euo pipefail
# Node.js and npm come from Debian (install-deps.sh), so this works as a fresh machine's
# first step too.
bash "$(dirname "$0")/install-deps.sh"
cd "$(dirname "$0")/../tests/browser"
stamp=node_modules/.gantry-lock
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then exit 0; fi
echo "install-npm: installing the browser tests' packages"
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
cp package-lock.json "$stamp"
