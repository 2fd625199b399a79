"""Colors, pens and pyqtgraph settings shared by every panel.

One color per *signal* across all panels (measured y, predicted ŷ, input x, DPD output u, error), so that an engineer
who learned "orange is the model" in the PSD finds the model in orange in AM/AM, AM/PM and the time domain too.
The plot background follows the application palette (light or dark).
"""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QColor, QGuiApplication, QPalette

#: Signal role → color (Tableau-like hues that read on light and dark backgrounds).
SIGNAL_COLORS: dict[str, str] = {
    "y": "#1f77b4",  # measured PA output y
    "yhat": "#ff7f0e",  # model prediction ŷ
    "x": "#8c8c8c",  # PA input x
    "target": "#9467bd",  # the DPD target g·x (its own color: the input x is drawn too, 20·log10(g) dB lower)
    "u": "#2ca02c",  # DPD output u
    "error": "#d62728",  # prediction error
}
#: Learning-curve series → color.
SERIES_COLORS: dict[str, str] = {
    "train_loss": "#9467bd",
    "val_loss": "#ff7f0e",
    "val_nmse": "#1f77b4",
    "val_aclr": "#2ca02c",
    "val_evm": "#8c564b",
    "best": "#e6b800",
}
_FALLBACK = ["#17becf", "#e377c2", "#bcbd22", "#8c564b", "#7f7f7f"]

#: Shading of the channels in the PSD panel (RGBA).
BAND_BRUSHES = {"main": (31, 119, 180, 28), "adj_left": (214, 39, 40, 22), "adj_right": (214, 39, 40, 22)}


#: Names the trainer uses (PA step and DPD step) → role.
KNOWN_SIGNALS = {
    "measured y": "y", "predicted ŷ": "yhat", "input x": "x", "error": "error",
    "target g·x": "target", "pa(dpd(x))": "yhat", "pa(x) no dpd": "y", "dpd output u": "u",
}


def signal_role(name: str) -> str | None:
    """Map a signal name used in :class:`PlotData` mappings (e.g. ``"measured y"``, ``"predicted ŷ"``) to a role:
    ``y`` (measured / PA output), ``yhat`` (model output), ``x`` (input), ``target`` (the DPD target g·x), ``u`` (DPD
    output), ``error``; None when unknown."""
    n = name.strip().lower()
    if n in KNOWN_SIGNALS:
        return KNOWN_SIGNALS[n]
    if "pa(dpd" in n:
        return "yhat"
    words = n.replace("(", " ").replace(")", " ").split()
    if "error" in n or n.startswith("err") or "e = " in n:
        return "error"
    if "ŷ" in n or "pred" in n or "model" in n or "pa(u)" in n:
        return "yhat"
    if "dpd" in n or (words and words[-1] == "u"):
        return "u"
    if "measured" in n or (words and words[-1] == "y") or n == "y" or n == "output":
        return "y"
    if "target" in n or "g·x" in n:
        return "target"
    if "input" in n or (words and words[-1] == "x"):
        return "x"
    return None


def color_for(name: str, index: int = 0) -> str:
    """Color for a signal name; unknown names get a stable fallback from ``index``."""
    role = signal_role(name)
    if role is not None:
        return SIGNAL_COLORS[role]
    return _FALLBACK[index % len(_FALLBACK)]


def pen_for(name: str, index: int = 0, width: float = 1.5) -> "pg.QtGui.QPen":
    """A cosmetic pen in the signal's color; the error is drawn thinner and a bit transparent."""
    c = QColor(color_for(name, index))
    if signal_role(name) == "error":
        c.setAlpha(200)
        width = max(1.0, width - 0.5)
    return pg.mkPen(c, width=width)


def brush_for(name: str, index: int = 0, alpha: int = 110) -> "pg.QtGui.QBrush":
    """A translucent brush for scatter points of a signal."""
    c = QColor(color_for(name, index))
    c.setAlpha(alpha)
    return pg.mkBrush(c)


def palette_colors() -> tuple[QColor, QColor]:
    """(background, foreground) for plots, taken from the application palette (Base / Text)."""
    app = QGuiApplication.instance()
    if app is None:
        return QColor("white"), QColor("black")
    pal = QGuiApplication.palette()
    return pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Text)


def configure_pyqtgraph(background: QColor | str | None = None, foreground: QColor | str | None = None) -> None:
    """Global pyqtgraph options: antialiasing, background/foreground following the palette unless given."""
    bg, fg = palette_colors()
    pg.setConfigOptions(
        antialias=True,
        background=background if background is not None else bg,
        foreground=foreground if foreground is not None else fg,
        imageAxisOrder="row-major",
    )


# ---------------------------------------------------------------------------------------------------- light / dark
SCHEMES = ("system", "light", "dark")
_SYSTEM_PALETTE: QPalette | None = None
_SYSTEM_STYLE: str | None = None


def scheme_palette(scheme: str) -> QPalette:
    """The QPalette of ``scheme``: ``light`` and ``dark`` are explicit palettes (Fusion's roles, WCAG-readable text
    on their bases); ``system`` is the palette the application started with."""
    global _SYSTEM_PALETTE
    if _SYSTEM_PALETTE is None:
        _SYSTEM_PALETTE = QPalette(QGuiApplication.palette())
    if scheme == "system":
        return QPalette(_SYSTEM_PALETTE)
    dark = scheme == "dark"
    window, base, alt, text, button, highlight, disabled = (
        ("#2b2d30", "#1e1f22", "#26282b", "#dfe1e5", "#3c3f41", "#2f65ca", "#7f8287") if dark else
        ("#efefef", "#ffffff", "#f5f5f5", "#1a1a1a", "#e6e6e6", "#308cc6", "#8a8a8a"))
    pal = QPalette()
    R, G = QPalette.ColorRole, QPalette.ColorGroup
    for role, color in ((R.Window, window), (R.WindowText, text), (R.Base, base), (R.AlternateBase, alt),
                        (R.Text, text), (R.Button, button), (R.ButtonText, text), (R.ToolTipBase, base),
                        (R.ToolTipText, text), (R.Highlight, highlight), (R.HighlightedText, "#ffffff"),
                        (R.BrightText, "#ff5555"), (R.Link, "#5aa0ff" if dark else "#0b62c4"),
                        (R.PlaceholderText, disabled)):
        pal.setColor(role, QColor(color))
    for role in (R.WindowText, R.Text, R.ButtonText):
        pal.setColor(G.Disabled, role, QColor(disabled))
    return pal


#: Widget classes whose indicator gets :func:`indicator_palette` (the toolbar's PA/DPD and "Live batch preview").
INDICATOR_CLASSES = ("QRadioButton", "QCheckBox")


def indicator_palette(scheme: str) -> QPalette | None:
    """The palette of :data:`INDICATOR_CLASSES` under ``scheme``, or None (they keep the application's).

    Fusion (Qt 6.11, measured by recoloring each role) draws a radio button's and a check box's indicator from three
    roles only: the ring in Window darker(140), the fill in Base, the mark in Text. On the dark Window that ring is
    darker still and disappears (WCAG contrast 1.2 with the toolbar); ``dark`` therefore gives these classes a light
    Window, which only that ring reads (they paint no background), so that it comes out #7d8086."""
    if scheme != "dark":
        return None
    pal = scheme_palette(scheme)
    pal.setColor(QPalette.ColorRole.Window, QColor("#afb3bb"))
    return pal


def apply_scheme(scheme: str) -> None:
    """Switch the running application to ``scheme`` (one of :data:`SCHEMES`); the widgets and plots follow through
    their PaletteChange events. Raises ValueError for another name."""
    if scheme not in SCHEMES:
        raise ValueError(f"color scheme: expected one of {SCHEMES}, got {scheme!r}")
    from PySide6.QtWidgets import QApplication

    global _SYSTEM_STYLE
    app = QApplication.instance()
    palette = scheme_palette(scheme)  # remembers the start-up palette on the first call
    if _SYSTEM_STYLE is None:
        _SYSTEM_STYLE = app.style().name()
    if scheme != "system" and app.style().name().lower() != "fusion":
        app.setStyle("Fusion")  # the native styles of some platforms ignore an application palette
    elif scheme == "system" and app.style().name() != _SYSTEM_STYLE:
        app.setStyle(_SYSTEM_STYLE)
    app.setPalette(palette)  # also drops the class palettes an earlier scheme set
    indicators = indicator_palette(scheme)
    if indicators is not None:
        for name in INDICATOR_CLASSES:
            app.setPalette(indicators, name)
    configure_pyqtgraph()
