#!/usr/bin/env bash
# Time from launching the app to its window being visible under Xvfb (xdotool sees a visible window whose name holds
# "DPD Desktop"), and from launching --self-test to its end. Median of N runs (default 5) for the bundle and, when
# the build venv exists, for the pip-installed app. Needs Xvfb and xdotool (apt-get install xvfb xdotool).
#   packaging/measure-startup.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-5}
BUNDLE=$PWD/build/pkg/dist/dpd-desktop/dpd-desktop
PIP_APP=$PWD/${PKG_VENV:-build/pkg-venv}/bin/dpd-desktop
command -v Xvfb >/dev/null && command -v xdotool >/dev/null || { echo "needs Xvfb and xdotool" >&2; exit 2; }
SCRATCH=$(mktemp -d /tmp/dpd-desktop-startup.XXXXXX)
DISP=:$((90 + RANDOM % 9))
Xvfb "$DISP" -screen 0 1600x1000x24 -nolisten tcp > /dev/null 2>&1 &
XVFB=$!
trap 'kill $XVFB 2>/dev/null; rm -rf "$SCRATCH"' EXIT
sleep 1
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

window_time() {  # $1: executable; prints seconds from launch to a visible window
  local t0 app t
  t0=$(now)
  env -i HOME="$SCRATCH/home" PATH=/usr/bin:/bin LANG=C.UTF-8 DISPLAY="$DISP" "$1" > /dev/null 2>&1 &
  app=$!
  until DISPLAY="$DISP" xdotool search --onlyvisible --name "DPD Desktop" > /dev/null 2>&1; do
    kill -0 $app 2>/dev/null || { echo "the app exited before its window showed" >&2; return 1; }
    awk "BEGIN{exit !($(now) - $t0 > 60)}" && { kill $app; echo "no window after 60 s" >&2; return 1; }
    sleep 0.02
  done
  t=$(now)
  kill $app; wait $app 2>/dev/null || true
  awk "BEGIN{printf \"%.2f\n\", $t - $t0}"
}

selftest_time() {
  local t0
  t0=$(now)
  env -i HOME="$SCRATCH/home" PATH=/usr/bin:/bin LANG=C.UTF-8 QT_QPA_PLATFORM=offscreen "$1" --self-test > /dev/null 2>&1
  awk "BEGIN{printf \"%.2f\n\", $(now) - $t0}"
}

for app in "$BUNDLE" "$PIP_APP"; do
  [ -x "$app" ] || continue
  name=$([ "$app" = "$BUNDLE" ] && echo bundle || echo "pip install")
  window_time "$app" > /dev/null  # one warm-up launch (page cache), not counted
  w=$(for _ in $(seq "$N"); do window_time "$app"; done | tee "$SCRATCH/w" | median)
  s=$(for _ in $(seq "$N"); do selftest_time "$app"; done | tee "$SCRATCH/s" | median)
  echo "$name: window visible $w s (runs: $(tr '\n' ' ' < "$SCRATCH/w")), self-test end $s s (runs: $(tr '\n' ' ' < "$SCRATCH/s"))"
done
