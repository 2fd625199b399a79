"""Instruments from the command line's and the window's words.

Instrument specs (``--generator`` / ``--analyzer``):

* ``virtual`` — the virtual bench (virtual.py), with the PA of ``--virtual-pa`` or ``--pa-run``;
* ``sim`` — the pyvisa-sim instruments (sim.py) answering the R&S SMW/FSW commands; ``sim:timeout`` is the analyzer
  that never answers its I/Q fetch;
* ``visa:<RESOURCE>[;profile=<name>][;backend=@py][;timeout=<s>][;transfer=block|file][;share=<dir>]
  [;path=<instrument path of share>][;ascii]`` — a real instrument through pyvisa + pyvisa-py, e.g.
  ``visa:TCPIP0::192.168.1.20::hislip0::INSTR;profile=rs-smw``. Profiles: profiles.py (``generic``, ``rs-smw``,
  ``rs-fsw``; default rs-smw for a generator, rs-fsw for an analyzer).

Virtual PA spec (``--virtual-pa``): comma-separated ``key=value`` of ``delay`` (samples), ``snr`` (dB), ``gain-drift``
(dB per capture), ``phase-drift`` (° per capture), ``gain`` (dB), ``input-fs`` (dBm), ``seed``; e.g.
``delay=3.37,snr=40``. Bad words raise ValueError naming the option and the key.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .profiles import ANALYZER_PROFILES, GENERATOR_PROFILES
from .scpi import open_visa
from .scpi_drivers import TRANSFERS, ScpiAnalyzer, ScpiGenerator
from .virtual import FaultPlan, MemoryPolynomialPA, RunPA, VirtualAnalyzer, VirtualBench, VirtualGenerator

__all__ = ["InstrumentSpec", "parse_instrument", "parse_virtual_pa", "VIRTUAL_PA_KEYS", "Bench", "open_bench"]

KINDS = ("virtual", "sim", "visa")
#: --virtual-pa keys → VirtualBench keyword arguments
VIRTUAL_PA_KEYS = {"delay": "delay_samples", "snr": "snr_db", "gain-drift": "gain_drift_db",
                   "phase-drift": "phase_drift_deg", "gain": "gain_db", "input-fs": "input_fs_dbm", "seed": "seed"}


@dataclass(frozen=True)
class InstrumentSpec:
    kind: str
    resource: str = ""
    options: dict[str, str] = field(default_factory=dict)
    text: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "resource": self.resource, "options": dict(self.options)}


def parse_instrument(text: str, option: str = "--generator") -> InstrumentSpec:
    """``text`` as an :class:`InstrumentSpec` (module docstring). Raises ValueError naming ``option``."""
    t = (text or "").strip()
    if t == "virtual":
        return InstrumentSpec("virtual", text=t)
    if t in ("sim", "sim:timeout"):
        return InstrumentSpec("sim", t.partition(":")[2], text=t)
    if t.startswith("visa:"):
        parts = t[5:].split(";")
        if not parts[0]:
            raise ValueError(f"{option} {text!r}: no VISA resource after 'visa:'")
        opts: dict[str, str] = {}
        for p in parts[1:]:
            k, eq, v = p.partition("=")
            k = k.strip()
            if k not in ("profile", "backend", "timeout", "transfer", "share", "path", "ascii"):
                raise ValueError(f"{option} {text!r}: unknown option {k!r} (profile, backend, timeout, transfer, "
                                 "share, path, ascii)")
            opts[k] = v.strip() if eq else "1"
        return InstrumentSpec("visa", parts[0].strip(), opts, text=t)
    raise ValueError(f"{option} {text!r}: expected virtual, sim or visa:<RESOURCE>[;profile=...]")


def parse_virtual_pa(text: str | None) -> dict[str, Any]:
    """``--virtual-pa`` words → VirtualBench keyword arguments (module docstring)."""
    out: dict[str, Any] = {}
    for item in filter(None, (s.strip() for s in (text or "").split(","))):
        k, eq, v = item.partition("=")
        if not eq or k.strip() not in VIRTUAL_PA_KEYS:
            raise ValueError(f"--virtual-pa {text!r}: expected key=value with keys {', '.join(VIRTUAL_PA_KEYS)}, "
                             f"got {item!r}")
        try:
            out[VIRTUAL_PA_KEYS[k.strip()]] = int(v) if k.strip() == "seed" else float(v)
        except ValueError:
            raise ValueError(f"--virtual-pa {text!r}: {k.strip()} must be a number, got {v!r}") from None
    return out


@dataclass
class Bench:
    """The generator and analyzer the loop drives; ``virtual`` is the bench behind virtual instruments (None
    otherwise); ``describe`` what config.json records."""

    generator: Any
    analyzer: Any
    virtual: VirtualBench | None = None
    describe: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        for inst in (self.generator, self.analyzer):
            try:
                inst.close()
            except Exception:  # noqa: BLE001 - closing never fails the caller
                pass


def _visa(spec: InstrumentSpec, role: str, timeout_s: float):
    o = spec.options
    name = o.get("profile", "rs-smw" if role == "generator" else "rs-fsw")
    table = GENERATOR_PROFILES if role == "generator" else ANALYZER_PROFILES
    if name not in table:
        raise ValueError(f"--{role} {spec.text!r}: unknown profile {name!r} (known: {', '.join(table)})")
    try:
        timeout = float(o.get("timeout", timeout_s))
    except ValueError:
        raise ValueError(f"--{role} {spec.text!r}: timeout must be seconds, got {o['timeout']!r}") from None
    session = open_visa(spec.resource, backend=o.get("backend", "@py"), name=role, timeout_s=timeout)
    if role == "generator":
        transfer = o.get("transfer", "block")
        if transfer not in TRANSFERS:
            raise ValueError(f"--generator {spec.text!r}: transfer must be one of {TRANSFERS}")
        return ScpiGenerator(session, table[name], transfer=transfer, share_dir=o.get("share"),
                             instrument_path=o.get("path"))
    return ScpiAnalyzer(session, table[name], binary="ascii" not in o)


def open_bench(generator: InstrumentSpec, analyzer: InstrumentSpec, *, pa=None, virtual_pa: dict | None = None,
               workspace=None, pa_run: str | None = None, sim_yaml: Path | None = None,
               share_dir: Path | None = None, timeout_s: float = 10.0, faults: FaultPlan | None = None) -> Bench:
    """Open both instruments. Virtual ones share one :class:`VirtualBench` whose PA is ``pa`` (a callable), else
    the trained PA run ``pa_run`` of ``workspace``, else the default memory-polynomial PA; ``virtual_pa`` are its
    impairments. ``sim`` ones need ``sim_yaml`` (sim.py ``write_sim_yaml``) and ``share_dir`` (where the generator's
    waveform file goes). Raises ValueError for a bad combination, InstrumentError when a connection fails."""
    if (generator.kind == "virtual") != (analyzer.kind == "virtual"):
        raise ValueError("--generator virtual and --analyzer virtual go together (the virtual PA sits between them)")
    if generator.kind == "virtual":
        if pa is None:
            pa = RunPA(workspace, pa_run) if pa_run else MemoryPolynomialPA()
        bench = VirtualBench(pa, **(virtual_pa or {}))
        return Bench(VirtualGenerator(bench, faults, timeout_s), VirtualAnalyzer(bench, faults, timeout_s), bench,
                     {"generator": generator.to_dict(), "analyzer": analyzer.to_dict(), "virtual": bench.describe()})
    if pa is not None or pa_run or virtual_pa:
        raise ValueError("--pa-run / --virtual-pa need --generator virtual --analyzer virtual (with instruments, "
                         "the PA is the one on the bench)")
    from . import sim

    gen = ana = None
    try:
        if generator.kind == "sim":
            if sim_yaml is None or share_dir is None:
                raise ValueError("the simulated instruments need their YAML definition and a share folder")
            gen = ScpiGenerator(open_visa(sim.GENERATOR, backend=f"{sim_yaml}@sim", name="generator",
                                          timeout_s=timeout_s), GENERATOR_PROFILES["rs-smw"], transfer="file",
                                share_dir=share_dir)
        else:
            gen = _visa(generator, "generator", timeout_s)
        if analyzer.kind == "sim":
            if sim_yaml is None:
                raise ValueError("the simulated instruments need their YAML definition")
            res = sim.SILENT_ANALYZER if analyzer.resource == "timeout" else sim.ANALYZER
            ana = ScpiAnalyzer(open_visa(res, backend=f"{sim_yaml}@sim", name="analyzer", timeout_s=timeout_s),
                               ANALYZER_PROFILES["rs-fsw"], binary=False)
        else:
            ana = _visa(analyzer, "analyzer", timeout_s)
    except BaseException:
        for inst in (gen, ana):
            if inst is not None:
                inst.close()
        raise
    return Bench(gen, ana, None, {"generator": generator.to_dict(), "analyzer": analyzer.to_dict()})
