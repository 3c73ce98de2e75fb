#!/usr/bin/env bash
# The browser test: builds the page (build.sh), then drives it in headless Chromium (Playwright)
# on flex, then on WebGPU (Chromium's SwiftShader where there is no GPU), and checks a
# screenshot of each plot for the bands. Skips, saying why, where Chromium or Node.js is missing.
# Screenshots go to target/web/. Chromium: CHROMIUM=/path, or Debian's /usr/bin/chromium.
set -euo pipefail
cd "$(dirname "$0")"
chromium=${CHROMIUM:-$(command -v chromium || true)}
if [ -z "$chromium" ]; then
  echo "SKIPPED: the browser test needs Chromium (Debian: apt-get install chromium, or CHROMIUM=/path)"
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "SKIPPED: the browser test needs Node.js and npm"
  exit 0
fi
./build.sh
(cd test && npm ci --no-audit --no-fund --silent)
node test/browser.mjs "$chromium" "${CARGO_TARGET_DIR:-../../target}/web" flex webgpu
