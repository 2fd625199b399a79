"""Limits (issue 10 point 5): threads, CUDA memory ceiling, wall-clock limit, device; the defaults of settings.json;
CUDA out-of-memory and a non-finite loss injected on the CPU (training/limits.py FaultHook) end the run
failed with epoch, batch, device and a remedy, and best.pt stays the last finite best."""
import argparse
import json
import os

import pytest
import torch

from dpd_desktop import cli
from dpd_desktop.cli.limits import parse_duration
from dpd_desktop.config import ConfigError, ExperimentConfig
from dpd_desktop.data import make_demo_dataset
from dpd_desktop.process import Exit
from dpd_desktop.runs.artifacts import load_checkpoint
from dpd_desktop.runs.record import RunRecord
from dpd_desktop.runs.settings import WorkspaceSettings
from dpd_desktop.runs.workspace import Workspace
from dpd_desktop.training import limits
from dpd_desktop.training.trainer import Trainer


@pytest.fixture(scope="module")
def ds():
    return make_demo_dataset(seed=2, n_train=3000, n_val=4096, n_test=4096)


@pytest.fixture(autouse=True)
def keep_threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def cfg(**kw):
    base = dict(step="pa", dataset="demo", backbone="gru", hidden_size=6, epochs=3, frame_length=40, stride=8,
                batch_size=32, device="cpu", lr=5e-3)
    base.update(kw)
    return ExperimentConfig(**base)


@pytest.mark.parametrize("field,value,words", [
    ("threads", (os.cpu_count() or 1) + 1, "CPU cores of this machine"),
    ("threads", 0, "positive integer"),
    ("cuda_memory_fraction", 0, "0 < f <= 1"),
    ("cuda_memory_fraction", 1.5, "0 < f <= 1"),
    ("cuda_memory_fraction", True, "0 < f <= 1"),
    ("time_limit_s", 0, "positive number of seconds"),
    ("time_limit_s", float("inf"), "positive number of seconds"),
    ("device", "gpu", "auto, cpu, cuda or cuda:N"),
])
def test_bad_limits_are_config_errors(field, value, words):
    with pytest.raises(ConfigError, match=words) as err:
        cfg(**{field: value}).validate()
    assert err.value.field == field


def test_durations():
    assert [parse_duration(t) for t in ("90", "30m", "2h", "1.5d", " 45s ")] == [90.0, 1800.0, 7200.0, 129600.0, 45.0]
    for bad in ("", "abc", "0", "-5", "10x", "5 m s"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_duration(bad)


def test_cli_refuses_bad_limits_before_a_run_folder(tmp_path, capsys):
    base = ["--workspace", str(tmp_path), "train-pa", "--dataset", "demo", "--epochs", "1"]
    assert cli.main(base + ["--threads", str((os.cpu_count() or 1) + 1)]) == Exit.USAGE
    assert "threads:" in capsys.readouterr().err
    assert cli.main(base + ["--cuda-memory-fraction", "0"]) == Exit.USAGE
    assert "cuda_memory_fraction" in capsys.readouterr().err
    with pytest.raises(SystemExit) as ex:
        cli.main(base + ["--time-limit", "soon"])
    assert ex.value.code == 2
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_limits_and_workspace_defaults_are_recorded(tmp_path, capsys):
    """settings.json's defaults apply where the run sets nothing; the run's own setting wins; config.json records
    the limits that were used."""
    WorkspaceSettings(default_device="cpu", default_threads=1, default_time_limit_s=3600.0,
                      default_cuda_memory_fraction=0.5).save(tmp_path)
    small = ["--dataset", "demo", "--epochs", "1", "--hidden-size", "4", "--frame-length", "40", "--stride", "16",
             "--max-train-samples", "600", "--batch-size-eval", "256", "--quiet", "--no-plots"]
    assert cli.main(["--workspace", str(tmp_path), "train-pa", *small]) == Exit.OK
    assert cli.main(["--workspace", str(tmp_path), "train-pa", *small, "--time-limit", "2h", "--threads",
                     str(os.cpu_count()), "--cuda-memory-fraction", "0.25"]) == Exit.OK
    first, second = sorted((tmp_path / "runs").iterdir())
    e1 = json.loads((first / "config.json").read_text())["experiment"]
    e2 = json.loads((second / "config.json").read_text())["experiment"]
    assert (e1["device"], e1["threads"], e1["time_limit_s"], e1["cuda_memory_fraction"]) == ("cpu", 1, 3600.0, 0.5)
    assert (e2["device"], e2["threads"], e2["time_limit_s"], e2["cuda_memory_fraction"]) == (
        "cpu", os.cpu_count(), 7200.0, 0.25)
    assert json.loads((first / "config.json").read_text())["training"]["torch_threads"] == 1


def test_cuda_memory_fraction_is_applied_on_the_run_device(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", lambda f, d: calls.append((f, d)))
    limits.apply_device_limits(cfg(cuda_memory_fraction=0.3), torch.device("cuda:1"))
    limits.apply_device_limits(cfg(cuda_memory_fraction=0.3), torch.device("cpu"))
    limits.apply_device_limits(cfg(), torch.device("cuda:0"))
    assert calls == [(0.3, torch.device("cuda:1"))]


def test_time_limit_cancels_after_the_current_batch(tmp_path, ds):
    res = Trainer(cfg(epochs=500, time_limit_s=1.0), dataset=ds, workspace=Workspace(tmp_path)).run()
    assert res.state == "cancelled" and res.message == "time limit"
    rec = RunRecord.open(res.run_dir)
    assert rec.state == "cancelled" and rec.status_doc["message"] == "time limit"
    assert 0 <= rec.status_doc["epochs_completed"] < 500
    assert "cancelled: time limit after" in (res.run_dir / "log.txt").read_text()


def test_time_limit_timer():
    t = limits.StopRequest()
    t.start_clock(0.01)
    assert t._event.wait(10) and t.timed_out and t.reason == limits.TIME_LIMIT_REASON
    off = limits.StopRequest()
    off.start_clock(None)
    assert off._timer is None and not off.timed_out and not off.is_set()


def _best_is_last_finite(run_dir, epoch):
    state, meta = load_checkpoint(run_dir / "best.pt")
    last = torch.load(run_dir / "last.pt", weights_only=True)
    assert meta["epoch"] == last["best"]["epoch"] == epoch
    assert all(torch.equal(state[k], last["best"]["model"][k]) and torch.isfinite(state[k]).all() for k in state)


def test_injected_oom_fails_with_epoch_batch_device_and_remedy(tmp_path, ds):
    res = Trainer(cfg(), dataset=ds, workspace=Workspace(tmp_path), fault=limits.FaultHook("oom", 1, 2)).run()
    assert res.state == "failed"
    want = "out of memory on cpu at epoch 1, batch 2: lower batch size or hidden size / set --cuda-memory-fraction"
    assert res.message.startswith(want), res.message
    rec = RunRecord.open(res.run_dir)
    assert rec.state == "failed" and rec.status_doc["message"].startswith(want)
    assert rec.status_doc["epochs_completed"] == 1
    _best_is_last_finite(res.run_dir, 0)


def test_injected_nan_loss_fails_and_keeps_the_last_finite_best(tmp_path, ds):
    res = Trainer(cfg(epochs=4), dataset=ds, workspace=Workspace(tmp_path), fault=limits.FaultHook("nan", 2, 3)).run()
    assert res.state == "failed"
    assert res.message.startswith("training diverged on cpu at epoch 2, batch 3: the training loss is nan (lr 0.005); "
                                  "lower the learning rate, check the data for NaN"), res.message
    rec = RunRecord.open(res.run_dir)
    assert rec.state == "failed" and rec.status_doc["epochs_completed"] == 2
    assert [int(r["EPOCH"]) for r in rec.history()] == [0, 1]
    _best_is_last_finite(res.run_dir, 1)  # val NMSE improves at epoch 1 at this lr


def test_a_bad_fault_hook_is_refused():
    with pytest.raises(ValueError, match="'segv': expected 'oom' or 'nan'"):
        limits.FaultHook("segv", 1, 0)


def test_the_window_says_a_run_stopped_at_its_time_limit():
    from dpd_desktop.gui.session import cancelled_message
    from dpd_desktop.runs.events import RunCancelled

    ev = RunCancelled(run_id="r", run_dir="/r", epochs_completed=2, best_epoch=1, reason=limits.TIME_LIMIT_REASON)
    assert cancelled_message(ev) == ("Run stopped (time limit) after 2 completed epochs; the best checkpoint so far "
                                     "(epoch 1) is kept.")


@pytest.mark.parametrize("doc, message", [
    ({"retention_hours": "24"}, "field 'retention_hours' = '24': expected a number, not a string"),
    ({"default_time_limit_s": "20"}, "field 'default_time_limit_s' = '20': expected a number or null, not a string"),
    ({"default_threads": 2.5}, "field 'default_threads' = 2.5: expected an integer or null, not a float"),
    ({"default_threads": True}, "field 'default_threads' = True: expected an integer or null, not a bool"),
    ({"retention_hours": -1}, "field 'retention_hours' = -1 is out of range"),
])
def test_settings_of_a_wrong_type_say_the_type_expected(tmp_path, doc, message):
    """A wrong JSON type in settings.json is named as such, not as a value "out of range"."""
    from dpd_desktop.runs.settings import SettingsError, WorkspaceSettings

    (tmp_path / "settings.json").write_text(json.dumps(doc))
    with pytest.raises(SettingsError) as err:
        WorkspaceSettings.load(tmp_path)
    assert str(err.value) == f"{tmp_path / 'settings.json'}: {message}"


def test_a_bad_default_from_settings_names_settings_json(tmp_path, capsys):
    """A limit the run did not set but took from settings.json (here more threads than this machine has) is
    refused naming settings.json and its field: the user never typed --threads."""
    too_many = (os.cpu_count() or 1) + 1
    (tmp_path / "settings.json").write_text(json.dumps({"default_threads": too_many}))
    base = ["--workspace", str(tmp_path), "train-pa", "--dataset", "demo", "--epochs", "1"]
    assert cli.main(base) == Exit.USAGE
    err = capsys.readouterr().err
    assert (f"threads: {too_many} is more than the {os.cpu_count() or 1} CPU cores of this machine "
            f"(the default_threads of {tmp_path / 'settings.json'})") in err
    assert cli.main(base + ["--threads", str(too_many)]) == Exit.USAGE  # typed: no settings.json in the message
    assert "settings.json" not in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("device", ["gpu", "cuda:x", " cpu"])
def test_a_default_device_no_device_can_have_is_refused_naming_settings_json(tmp_path, device):
    from dpd_desktop.runs.settings import SettingsError, WorkspaceSettings

    (tmp_path / "settings.json").write_text(json.dumps({"default_device": device}))
    with pytest.raises(SettingsError) as err:
        WorkspaceSettings.load(tmp_path)
    assert str(err.value) == (f"{tmp_path / 'settings.json'}: field 'default_device' = {device!r}: expected auto, "
                              "cpu, cuda or cuda:N")
    for ok in ("auto", "cpu", "cuda", "cuda:1"):
        WorkspaceSettings(default_device=ok).validate()
