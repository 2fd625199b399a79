"""``dpd-desktop inspect DATASET`` and ``dpd-desktop import-capture ... --out DATASET_DIR`` (dpd_desktop/analysis).

Exit status: 0 (inspect: also when flags were found, they are printed), 2 when the dataset cannot be loaded or the
capture cannot be imported (the message names the file).
"""
from __future__ import annotations

import json
import sys

from ..analysis.capture_import import CaptureImportError, import_capture
from ..analysis.inspect import inspect_dataset, summary_rows
from ..data import DatasetError, load_dataset, make_demo_dataset
from .common import split_ratios

COMMANDS = ("inspect", "import-capture")


def add_parser(add) -> None:
    p = add("inspect", help="check a dataset before training: delay, gain, AM/AM, P1dB, spectra, flags")
    p.add_argument("dataset", help="split-CSV folder, single CSV, HDF5 file, or 'demo'")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--frame-length", type=int, default=None, help="flag splits shorter than this frame length")
    c = add("import-capture", help="make a dataset folder from a measured PA input and output")
    c.add_argument("--input", required=True, help="PA input x: .csv (header I,Q), .h5/.hdf5 or .mat")
    c.add_argument("--output", required=True, help="PA output y: .csv (header I,Q), .h5/.hdf5 or .mat")
    c.add_argument("--sample-rate", type=float, required=True, help="Hz")
    c.add_argument("--bandwidth", type=float, required=True, help="total occupied (main channel) bandwidth, Hz")
    c.add_argument("--carriers", type=int, default=1, help="number of carriers / sub-channels (default 1)")
    c.add_argument("--carrier-bandwidth", type=float, default=None, help="Hz (default bandwidth / carriers)")
    c.add_argument("--nperseg", type=int, default=2560, help="segment length (default %(default)s)")
    c.add_argument("--split", type=split_ratios, default=(0.6, 0.2, 0.2), help="train,val,test (default 0.6,0.2,0.2)")
    c.add_argument("--no-normalize", action="store_true", help="keep the values (default: divide by max|x|)")
    c.add_argument("--out", required=True, help="new dataset folder")


def _load(ref: str):
    return make_demo_dataset() if ref == "demo" else load_dataset(ref)


def handle(args, ws=None) -> int:
    if args.command == "import-capture":
        return _import(args)
    if args.frame_length is not None and args.frame_length < 1:
        print(f"error: --frame-length {args.frame_length}: expected a positive number of samples", file=sys.stderr)
        return 2
    try:
        ds = _load(args.dataset)
    except (DatasetError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    r = inspect_dataset(ds, frame_length=args.frame_length)
    if args.json:
        print(json.dumps(r.to_dict(), indent=2, allow_nan=False))
        return 0
    rows = summary_rows(r)
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{w}}  {v}")
    print()
    if not r.flags:
        print("no flags: the capture looks usable")
    for f in r.flags:
        print(f"{f.severity.upper():<8} {f.code:<17} {f.message}")
    return 0


def _import(args) -> int:
    try:
        res = import_capture(args.input, args.output, args.out, sample_rate_hz=args.sample_rate,
                             bandwidth_hz=args.bandwidth, n_sub_ch=args.carriers, bw_sub_hz=args.carrier_bandwidth,
                             nperseg=args.nperseg, split=args.split, normalize=not args.no_normalize)
    except (CaptureImportError, DatasetError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    n = res.n_samples
    print(f"wrote {res.folder}: train {n['train']}, val {n['val']}, test {n['test']} samples; removed a delay of "
          f"{res.delay_integer} samples (fraction {res.delay_fraction:+.3f} left); divided by {res.scale:.6g}")
    return 0
