"""``dpd-desktop loop`` (the instrument loop, dpd_desktop/loop) and ``dpd-desktop loop-dataset RUN --out DIR``.

One line per iteration (ACLR, EVM, NMSE, output power, delay); the loop and its iterations are in the workspace
(``loops/<id>/loop.json``, each iteration a run), and the loop's HTML report is written to ``loops/<id>/report.html``
(and ``--report``). Ctrl+C stops the loop: the generator is muted at its next step (exit status 3).

Exit status: 0 the loop ran (targets met or iterations done), 1 it failed (the one-line reason, with the RF state),
2 bad arguments or an instrument that cannot be opened, 3 stopped.
"""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from ..config import METRIC_PROFILES, ConfigError
from ..process import CTRL_C, Exit
from ..runs.outputs import check_output
from .common import split_ratios

COMMANDS = ("loop", "loop-dataset")
STOPPING = "stopping the loop: muting the generator (Ctrl+C again to abort)…"


def add_parser(add) -> None:
    from ..loop.config import ILA_KINDS, STRATEGIES, LoopConfig

    d = LoopConfig()
    p = add("loop", help="close the loop with an amplifier: play, capture, align, update the DPD, repeat")
    p.add_argument("--generator", default="virtual", help="virtual (default), sim, or visa:RESOURCE[;profile=rs-smw]"
                   "[;transfer=block|file;share=DIR;path=P][;timeout=S][;backend=@py]")
    p.add_argument("--analyzer", default="virtual", help="virtual (default), sim, sim:timeout, or "
                   "visa:RESOURCE[;profile=rs-fsw][;ascii][;timeout=S]")
    pa = p.add_mutually_exclusive_group()
    pa.add_argument("--pa-run", default=None, help="the virtual PA is this trained PA run (id or folder)")
    pa.add_argument("--virtual-pa", default=None, help="the virtual memory-polynomial PA's impairments: "
                    "delay=SAMPLES,snr=DB,gain-drift=DB,phase-drift=DEG,gain=DB,input-fs=DBM,seed=N")
    p.add_argument("--pa-impairments", default=None, help="with --pa-run: the same key=value impairments")
    p.add_argument("--power-limit", type=float, required=True,
                   help="peak envelope power the generator may never exceed, dBm (a waveform whose peak would is "
                        "refused before it is played)")
    p.add_argument("--strategy", default=d.strategy, choices=STRATEGIES, help="ilc (per sample) or ila (MP/GMP "
                   "indirect learning); default %(default)s")
    p.add_argument("--iterations", type=int, default=d.iterations, help="at most N captures (default %(default)s)")
    p.add_argument("--mu", type=float, default=d.mu, help="ILC learning gain (default %(default)s)")
    p.add_argument("--ila-kind", default=d.ila_kind, choices=ILA_KINDS)
    p.add_argument("--ila-order", type=int, default=d.ila_order)
    p.add_argument("--ila-memory", type=int, default=d.ila_memory)
    p.add_argument("--target-aclr", type=float, default=None, help="stop when ACLR <= this, dBc")
    p.add_argument("--target-evm", type=float, default=None, help="stop when EVM <= this, dB")
    p.add_argument("--target-output", type=float, default=None,
                   help="PA output power to linearise at, dBm RMS (default: the output without DPD)")
    p.add_argument("--input-level", type=float, default=d.input_level_dbm, help="RMS level of the undistorted "
                   "waveform, dBm (default %(default)s)")
    p.add_argument("--center-frequency", type=float, default=d.center_hz, help="Hz (default %(default)g)")
    p.add_argument("--averages", type=int, default=d.averages, help="periods captured and averaged "
                   "(default %(default)s)")
    p.add_argument("--ref-level", type=float, default=None, help="analyzer reference level, dBm")
    p.add_argument("--signal", default=d.signal, help="demo (default) or a dataset whose train input is played")
    p.add_argument("--samples", type=int, default=d.signal_samples, help="waveform length (default %(default)s)")
    p.add_argument("--seed", type=int, default=d.signal_seed, help="the demo signal's seed")
    p.add_argument("--metric-profile", default=d.metric_profile, choices=METRIC_PROFILES)
    p.add_argument("--nperseg", type=int, default=d.nperseg, help="Welch window of the metrics (default %(default)s)")
    p.add_argument("--fit", default=None, help="after the loop, fit this DPD family to its waveform (mp, gmp, gru, "
                   "...) through the training core and play it")
    p.add_argument("--fit-epochs", type=int, default=d.fit_epochs)
    p.add_argument("--fit-order", type=int, default=d.fit_order)
    p.add_argument("--fit-memory", type=int, default=d.fit_memory)
    p.add_argument("--timeout", type=float, default=d.timeout_s, help="instrument timeout, s (default %(default)s)")
    p.add_argument("--name", default=None, help="a label for the loop's folder")
    p.add_argument("--report", default=None, help="also write the loop's HTML report here")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --report file")
    p.add_argument("--dataset-out", default=None, help="make a dataset of the last iteration's capture here")
    p.add_argument("--json", action="store_true", help="print the loop's result as JSON at the end")
    ds = add("loop-dataset", help="make a dataset (split CSV + spec.json) of a loop iteration's capture")
    ds.add_argument("run", help="the iteration's run id or folder")
    ds.add_argument("--out", required=True, help="new dataset folder")
    ds.add_argument("--split", type=split_ratios, default=(0.6, 0.2, 0.2), help="train,val,test (default 0.6,0.2,0.2)")


def _config(a):
    from ..loop.config import LoopConfig

    return LoopConfig(strategy=a.strategy, iterations=a.iterations, mu=a.mu, ila_kind=a.ila_kind,
                      ila_order=a.ila_order, ila_memory=a.ila_memory, target_aclr_dbc=a.target_aclr,
                      target_evm_db=a.target_evm, target_output_dbm=a.target_output, input_level_dbm=a.input_level,
                      power_limit_dbm=a.power_limit, center_hz=a.center_frequency, averages=a.averages,
                      ref_level_dbm=a.ref_level, signal=a.signal, signal_samples=a.samples, signal_seed=a.seed,
                      metric_profile=a.metric_profile, nperseg=a.nperseg, fit=a.fit, fit_epochs=a.fit_epochs,
                      fit_order=a.fit_order, fit_memory=a.fit_memory, timeout_s=a.timeout, name=a.name).validate()


class ConsoleLoopObserver:
    """One line per iteration on stdout; the loop's start and end."""

    def __call__(self, ev) -> None:
        from ..loop import events as LE

        if isinstance(ev, LE.LoopStarted):
            ids = "; ".join(f"{k}: {v.get('manufacturer')} {v.get('model')}" for k, v in ev.identities.items())
            print(f"loop {ev.loop_id} → {ev.folder}\ninstruments: {ids}\nsignal: {ev.signal.get('source')}, "
                  f"{ev.signal.get('samples')} samples, PAPR {ev.signal.get('papr_db', 0):.2f} dB", flush=True)
            print(f"{'it':>3} {'kind':<10} {'ACLR':>8} {'EVM':>8} {'NMSE':>8} {'out dBm':>8} {'target':>8} "
                  f"{'peak in':>8} {'delay':>9}", flush=True)
        elif isinstance(ev, LE.IterationEnded):
            m = ev.metrics
            print(f"{ev.index:>3} {ev.kind:<10} {m['ACLR_AVG']:>8.2f} {m['EVM']:>8.2f} {m['NMSE']:>8.2f} "
                  f"{ev.output_dbm:>8.2f} {ev.target_output_dbm:>8.2f} {ev.input_peak_dbm:>8.2f} "
                  f"{ev.delay_samples:>9.4f}", flush=True)
        elif isinstance(ev, LE.LoopEnded):
            stream = sys.stdout if ev.state == "succeeded" else sys.stderr
            print(f"{ev.state}: {ev.message}", file=stream, flush=True)


def _loop(a, ws) -> int:
    from ..instruments.connect import open_bench, parse_instrument, parse_virtual_pa
    from ..instruments.errors import InstrumentError
    from ..instruments.sim import prepare_sim
    from ..loop.dataset import CaptureImportError, capture_to_dataset
    from ..loop.engine import LoopRunner
    from ..loop.report import write_loop_report
    from ..loop.signal import load_signal

    try:
        cfg = _config(a)
        gen, ana = parse_instrument(a.generator, "--generator"), parse_instrument(a.analyzer, "--analyzer")
        impair = parse_virtual_pa(a.virtual_pa if a.virtual_pa is not None else a.pa_impairments)
        if a.pa_impairments and a.virtual_pa:
            raise ValueError("--pa-impairments goes with --pa-run; --virtual-pa already holds the impairments")
        signal = load_signal(cfg.signal, cfg.signal_samples, cfg.signal_seed)
        if a.report:  # refused before the loop runs (runs/outputs.py: the one output rule)
            check_output(a.report, overwrite=a.overwrite, suffixes=(".html", ".htm"), workspace=ws, option="--report")
    except (ConfigError, ValueError, OSError) as exc:  # ValueError: OutputRefused too
        print(f"error: {exc}", file=sys.stderr)
        return Exit.USAGE
    sim_yaml = share = None
    if "sim" in (gen.kind, ana.kind):
        sim_yaml, share = prepare_sim(Path(ws.root) / "loops" / "sim", signal.x, cfg.input_level_dbm)
        if ana.kind == "sim" and cfg.averages != 1:
            print("note: the simulated analyzer answers one period: --averages 1")
            cfg = replace(cfg, averages=1)
    try:
        bench = open_bench(gen, ana, virtual_pa=impair if (gen.kind == "virtual") else None, workspace=ws,
                           pa_run=a.pa_run, sim_yaml=sim_yaml, share_dir=share, timeout_s=cfg.timeout_s)
    except (InstrumentError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Exit.USAGE
    except Exception as exc:  # noqa: BLE001 - a PA run that cannot be loaded (TrainingError) and the like
        print(f"error: {exc}", file=sys.stderr)
        return Exit.USAGE
    runner = LoopRunner(cfg, bench, ws, observers=[ConsoleLoopObserver()], signal=signal)
    own = not CTRL_C.installed and CTRL_C.install()
    try:
        CTRL_C.on_first(runner.request_stop, STOPPING)
        result = runner.run()
    finally:
        bench.close()
        CTRL_C.on_first(None)
        if own:
            CTRL_C.uninstall()
    report = write_loop_report(result.folder)
    print(f"report: {report}")
    if a.report:
        print(f"report: {write_loop_report(result.folder, a.report, a.overwrite, ws)}")
    if a.dataset_out and result.iterations:
        try:
            r = capture_to_dataset(Path(ws.runs_dir) / result.iterations[-1]["run_id"], a.dataset_out)
            print(f"dataset: {r.folder} ({r.n_used} samples, delay {r.delay_integer}{r.delay_fraction:+.3f})")
        except CaptureImportError as exc:
            print(f"error: dataset not written: {exc}", file=sys.stderr)
    if a.json:
        print(json.dumps({"loop_id": result.loop_id, "folder": str(result.folder), "state": result.state,
                          "message": result.message, "rf_off": result.rf_off, "iterations": result.iterations,
                          "delay_samples": result.delay_samples}, indent=2, default=str))
    return {"succeeded": Exit.OK, "failed": Exit.FAILED, "cancelled": Exit.CANCELLED}[result.state]


def _loop_dataset(a, ws) -> int:
    from ..loop.dataset import CaptureImportError, capture_to_dataset
    from ..loop.store import LOOPS_DIR, LoopRecordError, read_loop

    try:
        run_dir = ws.resolve(a.run)
        r = capture_to_dataset(run_dir, a.out, split=a.split)
    except (FileNotFoundError, CaptureImportError) as exc:
        hint = ""
        loop_dir = Path(ws.root) / LOOPS_DIR / str(a.run)
        if isinstance(exc, FileNotFoundError) and loop_dir.is_dir():
            try:
                runs = [str(it.get("run_id")) for it in read_loop(loop_dir).iterations if it.get("run_id")]
                hint = (f"; {a.run} is a loop, whose iterations are the runs "
                        f"{', '.join(dict.fromkeys(runs)) or '(none yet)'}: give one of them")
            except LoopRecordError:
                pass
        print(f"error: {exc}{hint}", file=sys.stderr)
        return Exit.USAGE
    print(f"wrote {r.folder}: {r.n_samples['train']}/{r.n_samples['val']}/{r.n_samples['test']} samples "
          f"(train/val/test), delay {r.delay_integer} samples removed ({r.delay_fraction:+.4f} left), scale "
          f"{r.scale:.6g}")
    return Exit.OK


def handle(args, ws) -> int:
    return _loop(args, ws) if args.command == "loop" else _loop_dataset(args, ws)
