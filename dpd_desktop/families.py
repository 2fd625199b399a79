"""The model families' names, without PyTorch: the configuration checks a backbone against them without importing
the models (PyTorch's import: benchmarks/results/2026-12-04-notes-core.md). models/registry.py holds the families themselves;
tests/unit/test_families.py checks that both name the same ones, in the same order."""

#: every backbone :func:`dpd_desktop.models.build_model` accepts, in the registry's order
BACKBONES: tuple[str, ...] = ("gru", "dgru", "lstm", "tres_gru", "deltagru", "tres_deltagru", "gru_amp", "pn_gru",
                              "pn_gru2", "gru_gain", "gru_gain3", "gru_gain3p", "gru_gain5", "tcn", "rvtdcnn", "mp", "gmp")
#: the polynomial baselines (memory polynomial, generalized memory polynomial), fitted by least squares
POLY_BACKBONES: tuple[str, ...] = ("mp", "gmp")
#: the families with a fixed-point lowering (quant/lower.py LOWERINGS): quantisation-aware training and fixed export
LOWERABLE: tuple[str, ...] = ("gru", "dgru", "deltagru", "tcn")
