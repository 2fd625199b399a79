"""The PyTorch preload outliving the window: its end is not an error when its signals object is gone."""
from __future__ import annotations

import shiboken6

from dpd_desktop.gui.preload import CorePreloadJob


def test_preload_ending_after_its_signals_were_deleted_raises_nothing(qapp):
    imported = []
    for fail in (False, True):
        def importer(name, fail=fail):
            imported.append(name)
            if fail:
                raise ImportError("no such module")

        job = CorePreloadJob(modules=("json",), forkserver=False, importer=importer)
        shiboken6.delete(job.signals)  # what the window's close does to a QObject it owned
        job.work()  # RuntimeError "Signal source has been deleted" before the fix
        assert (job.error is not None) == fail
    assert imported == ["json", "json"]
