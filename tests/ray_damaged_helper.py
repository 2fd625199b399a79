"""The window's Ray helper (dpd_desktop/sweep/ray_helper.py) returning damaged files, as a broken cluster would:

    python tests/ray_damaged_helper.py N:FILE[,N:FILE...] HELPER-ARGUMENTS...

replaces the bytes of FILE returned by trial N with text that is not that file's format (tests/unit/test_ray_sweep.py).
"""
from __future__ import annotations

import sys

from dpd_desktop.sweep.ray_helper import helper_main


def parse_damage(spec: str) -> dict[int, list[str]]:
    """``N:FILE,...`` as {trial number: [file names]}. Raises ValueError."""
    out: dict[int, list[str]] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        n, sep, name = item.partition(":")
        if not sep or not n.isdigit() or not name:
            raise ValueError(f"damage: cannot read {item!r} (expected N:FILE)")
        out.setdefault(int(n), []).append(name)
    return out


def damage_hook(damage: dict[int, list[str]]):
    """The RayExecutor's ``returned_files_hook`` that damages the files of ``damage``."""
    def hook(trial, files: dict[str, bytes]) -> dict[str, bytes]:
        names = damage.get(trial.number, [])
        return {k: (b"{damaged by a test\n" if k in names else v) for k, v in files.items()}
    return hook


if __name__ == "__main__":
    sys.exit(helper_main(sys.argv[2:], returned_files_hook=damage_hook(parse_damage(sys.argv[1]))))
