#!/usr/bin/env bash
# Refresh docs/kedro-viz.png: a static `kedro viz build` of the project (data stages stored, so
# their previews exist), rendered in headless Chromium with Kedro-Viz's feature-hint tour off.
#   bash docs/kedro_viz_screenshot.sh        (needs chromium and `make install`)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill "${server:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/project/src" "$work/project/data"
cp -r "$root/conf" "$work/project/conf" && rm -rf "$work/project/conf/local" && mkdir "$work/project/conf/local"
cp "$root/pyproject.toml" "$work/project/"
cd "$work/project"
export KEDRO_DISABLE_TELEMETRY=1
"$root/.venv/bin/kedro" run --env smoke --pipelines ingestion,tokenization,sequences >/dev/null
"$root/.venv/bin/kedro" viz build --include-previews >/dev/null
# The tour pop-up covers a quarter of the graph on a first visit; a returning user has it off.
sed -i 's|<head>|<head><script>localStorage.setItem("KedroViz", JSON.stringify({showFeatureHints: false, visible: {sidebar: false, miniMap: false}}))</script>|' build/index.html
port=$("$root/.venv/bin/python" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
"$root/.venv/bin/python" -m http.server "$port" --bind 127.0.0.1 --directory build >/dev/null 2>&1 &
server=$!
sleep 1
chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
  --user-data-dir="$work/profile" --window-size=1100,1500 --virtual-time-budget=20000 \
  --screenshot="$root/docs/kedro-viz.png" "http://127.0.0.1:$port/" 2>/dev/null
echo "wrote $root/docs/kedro-viz.png"
