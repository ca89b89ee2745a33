#!/usr/bin/env bash
# Install what tests/test_browser.py needs: Debian's headless-capable `chromium` (plus a font)
# and the Playwright Python package in the current python. Never runs `playwright install`:
# the test drives /usr/bin/chromium. Idempotent; apt needs root (or sudo).
# Usage: .ci/install-browser.sh            (PYTHON=/path/to/python to pick the interpreter)
set -euo pipefail

PYTHON="${PYTHON:-python}"
packages=(chromium fonts-dejavu-core)

missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >/dev/null
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! "$PYTHON" -c "import playwright.sync_api" >/dev/null 2>&1; then
  "$PYTHON" -m pip install --quiet --disable-pip-version-check "playwright>=1.45"
fi

echo "browser ready: $(/usr/bin/chromium --version 2>/dev/null | head -n1);" \
  "playwright $("$PYTHON" -c 'from importlib.metadata import version; print(version("playwright"))')"
