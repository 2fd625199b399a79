"""``dpd-desktop resume RUN``: continue an interrupted, cancelled or failed run after its last finished epoch, in its
own folder (training/resume.py). Exit status as train-pa's; a run that cannot be resumed (succeeded, still running,
no last.pt, last.pt not matching config.json, dataset changed) is refused with exit status 2 before anything is
written."""
from __future__ import annotations

import sys

from .common import Outcome
from .deploy import score_integer_model
from .train import STOPPING, ConsoleObserver, PlotRecorder, write_plots
from .limits import add_limit_options
from ..config import QuantSpec
from ..process import CTRL_C, Exit


def add_parser(add) -> None:
    """Register ``resume`` with the sub-command factory ``add(name, **kw)`` of cli/entry.py build_parser."""
    p = add("resume", help="continue an interrupted, cancelled or failed run after its last finished epoch")
    p.add_argument("run", help="run id (in the workspace) or run folder")
    add_limit_options(p, default="the run's recorded value, else the workspace's setting")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: the run's)")
    p.add_argument("--no-plots", action="store_true", help="do not write plots/*.png at the end")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def handle(args, ws) -> Outcome:
    """Resume ``args.run``; refusals are exit status 2 with the reason on stderr."""
    # PyTorch: see the note under cli/entry.py's imports
    from ..training.resume import ResumeRefused, prepare_resume, resume_trainer

    own_handler = not CTRL_C.installed and CTRL_C.install()
    try:
        try:
            plan = prepare_resume(ws, args.run, time_limit_s=args.time_limit,
                                  cuda_memory_fraction=args.cuda_memory_fraction, threads=args.threads)
        except ResumeRefused as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            return Outcome(Exit.USAGE)
        done = plan.state.epoch + 1
        print(f"resuming run {plan.record.run_id}: {done} of {plan.config.epochs} epochs done (last.pt)", flush=True)
        rec = PlotRecorder()
        rec.rows = [dict(r) for r in plan.state.history]
        trainer = resume_trainer(plan, ws, observers=[ConsoleObserver(args.quiet), rec])
        CTRL_C.on_first(trainer.request_cancel, STOPPING)
        result = trainer.run()
    finally:
        CTRL_C.on_first(None)
        if own_handler:
            CTRL_C.uninstall()
    if result.state == "succeeded" and not args.no_plots and not CTRL_C.pressed.is_set():
        write_plots(result.run_dir, rec)
    if result.state == "succeeded" and plan.config.qat:  # a quantisation-aware fine-tune: as finetune ends
        score_integer_model(result.run_dir, QuantSpec.from_dict(plan.config.qat), plan.dataset)
    if result.state == "failed" and result.run_dir is None:
        return Outcome(Exit.USAGE)  # refused in the set-up, before the folder was reopened (e.g. the PA run)
    status = {"succeeded": Exit.OK, "failed": Exit.FAILED, "cancelled": Exit.CANCELLED}[result.state]
    return Outcome(status, skip_teardown=True)
