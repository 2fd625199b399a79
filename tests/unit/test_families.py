"""The torch-free family names (dpd_desktop/families.py) against the registry that builds the models."""
import subprocess
import sys

from dpd_desktop import families
from dpd_desktop.models import BACKBONES, POLY_BACKBONES, REGISTRY


def test_the_names_are_the_registrys_in_its_order():
    assert families.BACKBONES == BACKBONES == tuple(REGISTRY)
    assert families.POLY_BACKBONES == POLY_BACKBONES == tuple(k for k, f in REGISTRY.items() if f.poly)


def test_validating_a_configuration_does_not_import_pytorch():
    code = ("import sys\nfrom dpd_desktop.config import ExperimentConfig\n"
            "ExperimentConfig(step='pa', backbone='tcn', dataset='x').validate()\n"
            "ExperimentConfig(step='pa', backbone='gmp', dataset='x').validate()\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_planning_a_sweeps_groups_does_not_import_pytorch():
    code = ("import sys\nfrom dpd_desktop.config import ExperimentConfig\n"
            "from dpd_desktop.sweep.groups import plan_trial_groups\n"
            "cfgs = [ExperimentConfig(step='pa', dataset='x', seed=s, device='cuda', kernel='fast').validate() "
            "for s in range(3)]\n"
            "print(plan_trial_groups(cfgs, 'auto'), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[[0, 1, 2]] False"  # one group of three (fast on CUDA: up to 8), no PyTorch


def test_the_kernel_names_of_the_settings_table_are_the_kernels_own():
    from dpd_desktop.config import KERNELS
    from dpd_desktop.kernels.record import DEFAULT_KERNEL, FAST, REFERENCE

    assert KERNELS == (REFERENCE, FAST) and DEFAULT_KERNEL == KERNELS[0] == "reference"


def test_the_lowerable_names_are_the_lowerings_own():
    from dpd_desktop.quant.lower import LOWERINGS

    assert set(families.LOWERABLE) == set(LOWERINGS) and len(families.LOWERABLE) == len(LOWERINGS)
