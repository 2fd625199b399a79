# Source on the GPU machine (from the repository root, .qtcarry carried): unpacks the minimal Qt of
# make_qt_carry.sh into /tmp/qt and sets the environment for an offscreen window.
mkdir -p /tmp/qt && tar -xJf .qtcarry/qt.tar.xz -C /tmp/qt
for f in /tmp/qt/lib/*; do ldconfig -p | grep -q "^[[:space:]]*$(basename "$f") " && rm -f "$f"; done
cat > /tmp/qt/fonts/fonts.conf <<CONF
<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig><dir>/tmp/qt/fonts</dir><cachedir>/tmp/qt/fc-cache</cachedir></fontconfig>
CONF
export LD_LIBRARY_PATH="/tmp/qt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FONTCONFIG_FILE=/tmp/qt/fonts/fonts.conf QT_QPA_PLATFORM=offscreen QT_QPA_FONTDIR=/tmp/qt/fonts
export PYTHONPATH="/tmp/qt/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
echo "carried system libraries used: $(ls /tmp/qt/lib | tr '\n' ' ')"
