#!/usr/bin/env bash
# Opens a local HTML file in headless Chromium, saves a screenshot, and fails when the page
# writes to the console (an error, an exception it throws, or any other message), fails to
# load a resource, or refers to an external asset (the page must be self-contained).
#
#   scripts/chromium-check.sh FILE.html OUT.png
#
# Chromium's log does not say a console message's level, so every console message counts as
# an error: the pages checked here carry no script of their own. A page that logs on purpose
# can allow lines matching an extended regex in $CHROMIUM_CHECK_ALLOW.
#
# Needs Chromium at $CHROMIUM or /usr/bin/chromium (Debian: apt-get install -y chromium).
# Exit codes: 0 page clean, 1 page errors (printed), 2 usage or Chromium missing/failed.
set -euo pipefail

if [[ $# -ne 2 ]]; then
    echo "usage: $0 FILE.html OUT.png" >&2
    exit 2
fi
page=$1
out=$2
chromium=${CHROMIUM:-/usr/bin/chromium}
if [[ ! -x $chromium ]]; then
    echo "chromium-check: no Chromium at $chromium (apt-get install -y chromium, or set CHROMIUM)" >&2
    exit 2
fi
if [[ ! -f $page ]]; then
    echo "chromium-check: no such file: $page" >&2
    exit 2
fi

external=$(grep -Eo '(src|href)[[:space:]]*=[[:space:]]*["'"'"']?(https?:)?//[^"'"'"' >]*' "$page" || true)
if [[ -n $external ]]; then
    echo "chromium-check: $page: refers to external assets:" >&2
    echo "$external" >&2
    exit 1
fi

page_abs=$(cd "$(dirname "$page")" && pwd)/$(basename "$page")
out_dir=$(cd "$(dirname "$out")" && pwd)
out_abs=$out_dir/$(basename "$out")
profile=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$profile" "$log"' EXIT
rm -f "$out_abs"

status=0
timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --enable-logging=stderr --v=0 \
    --screenshot="$out_abs" --window-size=1280,2000 "file://$page_abs" \
    >"$log" 2>&1 || status=$?

if [[ $status -ne 0 ]]; then
    echo "chromium-check: Chromium exited with status $status" >&2
    cat "$log" >&2
    exit 2
fi
if [[ ! -s $out_abs ]]; then
    echo "chromium-check: Chromium wrote no screenshot" >&2
    cat "$log" >&2
    exit 2
fi

# Console messages are logged as `...:INFO:CONSOLE:LINE] "message", source: URL (LINE)`;
# exceptions the page throws show up the same way, failed loads as net::ERR_* lines.
errors=$(grep -E 'CONSOLE|Uncaught|net::ERR_|Failed to load resource' "$log" || true)
if [[ -n $errors && -n ${CHROMIUM_CHECK_ALLOW:-} ]]; then
    errors=$(echo "$errors" | grep -Ev "$CHROMIUM_CHECK_ALLOW" || true)
fi
if [[ -n $errors ]]; then
    echo "chromium-check: $page: the page logged errors:" >&2
    echo "$errors" >&2
    exit 1
fi
echo "chromium-check: $page: no console errors; screenshot in $out"
