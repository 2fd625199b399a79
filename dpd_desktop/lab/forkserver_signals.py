"""Imported by the children's forkserver only (the first module of its preload, lab/supervisor.py
:func:`process_context`; never import it elsewhere): the forkserver ignores SIGTERM.

A SIGTERM sent to the whole process group (``timeout``, a terminal's hang-up handler, a service manager's stop) would
otherwise end the forkserver beside the children, and multiprocessing, no longer able to read how a child ended,
reports its exit status as 255: the run would be marked failed. Ignoring it, the forkserver stays to report each
child's own end (the child restores SIGTERM's default, lab/child.py :func:`start_child_process`, so it dies of the
signal and its run is marked interrupted). The forkserver still ends with its parent: its alive pipe closes.
"""
import signal

signal.signal(signal.SIGTERM, signal.SIG_IGN)
