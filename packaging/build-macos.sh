#!/usr/bin/env bash
# macOS bundle for DPD Desktop: "DPD Desktop.app" in a .dmg. UNTESTED: written on Linux, where it cannot run.
#   packaging/build-macos.sh            -> build/pkg/dist/DPD Desktop.app, build/pkg/dpd-desktop-<version>-macos-<arch>.dmg
# Makes a fresh venv (build/pkg-venv) with torch (the macOS wheels are CPU + MPS builds), the app and PyInstaller,
# renders the .icns from resources/icon.svg (packaging/make_icons.py, then iconutil), runs the recipe
# (packaging/dpd-desktop.spec: one folder inside the .app's Contents), checks the bundle with --self-test, and makes
# the .dmg with hdiutil. Not signed or notarized: Gatekeeper asks on first start (right-click → Open); to sign, set
# CODESIGN_IDENTITY and the script runs codesign --deep on the .app.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
VENV=build/pkg-venv
VERSION=$("$PY" -c "import ast; t=ast.parse(open('dpd_desktop/__init__.py').read()); \
print([n.value.value for n in t.body if isinstance(n, ast.Assign) and n.targets[0].id == '__version__'][0])")

rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q torch==2.13.0
"$VENV/bin/python" -m pip install -q . "pyinstaller>=6.10"

"$VENV/bin/python" packaging/make_icons.py
iconutil -c icns resources/icon.iconset -o resources/icon.icns

rm -rf build/pkg/dist build/pkg/work
"$VENV/bin/pyinstaller" --noconfirm --log-level WARN --distpath build/pkg/dist --workpath build/pkg/work \
  packaging/dpd-desktop.spec
APP="build/pkg/dist/DPD Desktop.app"
test -d "$APP"
QT_QPA_PLATFORM=offscreen "$APP/Contents/MacOS/dpd-desktop" --self-test

if [ -n "${CODESIGN_IDENTITY:-}" ]; then
  codesign --deep --force --options runtime --sign "$CODESIGN_IDENTITY" "$APP"
fi

DMG="build/pkg/dpd-desktop-$VERSION-macos-$(uname -m).dmg"
STAGE=build/pkg/dmg
rm -rf "$STAGE" "$DMG"
mkdir -p "$STAGE"
cp -R "$APP" "$STAGE/"
ln -s /Applications "$STAGE/Applications"
hdiutil create -volname "DPD Desktop $VERSION" -srcfolder "$STAGE" -ov -format UDZO "$DMG"
rm -rf "$STAGE"
du -sh "$APP" "$DMG"
