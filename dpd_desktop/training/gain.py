"""The DPD target's gain g (target = g·x, reference §2.3) under a chosen rule, and the output-power report of a DPD.

Rules (``ExperimentConfig.gain_rule``), all in float64 on the **full** training split (before ``max_train_samples``,
as the reference computes its g, §1.4); the formulas are :data:`FORMULAS`:

* ``peak`` (default): :attr:`IQDataset.gain` itself, the reference's rule: the PA's most compressed gain, so a DPD
  meeting the target backs the output off.
* ``small-signal``: ``g = |c|``, c the least-squares complex gain over the ``floor(0.4 N)`` smallest-``|x|`` samples
  (stable argsort; no delay alignment: the readers' contract is sample-aligned x, y), the estimator of OpenDPD 2.4's
  ``estimate_gain`` (quantile 0.4). A real g keeps the target ``g·x`` as the reference's, so only the output level
  differs between rules; ``arg c`` is recorded and the DPD still undoes it.
* ``rms``: a DPD meeting g·x keeps the mean output power of the PA without DPD.

:meth:`TargetGain.block` (config.json ``gain``) records the rule, value, formula and every candidate.

:func:`equal_power_report` (DPD runs, test split) compares the cascade's output power with the PA's alone and ACLR/EVM
**at equal output power**: the frozen PA is driven at ``a·x`` whose output RMS equals the cascade's (fixed-point
``a <- a·rms_target/rms(PA(a·x))`` to 0.001 dB), as OpenDPD 2.3's arena compares DPDs, so a DPD gets no credit for
backing off. EVM is gain-normalised for both (against ``c·x``); ACLR is level-invariant. With ``a > 1`` the PA
model is driven beyond the peak it was trained on, as the cascade itself is.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import GAIN_RULES
from ..data import DatasetError
from ..metrics.profiles import compute_profile_metrics
from ..metrics.transfer import SMALL_SIGNAL_FRACTION, as_complex, small_signal_gain

__all__ = ["GAIN_RULES", "TargetGain", "equal_power_report", "gain_candidates", "target_gain"]

FORMULAS = {
    "peak": "max|y_train| / max|x_train| (reference §1.4)",
    "small-signal": "|c|, c = sum conj(x) y / sum |x|^2 over the floor(0.4 N) smallest-|x| training samples",
    "rms": "rms(y_train) / rms(x_train)",
    "fixed": "the configured value (gain_value), e.g. a protocol's calibrated gain",
}
EQUAL_POWER_TOL_DB = 1e-3
EQUAL_POWER_MAX_ITER = 30


@dataclass(frozen=True)
class TargetGain:
    """The DPD target's gain: ``value`` (real, > 0) by ``rule``; ``candidates`` every rule's value;
    ``small_signal`` the complex c (re, im), its magnitude and phase [deg] and the sample count used."""

    rule: str
    value: float
    candidates: dict[str, float] = field(default_factory=dict)
    small_signal: dict[str, Any] = field(default_factory=dict)

    def block(self) -> dict[str, Any]:
        """config.json's ``gain`` block."""
        return {"value": self.value, "rule": self.rule, "formula": FORMULAS[self.rule],
                "candidates": dict(self.candidates), "small_signal": dict(self.small_signal)}


def _train_complex(ds) -> tuple[np.ndarray, np.ndarray]:
    tr = ds.train
    x = tr.x64 if getattr(tr, "x64", None) is not None else tr.x.astype(np.float64)
    y = tr.y64 if getattr(tr, "y64", None) is not None else tr.y.astype(np.float64)
    return as_complex(x), as_complex(y)


#: gain_candidates per dataset object (an IQDataset is frozen and never changed in place): the members of a sweep
#: group share one loaded dataset, whose small-signal gain's sort would otherwise run once per member
_CANDIDATES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def gain_candidates(ds) -> tuple[dict[str, float], dict[str, Any]]:
    """Every rule's g on ``ds`` (``{"peak", "small-signal", "rms"}``) and the small-signal complex gain's record
    (computed once per dataset object; callers get copies)."""
    try:
        found = _CANDIDATES.get(ds)
    except TypeError:  # not weak-referenceable: computed each time
        found = None
    if found is None:
        found = _gain_candidates(ds)
        try:
            _CANDIDATES[ds] = found
        except TypeError:
            pass
    return dict(found[0]), dict(found[1])


def _gain_candidates(ds) -> tuple[dict[str, float], dict[str, Any]]:
    x, y = _train_complex(ds)
    c, k = small_signal_gain(x, y)
    ex = float(np.sum(np.abs(x) ** 2))
    cands = {"peak": float(ds.gain), "small-signal": abs(c),
             "rms": math.sqrt(float(np.sum(np.abs(y) ** 2)) / ex) if ex > 0 else math.nan}
    ss = {"re": c.real, "im": c.imag, "abs": abs(c), "phase_deg": math.degrees(math.atan2(c.imag, c.real)),
          "fraction": SMALL_SIGNAL_FRACTION, "n_samples": k}
    return cands, ss


def target_gain(ds, rule: str, value: float | None = None) -> TargetGain:
    """The DPD target gain of ``ds`` under ``rule`` (module docstring). ``peak`` is ``float(ds.gain)`` exactly.
    ``value`` (``gain_value``): that g instead, recorded as rule ``fixed`` (the rules' candidates beside it).

    Raises:
        ValueError: unknown rule. DatasetError: the rule's g is not a finite positive number on this training split
            (naming the dataset and the rule).
    """
    if rule not in GAIN_RULES:
        raise ValueError(f"unknown gain rule {rule!r}; expected one of {', '.join(GAIN_RULES)}")
    try:
        cands, ss = gain_candidates(ds)
    except ValueError as exc:
        if rule == "peak":  # the reference's rule never needed the others: record them as unknown
            cands, ss = {"peak": float(ds.gain), "small-signal": math.nan, "rms": math.nan}, {}
        else:
            raise DatasetError(f"gain rule {rule}: {exc}", path=ds.source, field="train",
                               expected="measured, non-zero training data") from exc
    g = float(ds.gain) if rule == "peak" else cands[rule]
    if value is not None:
        rule, g = "fixed", float(value)
    if not (math.isfinite(g) and g > 0):
        raise DatasetError(f"gain rule {rule} gives g = {g} on the training split", path=ds.source, field="train",
                           expected="measured, non-zero training data")
    return TargetGain(rule=rule, value=g, candidates=cands, small_signal=ss)


# ---------------------------------------------------------------------------------------------- equal output power
def _rms(seg: np.ndarray, n: int) -> float:
    a = np.asarray(seg, dtype=np.float64).reshape(-1, 2)[:n]
    return math.sqrt(float(np.mean(a[:, 0] ** 2 + a[:, 1] ** 2)))


def linear_reference(x_seg: np.ndarray, out_seg: np.ndarray, n: int) -> np.ndarray:
    """``c·x`` as (S, N, 2) float32 segments, c = sum conj(x) out / sum |x|^2 over the first n samples (float64)."""
    xc, oc = as_complex(np.reshape(x_seg, (-1, 2))), as_complex(np.reshape(out_seg, (-1, 2)))
    c = np.sum(np.conj(xc[:n]) * oc[:n]) / np.sum(np.abs(xc[:n]) ** 2)
    r = c * xc
    return np.stack([r.real, r.imag], axis=-1).astype(np.float32).reshape(np.shape(x_seg))


def equal_power_report(evaluator, test: dict[str, Any], net, profile: str) -> dict[str, Any]:
    """Output power with and without DPD and ACLR/EVM at equal output power, on the test split (module docstring).

    Args:
        evaluator: the run's :class:`~dpd_desktop.training.evaluation.Evaluator` (its test segments, baseline PA(x)).
        test: the final test evaluation (``pred`` = PA(DPD(x)) segments). net: the cascade (its ``pa`` is frozen).
        profile: the run's metric profile.

    Returns: flat dict (status.json, results.h5 attributes): ``out_power_with_dpd_db``/``out_power_without_dpd_db``
        (10·log10 of the mean power, dB re 1 unit²), ``eqp_drive_db`` (20·log10 a), ``eqp_residual_db`` (output
        power of PA(a·x) minus the cascade's, dB), ``eqp_converged``, ``eqp_ACLR_with_dpd``/``eqp_ACLR_without_dpd``
        (ACLR_AVG, dBc), ``eqp_EVM_with_dpd``/``eqp_EVM_without_dpd`` (gain-normalised EVM, dB), ``eqp_profile``.
    """
    es = evaluator.sets["test"]
    n, spec = es["n"], evaluator.spec
    pred = test["pred"]
    r_with = _rms(pred, n)
    r0 = _rms(evaluator.baseline("test", net), n)
    out: dict[str, Any] = {"out_power_with_dpd_db": 20 * math.log10(r_with) if r_with > 0 else math.nan,
                           "out_power_without_dpd_db": 20 * math.log10(r0) if r0 > 0 else math.nan,
                           "eqp_profile": profile}
    a, off, resid = 1.0, evaluator.baseline("test", net), math.nan
    converged = False
    if r_with > 0 and r0 > 0:
        r = r0
        for _ in range(EQUAL_POWER_MAX_ITER):
            resid = 20 * math.log10(r / r_with)
            if abs(resid) <= EQUAL_POWER_TOL_DB:
                converged = True
                break
            a *= r_with / r
            off = evaluator.forward_segments(net.pa, es["x"] * a)
            r = _rms(off, n)
            if not r > 0:
                break
        else:
            resid = 20 * math.log10(r / r_with)
            converged = abs(resid) <= EQUAL_POWER_TOL_DB
    x_seg = es["x_seg"]
    m_with = compute_profile_metrics(profile, pred, linear_reference(x_seg, pred, n), spec, n)
    m_off = compute_profile_metrics(profile, off, linear_reference(x_seg, off, n), spec, n)
    out.update(eqp_drive_db=20 * math.log10(a), eqp_residual_db=resid, eqp_converged=bool(converged),
               eqp_ACLR_with_dpd=float(m_with["ACLR_AVG"]), eqp_ACLR_without_dpd=float(m_off["ACLR_AVG"]),
               eqp_EVM_with_dpd=float(m_with["EVM"]), eqp_EVM_without_dpd=float(m_off["EVM"]))
    return out
