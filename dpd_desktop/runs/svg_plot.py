"""Small inline-SVG charts for the HTML report (no Qt, no plotting library): lines or points of a few series on
linear or log-y axes, with 1-2-5 ticks (``nice_step``; log axes label the decades), axis labels, a title and a legend.
Non-finite points break a line; a line of at most :data:`MARKED_POINTS` points also gets a dot per point (so a
one-epoch curve shows). The SVG is a string for an HTML document (no XML declaration), sized through ``viewBox``.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

#: lines of at most this many finite points get a dot on each point (as the window's learning curves do)
MARKED_POINTS = 60
MARKER_RADIUS = 2.5
#: the series colors, in order (colour-blind-safe Okabe-Ito palette)
COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")


@dataclass(frozen=True)
class Series:
    """One series: ``x``, ``y`` 1-D arrays of equal length; ``kind`` "line" or "points"; ``color`` CSS color
    (None: the next of :data:`COLORS` not yet taken, so the n-th run has one color in every chart)."""

    label: str
    x: np.ndarray
    y: np.ndarray
    kind: str = "line"
    color: str | None = None


def nice_step(span: float, target: int = 6) -> float:
    """A 1, 2 or 5 × 10^k step giving about ``target`` intervals over ``span`` (> 0)."""
    raw = span / max(target, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 5.0, 10.0):
        if raw <= m * mag:
            return m * mag
    return 10.0 * mag


def _ticks(lo: float, hi: float) -> list[float]:
    step = nice_step(hi - lo)
    first = math.ceil(lo / step - 1e-9) * step
    out, v = [], first
    while v <= hi + 1e-9 * step:
        out.append(0.0 if abs(v) < step * 1e-9 else v)
        v += step
    return out


def _log_ticks(y0: float, y1: float) -> list[float]:
    """log10 positions of the 1-2-5 × 10^k values in [10^y0, 10^y1]; when fewer than two: linear steps of y."""
    out = [math.log10(m * 10.0 ** k) for k in range(math.floor(y0) - 1, math.ceil(y1) + 1) for m in (1, 2, 5)
           if y0 <= math.log10(m * 10.0 ** k) <= y1]
    if len(out) > 8:
        out = [t for t in out if abs(t - round(t)) < 1e-9]
    if len(out) >= 2:
        return out
    return [math.log10(v) for v in _ticks(10.0 ** y0, 10.0 ** y1) if v > 0]


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    return f"{v:.0e}" if a >= 1e5 or a < 1e-3 else f"{v:g}"


def _range(values: list[np.ndarray]) -> tuple[float, float]:
    finite = [v[np.isfinite(v)] for v in values]
    finite = [v for v in finite if v.size]
    if not finite:
        return 0.0, 1.0
    lo = float(min(v.min() for v in finite))
    hi = float(max(v.max() for v in finite))
    if hi - lo < 1e-12 * max(1.0, abs(hi)):
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


def line_chart(series: Sequence[Series], title: str = "", xlabel: str = "", ylabel: str = "",
               width: int = 480, height: int = 320, log_y: bool = False, y_range: tuple[float, float] | None = None,
               max_points: int = 2500, integer_x: bool = False) -> str:
    """An ``<svg>`` element drawing ``series``; each longer than ``max_points`` is decimated evenly.

    ``integer_x`` keeps only integer x ticks (epochs). ``log_y`` draws log10(y) (non-positive y left out) with
    1-2-5 labels; ``y_range`` fixes the y range (in data
    units; for log_y, of y itself).
    """
    ml, mr, mt, mb = 62, 12, 26 if title else 10, 42
    pw, ph = width - ml - mr, height - mt - mb
    prepared, auto = [], 0
    for s in series:
        x = np.asarray(s.x, dtype=np.float64).ravel()
        y = np.asarray(s.y, dtype=np.float64).ravel()
        n = min(x.size, y.size)
        x, y = x[:n], y[:n]
        if log_y:
            with np.errstate(divide="ignore", invalid="ignore"):
                y = np.where(y > 0, np.log10(np.where(y > 0, y, 1.0)), np.nan)
        if n > max_points:
            idx = np.linspace(0, n - 1, max_points).astype(np.int64)
            x, y = x[idx], y[idx]
        color = s.color
        if color is None:  # the palette's next color: series of fixed color (a reference) take none of it
            color = COLORS[auto % len(COLORS)]
            auto += 1
        prepared.append((s, x, y, color))
    x0, x1 = _range([p[1] for p in prepared])
    if y_range is not None:
        y0, y1 = (math.log10(v) for v in y_range) if log_y else y_range
    else:
        y0, y1 = _range([p[2] for p in prepared])
        pad = 0.04 * (y1 - y0)
        y0, y1 = y0 - pad, y1 + pad

    def sx(v):
        return ml + (v - x0) / (x1 - x0) * pw

    def sy(v):
        return mt + (1 - (v - y0) / (y1 - y0)) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" font-family="sans-serif" font-size="11">',
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>']
    if title:
        out.append(f'<text x="{width / 2:.1f}" y="16" text-anchor="middle" font-size="13">{html.escape(title)}</text>')
    # grid and ticks
    xt = _ticks(x0, x1)
    if integer_x:
        xt = [t for t in xt if abs(t - round(t)) < 1e-9] or [float(round(x0))]
    for t in xt:
        X = sx(t)
        out.append(f'<line x1="{X:.1f}" y1="{mt}" x2="{X:.1f}" y2="{mt + ph}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{X:.1f}" y="{mt + ph + 14}" text-anchor="middle">{_fmt(t)}</text>')
    yt = _log_ticks(y0, y1) if log_y else _ticks(y0, y1)
    for t in yt:
        Y = sy(t)
        text = f"{10.0 ** t:.3g}" if log_y else _fmt(t)
        out.append(f'<line x1="{ml}" y1="{Y:.1f}" x2="{ml + pw}" y2="{Y:.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{ml - 5}" y="{Y + 4:.1f}" text-anchor="end">{text}</text>')
    out.append(f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    if xlabel:
        out.append(f'<text x="{ml + pw / 2:.1f}" y="{height - 8}" text-anchor="middle">{html.escape(xlabel)}</text>')
    if ylabel:
        out.append(f'<text transform="translate(14,{mt + ph / 2:.1f}) rotate(-90)" text-anchor="middle">'
                   f'{html.escape(ylabel)}</text>')
    # data (no clipPath: SVG Tiny viewers such as Qt's draw its rectangle); values outside a fixed range clamp
    out.append('<g>')
    for s, x, y, color in prepared:
        ok = np.isfinite(x) & np.isfinite(y)
        y = np.clip(y, y0, y1)
        if s.kind == "points":
            pts = "".join(f"M{sx(a):.1f} {sy(b):.1f}h0.01" for a, b in zip(x[ok], y[ok]))
            if pts:
                out.append(f'<path d="{pts}" stroke="{color}" stroke-width="2.6" stroke-linecap="round" '
                           f'fill="none" opacity="0.7"/>')
            continue
        d, pen_down = [], False
        for a, b, good in zip(x, y, ok):
            if not good:
                pen_down = False
                continue
            d.append(f"{'L' if pen_down else 'M'}{sx(a):.1f} {sy(b):.1f}")
            pen_down = True
        if d:
            out.append(f'<path d="{"".join(d)}" stroke="{color}" stroke-width="1.5" fill="none"/>')
        if 0 < int(ok.sum()) <= MARKED_POINTS:
            out.extend(f'<circle cx="{sx(a):.1f}" cy="{sy(b):.1f}" r="{MARKER_RADIUS}" fill="{color}"/>'
                       for a, b in zip(x[ok], y[ok]))
    out.append("</g>")
    # legend, on a veil so that it stays legible over the data
    if prepared:
        wmax = max(len(p[0].label) for p in prepared) * 6.5 + 34
        out.append(f'<rect x="{ml + 3}" y="{mt + 2}" width="{wmax:.0f}" height="{14 * len(prepared) + 4}" '
                   'fill="white" opacity="0.8"/>')
    for i, (s, _, _, color) in enumerate(prepared):
        ly = mt + 12 + 14 * i
        out.append(f'<line x1="{ml + 8}" y1="{ly - 4}" x2="{ml + 24}" y2="{ly - 4}" stroke="{color}" '
                   f'stroke-width="3"/>')
        out.append(f'<text x="{ml + 28}" y="{ly}" fill="#222">{html.escape(s.label)}</text>')
    out.append("</svg>")
    return "\n".join(out)
