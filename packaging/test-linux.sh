#!/usr/bin/env bash
# `make package-test`: checks what packaging/build-linux.sh built, without Python on PATH and without a venv.
#   1. the bundle's --self-test (QT_QPA_PLATFORM=offscreen, `env -i`, PATH = a folder holding no python)
#   2. runs cross over: the bundle trains the demo and the pip-installed app (the build venv's `pip install .`)
#      lists the run and trains a DPD through it; the reverse, with the bundle also writing u = DPD(x)
#   3. the .deb: as root a real `dpkg -i`, the installed command's --self-test, `dpkg -r` (then --purge), and a
#      check that nothing is left under /opt/dpd-desktop, /usr/bin/dpd-desktop, the .desktop entry and the icons; not as root, the
#      .deb unpacked into a scratch root (dpkg -x) and its file list checked
# Prints one "ok: …" line per check; exits non-zero at the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=build/pkg
BUNDLE=$PWD/$OUT/dist/dpd-desktop
EXE=$BUNDLE/dpd-desktop
PIP_APP=$PWD/${PKG_VENV:-build/pkg-venv}/bin/dpd-desktop
DEB=$(ls "$OUT"/dpd-desktop_*.deb 2>/dev/null | head -1 || true)
[ -x "$EXE" ] && [ -n "$DEB" ] || { echo "error: no bundle or .deb under $OUT: run 'make package' first" >&2; exit 2; }

SCRATCH=$(mktemp -d /tmp/dpd-desktop-pkgtest.XXXXXX)
INSTALLED=0
# on any exit: a .deb this script installed is removed again, the scratch folder goes
trap '[ "$INSTALLED" = 1 ] && dpkg --purge dpd-desktop > /dev/null 2>&1; rm -rf "$SCRATCH"' EXIT
NOPY=$SCRATCH/bin  # the only PATH entry: no python, no venv
mkdir -p "$NOPY" "$SCRATCH/home"
fail() { echo "FAILED: $*" >&2; exit 1; }
PASSED=0
ok() { echo "ok: $*"; PASSED=$((PASSED + 1)); }
nmse() { grep '^selected epoch' "$1" | grep -o 'test NMSE [-0-9.]* dB'; }  # the DPD's, from its last line
# A clean environment: no PYTHONPATH, no VIRTUAL_ENV, HOME in the scratch folder, PATH without python.
clean() { env -i HOME="$SCRATCH/home" PATH="$NOPY" LANG=C.UTF-8 QT_QPA_PLATFORM=offscreen "$@"; }

if clean sh -c 'command -v python3 || command -v python' >/dev/null 2>&1; then
  fail "python is on the test PATH"
fi
ok "no python on the test PATH ($NOPY)"

# -- 1. self-test of the bundle
T0=$(date +%s.%N)
clean "$EXE" --self-test > "$SCRATCH/selftest.txt" 2>&1 || { cat "$SCRATCH/selftest.txt"; fail "bundle --self-test"; }
T1=$(date +%s.%N)
cat "$SCRATCH/selftest.txt"
grep -q "bundle at" "$SCRATCH/selftest.txt" || fail "the self-test did not run frozen"
ok "bundle --self-test passed in $(awk "BEGIN{printf \"%.1f\", $T1 - $T0}") s (process start to exit)"
V=$(clean "$EXE" --version)
[ "$V" = "dpd-desktop $(clean "$EXE" --version | cut -d' ' -f2)" ] && ok "bundle --version: $V"

# -- 2. runs cross over between the bundle and the pip-installed app
if [ -x "$PIP_APP" ]; then
  PIP() { env -i HOME="$SCRATCH/home" PATH=/usr/bin:/bin LANG=C.UTF-8 QT_QPA_PLATFORM=offscreen "$PIP_APP" "$@"; }
  W1=$SCRATCH/ws-bundle W2=$SCRATCH/ws-pip
  DPD_OPTS=(--dataset demo --epochs 1 --hidden-size 6 --frame-length 50 --stride 8 --max-train-samples 8192
            --device cpu --no-plots --quiet)
  clean "$EXE" --workspace "$W1" --self-test > /dev/null || fail "bundle self-test into $W1"
  RUN1=$(ls "$W1/runs")
  PIP --workspace "$W1" runs | grep -q "^$RUN1 .*succeeded" || fail "the pip app does not list the bundle's run"
  PIP --workspace "$W1" train-dpd --pa-run "$RUN1" "${DPD_OPTS[@]}" > "$SCRATCH/x1.txt" \
    || { cat "$SCRATCH/x1.txt"; fail "the pip app training a DPD through the bundle's PA run"; }
  ok "bundle's PA run $RUN1 listed by the pip app, which trained a DPD through it ($(nmse "$SCRATCH/x1.txt"))"
  PIP --workspace "$W2" --self-test > /dev/null || fail "pip self-test into $W2"
  RUN2=$(ls "$W2/runs")
  clean "$EXE" --workspace "$W2" runs | grep -q "^$RUN2 .*succeeded" || fail "the bundle does not list the pip app's run"
  clean "$EXE" --workspace "$W2" train-dpd --pa-run "$RUN2" "${DPD_OPTS[@]}" > "$SCRATCH/x2.txt" \
    || { cat "$SCRATCH/x2.txt"; fail "the bundle training a DPD through the pip app's PA run"; }
  DPD2=$(ls "$W2/runs" | grep -- -dpd-)
  clean "$EXE" --workspace "$W2" run-dpd --run "$DPD2" --out "$SCRATCH/u.h5" > /dev/null || fail "bundle run-dpd"
  PIP --workspace "$W2" runs | grep -q "^$DPD2 .*succeeded" || fail "the pip app does not list the bundle's DPD run"
  ok "pip app's PA run $RUN2 listed by the bundle, which trained a DPD through it ($(nmse "$SCRATCH/x2.txt")) and wrote u = DPD(x); the pip app lists that DPD run"
else
  echo "skip: no pip-installed app at $PIP_APP (the cross-over check needs build-linux.sh's venv)"
fi

# -- 3. the .deb
PATHS=(/opt/dpd-desktop /usr/bin/dpd-desktop /usr/share/applications/dpd-desktop.desktop)
dpkg-deb -c "$DEB" | awk '{print $6}' | sed 's|^\./|/|' > "$SCRATCH/deb-files.txt"  # a file: no early-closed pipe
ICONS=$(grep '^/usr/share/icons/.*\.png$' "$SCRATCH/deb-files.txt")
[ "$(echo "$ICONS" | wc -l)" -ge 6 ] || fail ".deb holds fewer than 6 icon sizes"
for p in /opt/dpd-desktop/dpd-desktop /usr/bin/dpd-desktop /usr/share/applications/dpd-desktop.desktop \
         /usr/share/icons/hicolor/256x256/apps/dpd-desktop.png; do
  grep -qx "$p" "$SCRATCH/deb-files.txt" || fail ".deb lacks $p"
done
ok ".deb $(basename "$DEB") ($(du -h "$DEB" | cut -f1)) holds the bundle, the command, the .desktop entry, $(echo "$ICONS" | wc -l) icons"
if [ "$(id -u)" = 0 ] && [ "${PKG_TEST_SCRATCH_ONLY:-0}" != 1 ]; then
  case "$(dpkg-query -W -f='${Status}' dpd-desktop 2>/dev/null || true)" in
    *" installed") fail "dpd-desktop is already installed here: not touching it" ;;
    *config-files) dpkg --purge dpd-desktop > /dev/null ;;  # removed but not purged by an earlier run: its record only
  esac
  for p in "${PATHS[@]}"; do [ -e "$p" ] && fail "$p exists before the install"; done
  missing=$(dpkg-deb -f "$DEB" Depends | tr ',' '\n' | sed 's/(.*)//; s/ //g' | while read -r d; do
    dpkg -s "$d" >/dev/null 2>&1 || echo "$d"; done)
  if [ -n "$missing" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing > /dev/null \
      || fail "cannot install the .deb's dependencies: $missing"
  fi
  INSTALLED=1
  dpkg -i "$DEB" > /dev/null || fail "dpkg -i"
  [ -L /usr/bin/dpd-desktop ] && [ -x /opt/dpd-desktop/dpd-desktop ] || fail "installed files missing"
  env -i HOME="$SCRATCH/home" PATH=/usr/bin:/bin QT_QPA_PLATFORM=offscreen dpd-desktop --self-test \
    > "$SCRATCH/deb-selftest.txt" 2>&1 || { cat "$SCRATCH/deb-selftest.txt"; fail "installed --self-test"; }
  ok "dpkg -i: /usr/bin/dpd-desktop --self-test passed ($(env -i PATH=/usr/bin:/bin dpd-desktop --version))"
  dpkg -r dpd-desktop > /dev/null || fail "dpkg -r"
  INSTALLED=0
  for p in "${PATHS[@]}" $ICONS; do [ -e "$p" ] || [ -L "$p" ] && fail "$p is left after dpkg -r"; done
  [ "$(dpkg-query -W -f='${Status}' dpd-desktop 2>/dev/null)" = "deinstall ok config-files" ] \
    || fail "dpd-desktop's state after dpkg -r: $(dpkg-query -W -f='${Status}' dpd-desktop 2>&1)"
  dpkg --purge dpd-desktop > /dev/null || fail "dpkg --purge"
  dpkg-query -W dpd-desktop > /dev/null 2>&1 && fail "dpd-desktop still known to dpkg after --purge"
  ok "dpkg -r left nothing under /opt/dpd-desktop, /usr/bin/dpd-desktop, the .desktop entry or the icons; purged"
else
  ROOTFS=$SCRATCH/root
  dpkg -x "$DEB" "$ROOTFS"
  [ -L "$ROOTFS/usr/bin/dpd-desktop" ] && [ "$(readlink "$ROOTFS/usr/bin/dpd-desktop")" = /opt/dpd-desktop/dpd-desktop ] \
    || fail "/usr/bin/dpd-desktop is not a link to /opt/dpd-desktop/dpd-desktop"
  clean "$ROOTFS/opt/dpd-desktop/dpd-desktop" --version > /dev/null || fail "the unpacked command does not start"
  LEFT=$(find "$ROOTFS" -mindepth 1 -maxdepth 3 | sed "s|^$ROOTFS||" | grep -v -e '^/opt' -e '^/usr$' -e '^/usr/bin' \
    -e '^/usr/share$' -e '^/usr/share/applications' -e '^/usr/share/icons' || true)
  [ -z "$LEFT" ] || fail ".deb installs outside its places: $LEFT"
  ok ".deb unpacked into a scratch root (dpkg -x): only /opt/dpd-desktop, /usr/bin, /usr/share/{applications,icons}"
fi
echo "package-test: $PASSED passed, 0 failed"
