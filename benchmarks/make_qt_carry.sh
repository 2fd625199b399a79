#!/usr/bin/env bash
# Build .qtcarry/qt.tar.xz: a minimal PySide6 (QtCore/QtGui/QtWidgets/QtOpenGL/QtTest/QtSvg, the offscreen platform plugin),
# shiboken6, pyqtgraph, platformdirs, pytest-qt (to run tests/gui there), the system libraries they link and one font, for the GPU machine, which has
# no Qt and whose carry limit (64 MiB) is below PySide6's wheel. Run here, in the project's venv; then pass
# carry [".ref", ".qtcarry"] and source benchmarks/gpu_gui_env.sh there. (.qtcarry is listed in .git/info/exclude.)
set -euo pipefail
SP=$(python -c "import site; print(site.getsitepackages()[0])")
T=$(mktemp -d)
D=$T/site
mkdir -p "$D/PySide6/Qt/lib" "$D/PySide6/Qt/plugins/platforms" "$D/shiboken6" "$T/lib" "$T/fonts"
cp "$SP"/PySide6/{__init__.py,_config.py,_git_pyside_version.py} "$SP"/PySide6/libpyside6.abi3.so.* "$D/PySide6/"
cp "$SP"/PySide6/Qt{Core,Gui,Widgets,OpenGL,OpenGLWidgets,Test,Svg}.abi3.so "$D/PySide6/"  # QtSvg: gui/panel_export.py
cp -r "$SP/PySide6/support" "$D/PySide6/"
cp "$SP"/PySide6/Qt/lib/libQt6{Core,Gui,Widgets,DBus,OpenGL,OpenGLWidgets,Test,Svg}.so.6 "$SP"/PySide6/Qt/lib/libicu*.so.* \
   "$D/PySide6/Qt/lib/"
cp "$SP/PySide6/Qt/plugins/platforms/libqoffscreen.so" "$D/PySide6/Qt/plugins/platforms/"
cp "$SP"/shiboken6/{__init__.py,_config.py,_git_shiboken_module_version.py,Shiboken.abi3.so} \
   "$SP"/shiboken6/libshiboken6.abi3.so.* "$D/shiboken6/"
cp -r "$SP/pyqtgraph" "$SP/platformdirs" "$SP/pytestqt" "$SP"/pytest_qt-*.dist-info "$D/"  # pytest-qt: tests/gui
rm -rf "$D/pyqtgraph/examples" "$D/pyqtgraph/opengl"
find "$D" -name __pycache__ -prune -exec rm -rf {} +
# system libraries (everything but the C/C++ runtime); gpu_gui_env.sh drops those the GPU machine already has
for f in $(find "$D" -name "*.so*"); do
  LD_LIBRARY_PATH="$D/PySide6/Qt/lib:$D/PySide6:$D/shiboken6" ldd "$f" | awk '/=> \/(usr\/)?lib/ {print $1" "$3}'
done | sort -u | grep -v -E "^(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so" | while read -r n p; do
  cp -L "$p" "$T/lib/$n"
done
cp -L /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf "$T/fonts/"
mkdir -p .qtcarry
(cd "$T" && tar -cf - site lib fonts) | xz -9 -T0 > .qtcarry/qt.tar.xz
rm -rf "$T"
ls -la .qtcarry/qt.tar.xz
