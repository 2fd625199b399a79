"""Entry point of the packaged app (PyInstaller runs this file as ``__main__``): ``dpd_desktop.cli.entry.run``.

Before anything imports Qt: on Windows, torch's DLL folder is added to the DLL search path and torch is imported
first (on some Windows builds torch imported after Qt fails to load c10.dll: pytorch#166628). Elsewhere torch is
imported where the commands need it (the CLI keeps ``--help`` and ``runs`` fast).
"""
import os
import sys

if sys.platform == "win32":
    _base = getattr(sys, "_MEIPASS", os.path.dirname(os.path.abspath(sys.executable)))
    _torch_lib = os.path.join(_base, "torch", "lib")
    if os.path.isdir(_torch_lib):
        os.add_dll_directory(_torch_lib)
        os.environ["PATH"] = _torch_lib + os.pathsep + os.environ.get("PATH", "")
    import torch  # noqa: F401,E402 - before Qt, see above

from dpd_desktop.cli import run  # noqa: E402

if __name__ == "__main__":
    run()
