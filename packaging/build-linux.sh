#!/usr/bin/env bash
# Linux bundle, .tar.gz and .deb from this checkout, in a fresh virtual environment (what `make package` runs).
#   packaging/build-linux.sh            -> build/pkg/dist/dpd-desktop/ (the one-folder bundle),
#                                          build/pkg/dpd-desktop-<version>-linux-<arch>.tar.gz,
#                                          build/pkg/dpd-desktop_<version>_<debarch>.deb
# Environment: PY (the interpreter that makes the venv, default python3), PKG_VENV (default build/pkg-venv, made
# anew unless PKG_REUSE_VENV=1), TORCH_SPEC (default torch==2.13.0: the CPU build on these machines; a bare range
# could pull a multi-GB CUDA build).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PY:-python3}
VENV=${PKG_VENV:-build/pkg-venv}
OUT=build/pkg
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
VERSION=$("$PY" -c "import ast,sys; t=ast.parse(open('dpd_desktop/__init__.py').read()); \
print([n.value.value for n in t.body if isinstance(n, ast.Assign) and n.targets[0].id == '__version__'][0])")
DEBARCH=$(dpkg --print-architecture 2>/dev/null || echo amd64)
T0=$(date +%s)

if [ "${PKG_REUSE_VENV:-0}" != 1 ] || [ ! -x "$VENV/bin/python" ]; then
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q "$TORCH_SPEC"
  "$VENV/bin/python" -m pip install -q . "pyinstaller>=6.10"
fi
T1=$(date +%s)

rm -rf "$OUT/dist" "$OUT/work"
"$VENV/bin/pyinstaller" --noconfirm --log-level WARN --distpath "$OUT/dist" --workpath "$OUT/work" \
  packaging/dpd-desktop.spec
BUNDLE=$OUT/dist/dpd-desktop
test -x "$BUNDLE/dpd-desktop"
T2=$(date +%s)

# .tar.gz of the bundle (unpack anywhere, run dpd-desktop/dpd-desktop)
TARBALL=$OUT/dpd-desktop-$VERSION-linux-$(uname -m).tar.gz
tar -C "$OUT/dist" -czf "$TARBALL" dpd-desktop

# .deb: the bundle under /opt/dpd-desktop, /usr/bin/dpd-desktop -> it, the .desktop entry, hicolor icons
STAGE=$OUT/deb
rm -rf "$STAGE"
mkdir -p "$STAGE/DEBIAN" "$STAGE/opt" "$STAGE/usr/bin" "$STAGE/usr/share/applications" "$STAGE/usr/share/icons"
cp -a "$BUNDLE" "$STAGE/opt/dpd-desktop"
ln -s /opt/dpd-desktop/dpd-desktop "$STAGE/usr/bin/dpd-desktop"
install -m 644 resources/dpd-desktop.desktop "$STAGE/usr/share/applications/dpd-desktop.desktop"
cp -r resources/icons/hicolor "$STAGE/usr/share/icons/hicolor"
find "$STAGE" -type d -exec chmod 755 {} +
SIZE_KB=$(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)
sed -e "s/@VERSION@/$VERSION/" -e "s/@ARCH@/$DEBARCH/" -e "s/@SIZE_KB@/$SIZE_KB/" \
  packaging/deb/control.in > "$STAGE/DEBIAN/control"
install -m 755 packaging/deb/postinst packaging/deb/postrm "$STAGE/DEBIAN/"
DEB=$OUT/dpd-desktop_${VERSION}_${DEBARCH}.deb
rm -f "$OUT"/dpd-desktop_*.deb
# xz at level 6 (dpkg-deb's default compressor); --root-owner-group: the files belong to root whoever builds
dpkg-deb --root-owner-group --build "$STAGE" "$DEB" >/dev/null
rm -rf "$STAGE"
T3=$(date +%s)

echo "venv $((T1 - T0)) s, PyInstaller $((T2 - T1)) s, archives $((T3 - T2)) s, total $((T3 - T0)) s"
echo "bundle  $(du -sh "$BUNDLE" | cut -f1)  $BUNDLE"
echo "tar.gz  $(du -h "$TARBALL" | cut -f1)  $TARBALL"
echo "deb     $(du -h "$DEB" | cut -f1)  $DEB"
