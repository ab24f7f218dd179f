#!/usr/bin/env bash
# Takes a PNG screenshot of the board (/board) as headless Chromium renders
# it, from a test server seeded with public tasks and records, so a reviewer
# can look at the page. Usage: scripts/board-screenshot.sh [out.png]
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-board.png}")"
if [ ! -x /usr/bin/chromium ]; then
  echo "needs /usr/bin/chromium (apt-get install -y chromium)" >&2
  exit 1
fi
go test -count=1 -run '^TestBoardRenderedByChromium$' ./internal/httpapi/ -args -board-screenshot="$out"
echo "board screenshot: $out"
