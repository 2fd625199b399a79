"""Synthetic demo dataset: multi-carrier OFDM through a virtual PA with memory (demo mode, examples, tests).

Layout as DPA_160MHz (OpenDPD reference §1.2: 4 × 40 MHz carriers at fs 640 MHz, 160 MHz occupied, inputs
peak-normalized to |x|max = 1 as in reference §1.4) at a smaller size.

Signal model (all complex baseband, fs = 640 MHz, nperseg = 4096 → bin spacing Δf = 156.25 kHz):

1. **Input x** — four OFDM carriers centred at −60, −20, +20, +60 MHz. Each frame of ``nperseg`` samples is one
   IFFT of length ``nperseg`` whose occupied bins carry independent random square-QAM symbols (default 256-QAM):
   per carrier the bins within ±``occupancy``·20 MHz of the centre, the centre (DC) bin left empty
   (230 bins = 35.9 MHz per carrier at the default occupancy 0.9). Frames are concatenated, the whole record is
   band-limited by an FFT mask (occupied bands plus one frame bin) to remove the splatter of the frame
   boundaries, and the record (all splits together) is scaled to max|x| = 1.
2. **Virtual PA y** — Wiener-Hammerstein: short complex FIR ``H_IN`` → memoryless Saleh nonlinearity
   (AM/AM ``A(r) = αa·r / (1 + βa·r²)``, AM/PM ``Φ(r) = αp·r² / (1 + βp·r²)`` rad) → short complex FIR ``H_OUT`` →
   additive complex white Gaussian noise at ``noise_db`` dB relative to the mean output power.
   Defaults: αa = 2.7, βa = 0.18 (small-signal gain 2.7, ≈ 2.3 at |u| = 1, i.e. ≈ 1.4 dB compression at the
   peak), αp = 0.55, βp = 0.3 (≈ 24° phase shift at |u| = 1), noise −45 dB.

Splits are contiguous in time order: train, val, test. Deterministic for a given ``seed`` (one numpy Generator).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .readers import IQDataset, Split, save_split_csv
from .spec import DatasetSpec

__all__ = ["make_demo_dataset", "write_demo_dataset", "DEMO_NAME", "saleh_pa", "H_IN", "H_OUT"]

DEMO_NAME = "Demo PA (synthetic)"
FS_HZ = 640e6
CARRIER_CENTERS_HZ = (-60e6, -20e6, 20e6, 60e6)
CARRIER_BW_HZ = 40e6
#: Input FIR of the virtual PA (before the nonlinearity); unit main tap.
H_IN = np.array([1.0, 0.12 - 0.06j, -0.04 + 0.03j], dtype=np.complex128)
#: Output FIR of the virtual PA (after the nonlinearity); unit main tap.
H_OUT = np.array([1.0, -0.07 + 0.05j, 0.02 - 0.02j], dtype=np.complex128)


def _qam(rng: np.random.Generator, shape: tuple[int, ...], order: int) -> np.ndarray:
    """Unit-average-power square QAM symbols (order = 4, 16, 64, 256, 1024, ...)."""
    m = int(round(math.sqrt(order)))
    if m * m != order or m < 2:
        raise ValueError(f"qam_order must be a square number >= 4, got {order}")
    levels = 2 * np.arange(m) - (m - 1)
    i = levels[rng.integers(0, m, size=shape)]
    q = levels[rng.integers(0, m, size=shape)]
    return (i + 1j * q) / math.sqrt(2 * (order - 1) / 3)


def saleh_pa(u: np.ndarray, alpha_a: float = 2.7, beta_a: float = 0.18, alpha_p: float = 0.55,
             beta_p: float = 0.3) -> np.ndarray:
    """Memoryless Saleh PA (A. Saleh, IEEE Trans. Commun., 1981) on complex ``u`` (any shape):
    ``A(|u|)·exp(j(∠u + Φ(|u|)))``, A and Φ (radians) as in the module docstring."""
    r = np.abs(u)
    amp = alpha_a * r / (1.0 + beta_a * r * r)
    phi = alpha_p * r * r / (1.0 + beta_p * r * r)
    with np.errstate(invalid="ignore", divide="ignore"):
        unit = np.where(r > 0, u / np.where(r > 0, r, 1.0), 0.0)
    return amp * unit * np.exp(1j * phi)


def _to_iq(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1).astype(np.float32)


def make_demo_dataset(seed: int = 0, n_train: int = 61440, n_val: int = 16384, n_test: int = 16384, *,
                      nperseg: int = 4096, qam_order: int = 256, occupancy: float = 0.9,
                      noise_db: float = -45.0) -> IQDataset:
    """The synthetic demo dataset (module docstring), bit-identical for one ``seed``.

    Split lengths in samples (≥ 1; defaults 15, 4 and 4 segments of 4096); ``nperseg``: OFDM frame / IFFT length and
    the spec's segment length; ``occupancy``: occupied fraction of each 40 MHz carrier, in (0, 1]; ``noise_db``:
    output noise power relative to the mean output power, dB.

    Returns an IQDataset named ``"Demo PA (synthetic)"`` (max|x| = 1 over all splits; spec fs 640 MHz, bw_main
    160 MHz, bw_sub 40 MHz, 4 carriers, split_ratios the actual fractions). Raises ValueError: a split length < 1,
    nperseg < 64, bad qam_order or occupancy.
    """
    for k, v in (("n_train", n_train), ("n_val", n_val), ("n_test", n_test)):
        if int(v) != v or v < 1:
            raise ValueError(f"{k} must be a positive integer, got {v!r}")
    if int(nperseg) != nperseg or nperseg < 64:
        raise ValueError(f"nperseg must be an integer >= 64, got {nperseg!r}")
    if not 0 < occupancy <= 1:
        raise ValueError(f"occupancy must be in (0, 1], got {occupancy!r}")
    n_train, n_val, n_test, nperseg = int(n_train), int(n_val), int(n_test), int(nperseg)
    rng = np.random.default_rng(seed)
    n = n_train + n_val + n_test
    n_frames = -(-n // nperseg)

    # ---- input: 4-carrier OFDM, built per frame in the frequency domain
    df = FS_HZ / nperseg
    half = int(math.floor(occupancy * CARRIER_BW_HZ / 2 / df))
    offsets = np.concatenate([np.arange(-half, 0), np.arange(1, half + 1)])
    bins = np.concatenate([int(round(fc / df)) + offsets for fc in CARRIER_CENTERS_HZ]) % nperseg
    spec_frames = np.zeros((n_frames, nperseg), dtype=np.complex128)
    spec_frames[:, bins] = _qam(rng, (n_frames, bins.size), qam_order)
    x = np.fft.ifft(spec_frames, axis=1).reshape(-1)[:n]
    # brick-wall band mask over the whole record: removes the splatter of the frame-boundary discontinuities
    # (each carrier keeps its occupied band plus one frame bin of margin)
    f = np.fft.fftfreq(n, d=1.0 / FS_HZ)
    keep = np.zeros(n, dtype=bool)
    for fc in CARRIER_CENTERS_HZ:
        keep |= np.abs(f - fc) <= (half + 1) * df
    x = np.fft.ifft(np.where(keep, np.fft.fft(x), 0.0))
    x /= np.max(np.abs(x))

    # ---- virtual PA: FIR -> Saleh AM/AM + AM/PM -> FIR -> noise
    u = np.convolve(x, H_IN)[:n]
    v = saleh_pa(u)
    y = np.convolve(v, H_OUT)[:n]
    p_sig = float(np.mean(np.abs(y) ** 2))
    sigma = math.sqrt(p_sig * 10.0 ** (noise_db / 10.0) / 2.0)
    y = y + sigma * (rng.standard_normal(n) + 1j * rng.standard_normal(n))

    xi, yi = _to_iq(x), _to_iq(y)
    b = [0, n_train, n_train + n_val, n]
    splits = {s: Split(xi[b[i] : b[i + 1]], yi[b[i] : b[i + 1]]) for i, s in enumerate(("train", "val", "test"))}
    spec = DatasetSpec(
        sample_rate_hz=FS_HZ, bw_main_hz=160e6, bw_sub_hz=CARRIER_BW_HZ, n_sub_ch=len(CARRIER_CENTERS_HZ),
        nperseg=nperseg, split_ratios={"train": n_train / n, "val": n_val / n, "test": n_test / n},
        dataset_format="split_csv",
        extra={"description": f"Synthetic demo: 4 x 40 MHz OFDM ({qam_order}-QAM) at 640 MHz through a virtual "
                              "Wiener-Hammerstein PA (Saleh AM/AM + AM/PM, FIR memory), "
                              f"noise {noise_db:g} dB, seed {seed}",
               "modulation": f"{qam_order}QAM",
               "synthetic": {"generator": "dpd_desktop.data.synthetic", "seed": int(seed),
                             "noise_db": float(noise_db)}})
    ds = IQDataset(name=DEMO_NAME, source=Path(f"<synthetic demo seed={seed}>"), spec=spec, **splits)
    # the generator's settings travel with the dataset, so a run record can regenerate it (runs/record.py)
    object.__setattr__(ds, _SETTINGS_ATTR, {"seed": int(seed), "n_train": int(n_train), "n_val": int(n_val),
                                            "n_test": int(n_test), "nperseg": int(nperseg),
                                            "qam_order": int(qam_order), "occupancy": float(occupancy),
                                            "noise_db": float(noise_db)})
    return ds


_SETTINGS_ATTR = "_demo_settings"


def demo_settings(ds) -> dict | None:
    """The keyword arguments of :func:`make_demo_dataset` that generated ``ds`` (incl. ``seed``), or None when
    ``ds`` was not generated by it (e.g. a demo saved as CSV and loaded back is an ordinary dataset)."""
    kw = getattr(ds, _SETTINGS_ATTR, None)
    return dict(kw) if kw is not None else None


def write_demo_dataset(folder: str | Path, **kw) -> Path:
    """:func:`make_demo_dataset` ``(**kw)`` written as a split-CSV folder (:func:`save_split_csv`); returns it."""
    return save_split_csv(make_demo_dataset(**kw), folder, precision=9)
