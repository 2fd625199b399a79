"""Render resources/icon.svg to the PNG icons the window and the installers use (run from the project root).

Writes resources/icon.png (256 px, the window icon), resources/icons/hicolor/<N>x<N>/apps/dpd-desktop.png for the
freedesktop sizes (the .deb), resources/icon.ico (Windows: PNG images inside an ICO container, Vista and later) and
resources/icon.iconset/ (macOS: `iconutil -c icns` turns it into icon.icns in build-macos.sh). Needs PySide6 (QtSvg).
"""
from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt  # noqa: E402 - after the platform choice
from PySide6.QtGui import QGuiApplication, QImage, QPainter  # noqa: E402
from PySide6.QtSvg import QSvgRenderer  # noqa: E402

FREEDESKTOP_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
ICONSET = ((16, "16x16"), (32, "16x16@2x"), (32, "32x32"), (64, "32x32@2x"), (128, "128x128"),
           (256, "128x128@2x"), (256, "256x256"), (512, "256x256@2x"), (512, "512x512"), (1024, "512x512@2x"))


def render(renderer: QSvgRenderer, size: int) -> bytes:
    """The icon as PNG bytes, ``size`` × ``size`` pixels, transparent background."""
    img = QImage(size, size, QImage.Format.Format_ARGB32)
    img.fill(Qt.GlobalColor.transparent)
    p = QPainter(img)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(p)
    p.end()
    buf = QByteArray()
    dev = QBuffer(buf)
    dev.open(QIODevice.OpenModeFlag.WriteOnly)
    img.save(dev, "PNG")
    return bytes(buf.data())


def ico(images: dict[int, bytes]) -> bytes:
    """An ICO file holding PNG images (ICONDIR + one ICONDIRENTRY each; width/height 0 means 256)."""
    head = struct.pack("<HHH", 0, 1, len(images))
    offset = 6 + 16 * len(images)
    entries, data = b"", b""
    for size, png in sorted(images.items()):
        entries += struct.pack("<BBBBHHII", size % 256, size % 256, 0, 0, 1, 32, len(png), offset + len(data))
        data += png
    return head + entries + data


def main(root: Path) -> None:
    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])  # noqa: F841 - QImage text needs one
    res = root / "resources"
    renderer = QSvgRenderer(str(res / "icon.svg"))
    if not renderer.isValid():
        raise SystemExit(f"{res / 'icon.svg'}: not a valid SVG")
    cache = {n: render(renderer, n) for n in {*FREEDESKTOP_SIZES, *ICO_SIZES, *(n for n, _ in ICONSET)}}
    (res / "icon.png").write_bytes(cache[256])
    for n in FREEDESKTOP_SIZES:
        d = res / "icons" / "hicolor" / f"{n}x{n}" / "apps"
        d.mkdir(parents=True, exist_ok=True)
        (d / "dpd-desktop.png").write_bytes(cache[n])
    (res / "icon.ico").write_bytes(ico({n: cache[n] for n in ICO_SIZES}))
    iconset = res / "icon.iconset"
    iconset.mkdir(exist_ok=True)
    for n, name in ICONSET:
        (iconset / f"icon_{name}.png").write_bytes(cache[n])
    print(f"icons written under {res}")


if __name__ == "__main__":
    main(Path(__file__).resolve().parent.parent)
