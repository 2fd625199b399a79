"""The packaging recipe's parts that run without building: the spec's file filter, the frozen entry's Windows order
(torch's DLL folder, torch before Qt), the .desktop entry, the icons, the .deb control file and the scripts' syntax.
The bundle itself is checked by `make package-test` (packaging/test-linux.sh)."""
from __future__ import annotations

import ast
import configparser
import os
import struct
import subprocess
import sys
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (requires-python >= 3.10): the tomli backport
    import tomli as tomllib
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtGui import QImage  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "packaging"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _spec_filter():
    """The spec's ``keep`` with the constants it reads, without PyInstaller (the spec's other statements need it)."""
    tree = ast.parse((PKG / "dpd-desktop.spec").read_text())
    names = {"KEEP_PLATFORMS", "KEEP_PLUGIN_DIRS", "DROP_PLUGINS", "TORCH_UNUSED"}
    body = [n for n in tree.body if (isinstance(n, ast.Assign) and {getattr(t, "id", "") for t in n.targets} & names)
            or (isinstance(n, ast.FunctionDef) and n.name == "keep")]
    ns = {"os": os}
    exec(compile(ast.Module(body=body, type_ignores=[]), "dpd-desktop.spec", "exec"), ns)  # noqa: S102
    return ns["keep"]


@pytest.mark.parametrize("dest, kept", [
    ("torch/lib/libtorch_cpu.so", True),
    ("torch/lib/libc10.so", True),
    ("torch/bin/torch_shm_manager", True),
    ("torch/testing/_comparison.py", True),  # torch imports torch.testing at start-up
    ("torch/include/ATen/ATen.h", False),
    ("torch/share/cmake/Torch/TorchConfig.cmake", False),
    ("torch/bin/test_api", False),
    ("torch/bin/protoc", False),
    ("torch/lib/libtorchbind_test.so", False),
    ("scipy/special/tests/data/boost.npz", False),
    ("numpy/_core/tests/test_multiarray.py", False),
    ("PySide6/Qt/plugins/platforms/libqxcb.so", True),
    ("PySide6/Qt/plugins/platforms/libqoffscreen.so", True),
    ("PySide6/Qt/plugins/platforms/libqwayland.so", False),
    ("PySide6/Qt/plugins/platforms/libqeglfs.so", False),
    ("PySide6/Qt/plugins/platforms/qwindows.dll", True),
    ("PySide6/Qt/plugins/platforms/libqcocoa.dylib", True),
    ("PySide6/Qt/plugins/imageformats/libqsvg.so", True),
    ("PySide6/Qt/plugins/iconengines/libqsvgicon.so", True),
    ("PySide6/Qt/plugins/platformthemes/libqgtk3.so", False),
    ("PySide6/Qt/plugins/sqldrivers/libqsqlite.so", False),
    ("PySide6/Qt/plugins/tls/libqopensslbackend.so", False),
    ("PySide6/Qt/translations/qt_de.qm", False),
    ("libQt6Widgets.so.6", True),
    ("libQt6Svg.so.6", True),
    ("libQt6Quick.so.6", False),
    ("libQt6Network.so.6", False),
    ("Qt6Qml.dll", False),
    ("h5py/_conv.cpython-311-x86_64-linux-gnu.so", True),
    ("pyqtgraph/icons/auto.png", True),
])
def test_spec_keeps_what_the_app_loads_and_drops_the_rest(dest, kept):
    assert _spec_filter()(dest) is kept


def test_spec_parses_and_reads_the_package_version():
    src = (PKG / "dpd-desktop.spec").read_text()
    compile(src, "dpd-desktop.spec", "exec")
    tree = ast.parse(src)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "read_version")
    ns = {"ast": ast, "ROOT": ROOT}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "spec", "exec"), ns)  # noqa: S102
    from dpd_desktop import __version__

    assert ns["read_version"]() == __version__
    assert "console=True" in src and "onefile" not in src.lower().replace("one-file", "")


def test_frozen_entry_on_windows_adds_torch_lib_and_imports_torch_before_qt(tmp_path):
    """Runs packaging/entry.py as on Windows (sys.platform "win32", a bundle folder with torch/lib) with a stand-in
    torch that records what was done before it was imported."""
    base = tmp_path / "bundle"
    (base / "torch" / "lib").mkdir(parents=True)
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(
        "import os, sys\n"
        "print('torch imported; dll dirs', os.environ['_ADDED'], '; Qt loaded', "
        "any(m.startswith('PySide6') for m in sys.modules), flush=True)\n")
    code = (
        "import os, runpy, sys\n"
        f"sys.path.insert(0, {str(fake)!r})\n"
        "os.environ['_ADDED'] = ''\n"
        "def add(p): os.environ['_ADDED'] += p\n"
        "os.add_dll_directory = add\n"
        f"sys._MEIPASS = {str(base)!r}\n"
        "sys.platform = 'win32'\n"
        f"runpy.run_path({str(PKG / 'entry.py')!r}, run_name='entry')\n"
        "print('PATH starts', os.environ['PATH'].split(os.pathsep)[0])\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr
    lib = str(base / "torch" / "lib")
    assert r.stdout.splitlines() == [f"torch imported; dll dirs {lib} ; Qt loaded False", f"PATH starts {lib}"]


def test_frozen_entry_runs_the_cli():
    r = subprocess.run([sys.executable, str(PKG / "entry.py"), "--version"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    from dpd_desktop import __version__

    assert r.returncode == 0 and r.stdout == f"dpd-desktop {__version__}\n"


def test_desktop_entry_starts_the_command_with_the_installed_icon():
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read(ROOT / "resources" / "dpd-desktop.desktop")
    e = entry["Desktop Entry"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert e["Type"] == "Application" and e["Name"] == "DPD Desktop" and e["Terminal"] == "false"
    assert e["Exec"] == "dpd-desktop" and "dpd-desktop" in scripts  # no %f: the CLI takes no bare file argument
    assert e["Icon"] == "dpd-desktop" and e["Categories"].endswith(";")
    assert (ROOT / "resources/icons/hicolor/48x48/apps/dpd-desktop.png").is_file()


@pytest.mark.parametrize("size", [16, 24, 32, 48, 64, 128, 256, 512])
def test_freedesktop_icons_have_their_size(size):
    img = QImage(str(ROOT / f"resources/icons/hicolor/{size}x{size}/apps/dpd-desktop.png"))
    assert (img.width(), img.height()) == (size, size) and img.hasAlphaChannel()
    assert img.pixelColor(0, 0).alpha() == 0 and img.pixelColor(size // 2, size - 1 - size // 8).alpha() == 255


def test_window_icon_and_windows_ico():
    assert QImage(str(ROOT / "resources/icon.png")).size().toTuple() == (256, 256)
    data = (ROOT / "resources/icon.ico").read_bytes()
    reserved, kind, count = struct.unpack_from("<HHH", data)
    assert (reserved, kind, count) == (0, 1, 7)
    sizes = []
    for i in range(count):
        w, h, _, _, planes, bpp, length, offset = struct.unpack_from("<BBBBHHII", data, 6 + 16 * i)
        png = data[offset:offset + length]
        assert png.startswith(PNG_MAGIC) and planes == 1 and bpp == 32
        img = QImage.fromData(png)
        assert img.width() == (w or 256) == img.height()
        sizes.append(img.width())
    assert sizes == [16, 24, 32, 48, 64, 128, 256]


def test_deb_control_template_and_scripts():
    control = (PKG / "deb" / "control.in").read_text()
    fields = dict(line.split(": ", 1) for line in control.splitlines() if line and not line.startswith(" "))
    assert fields["Package"] == "dpd-desktop" and fields["Version"] == "@VERSION@"
    assert fields["Architecture"] == "@ARCH@" and fields["Installed-Size"] == "@SIZE_KB@"
    assert "libxcb-cursor0" in fields["Depends"]  # Qt 6.5+ xcb platform plugin needs it
    for script in ("build-linux.sh", "test-linux.sh", "measure-startup.sh", "build-macos.sh", "deb/postinst",
                   "deb/postrm"):
        r = subprocess.run(["bash", "-n", str(PKG / script)], capture_output=True, text=True)
        assert r.returncode == 0, f"{script}: {r.stderr}"
        assert os.access(PKG / script, os.X_OK), f"{script} is not executable"
