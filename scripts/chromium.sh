#!/usr/bin/env bash
# Makes sure a headless Chromium and a Chinese font are there for the report's browser test
# (tests/integration/test_report.py), and prints the browser's path.  Run by scripts/test.sh, so CI
# (.ci/run) and a fresh machine get them.  Installs Debian's `chromium` and `fonts-wqy-zenhei` (a
# CJK font: without one the screenshot shows boxes; 10 MB against 80 MB for fonts-noto-cjk) with
# apt-get, only when they are missing and only as root; otherwise says what is missing and exits 1,
# and the browser test is skipped with that reason.
#
# Usage: scripts/chromium.sh            # prints e.g. /usr/bin/chromium
set -euo pipefail

find_browser() { command -v chromium || command -v chromium-browser || command -v google-chrome; }
has_cjk_font() { command -v fc-list >/dev/null && [ -n "$(fc-list :lang=zh family 2>/dev/null | head -n1)" ]; }

missing=()
find_browser >/dev/null || missing+=(chromium)
has_cjk_font || missing+=(fonts-wqy-zenhei)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "chromium.sh: missing ${missing[*]}; install them (apt-get install ${missing[*]}) as root" >&2
    find_browser || exit 1
    exit 0  # a browser without a Chinese font still runs the test; only the screenshot shows boxes
  fi
  echo "chromium.sh: installing ${missing[*]} with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -q --no-install-recommends "${missing[@]}" ||
    { apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; }; } >&2
fi
find_browser
