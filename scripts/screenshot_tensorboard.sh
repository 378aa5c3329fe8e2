#!/usr/bin/env bash
# Screenshot of TensorBoard's dashboard for the runs under a log directory, as a person
# would first see it, taken with headless Chromium (Debian: apt-get install chromium).
#   bash scripts/screenshot_tensorboard.sh [LOGDIR=outputs] [OUT=docs/tensorboard.png] [PAGE=timeseries]
# PAGE is the dashboard: timeseries (the landing page), scalars, images, hparams.
set -euo pipefail
logdir=${1:-outputs}
out=${2:-docs/tensorboard.png}
page=${3:-timeseries}
here=$(cd "$(dirname "$0")/.." && pwd)
tb=${TENSORBOARD:-$here/.venv/bin/tensorboard}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$browser" ] || { echo "error: no chromium on PATH (apt-get install chromium)" >&2; exit 2; }
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$tb" --logdir "$logdir" --host 127.0.0.1 --port "$port" >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 60); do
  curl -sf "http://127.0.0.1:$port/data/runs" >/dev/null 2>&1 && break
  sleep 1
done
mkdir -p "$(dirname "$out")"
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,900 \
  --virtual-time-budget=15000 --screenshot="$out" "http://127.0.0.1:$port/#$page" >/dev/null 2>&1
echo "wrote $out"
