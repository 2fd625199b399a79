"""Load a dataset in a forked child process while the parent imports PyTorch (command-line start-up).

``dpd-desktop train-pa/train-dpd`` spend ~3 s importing PyTorch before anything else can happen, and parsing a
measured dataset (DPA_160MHz: ~0.3–0.6 s) would otherwise follow it. :class:`DatasetPrefetch` forks before PyTorch
is imported (a small, single-threaded process: fork is safe), the child parses the files with the normal readers
and sends the :class:`~dpd_desktop.data.IQDataset` back through a pipe (pickle, ~24 MB for DPA_160MHz, ~20 ms),
and the parent collects it once it needs it. Whatever goes wrong in the child (an invalid file, pickling, a
killed child), :meth:`DatasetPrefetch.result` returns None and the caller loads the dataset itself, so errors are
reported exactly as without prefetching.
"""
from __future__ import annotations

import os
import pickle
import signal
import sys


class DatasetPrefetch:
    """Start parsing ``spec`` (a dataset path) in a child process now; :meth:`result` collects it.

    No child is started (``result()`` → None) for the embedded ``"demo"`` data, on platforms without ``fork``, or
    when PyTorch is already imported in this process (forking a process with PyTorch's threads is not safe).
    """

    def __init__(self, spec: str):
        self.pid: int | None = None
        self._fd: int | None = None
        if spec == "demo" or not hasattr(os, "fork") or "torch" in sys.modules:
            return
        try:
            r, w = os.pipe()
            pid = os.fork()
        except OSError:
            return
        if pid == 0:  # child: parse, send, exit without running the parent's clean-up
            code = 0
            try:
                os.close(r)
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl+C
                try:
                    from . import load_dataset

                    payload = pickle.dumps(("ok", load_dataset(spec)), protocol=pickle.HIGHEST_PROTOCOL)
                except BaseException:  # noqa: BLE001 - the parent re-loads and reports the error itself
                    payload = pickle.dumps(("failed", None))
                with os.fdopen(w, "wb") as fh:
                    fh.write(payload)
            except BaseException:  # noqa: BLE001 - e.g. the parent went away (broken pipe)
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        self.pid, self._fd = pid, r

    def result(self):
        """The loaded dataset, or None when the caller must load it itself. Waits for the child; call once."""
        if self._fd is None:
            return None
        fd, self._fd = self._fd, None
        try:
            with os.fdopen(fd, "rb") as fh:
                data = fh.read()
            status, ds = pickle.loads(data)
            return ds if status == "ok" else None
        except Exception:  # noqa: BLE001 - truncated or unreadable payload: load in-process instead
            return None
        finally:
            self._reap()

    def cancel(self) -> None:
        """Stop the child (if any) and release the pipe."""
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            self._reap()

    def _reap(self) -> None:
        if self.pid is not None:
            try:
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            self.pid = None
