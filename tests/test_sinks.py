"""Sinks: what each logger received, read back from its own files (TensorBoard event file, W&B offline run,
MLflow file store), and the trainer's ``log.sinks``."""

from __future__ import annotations

import importlib.util

import pytest

from nclab.io.run_table import MetricRow, read_metrics
from nclab.io.sinks import MetricSink, RunTableSink, flatten_params, make_sink, param_values, tag

ROWS = [
    MetricRow(0, "train", "layer3", "nc1", 2.5),
    MetricRow(0, "test", "output", "error", 0.75),
    MetricRow(4, "train", "layer3", "nc1", 0.125),
]


def _needs(pkg: str):
    return pytest.mark.skipif(
        importlib.util.find_spec(pkg) is None, reason=f"{pkg} is not installed (pip install nclab[{pkg}])"
    )


def _write(sink: MetricSink) -> None:
    assert isinstance(sink, MetricSink)
    sink.write(ROWS[:2])
    sink.write(ROWS[2:])
    sink.close()


def test_run_table_sink_keeps_every_row_and_resumes(tmp_path):
    _write(RunTableSink(tmp_path))
    assert read_metrics(tmp_path) == ROWS
    again = RunTableSink(tmp_path, resume=True)
    again.write([MetricRow(5, "train", "layer3", "nc1", 0.0625)])
    assert read_metrics(tmp_path)[:3] == ROWS and len(read_metrics(tmp_path)) == 4


@_needs("tensorboard")
def test_tensorboard_event_file_reads_back(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _write(make_sink("tensorboard", tmp_path))
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    assert set(acc.Tags()["scalars"]) == {"collapse/train/layer3/nc1", "collapse/test/output/error"}
    assert [(e.step, e.value) for e in acc.Scalars("collapse/train/layer3/nc1")] == [(0, 2.5), (4, 0.125)]
    assert [(e.step, e.value) for e in acc.Scalars("collapse/test/output/error")] == [(0, 0.75)]


@_needs("mlflow")
def test_mlflow_local_store_reads_back(tmp_path):
    import mlflow

    sink = make_sink("mlflow", tmp_path)
    _write(sink)
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{(tmp_path / 'mlflow.db').resolve()}")
    hist = client.get_metric_history(sink.run_id, "collapse/train/layer3/nc1")
    assert sorted((m.step, m.value) for m in hist) == [(0, 2.5), (4, 0.125)]
    assert client.get_run(sink.run_id).info.status == "FINISHED"


@_needs("wandb")
def test_wandb_offline_run_records_the_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    sink = make_sink({"kind": "wandb", "project": "nclab-test"}, tmp_path)
    summary = sink.run.summary
    sink.write(ROWS[:2])
    sink.write(ROWS[2:])
    assert summary[tag(ROWS[2])] == 0.125 and summary[tag(ROWS[1])] == 0.75
    run_dir = sink.run.dir
    sink.close()
    assert (tmp_path / "wandb").is_dir() and "offline-run" in run_dir


def test_unknown_sink_kind_is_named(tmp_path):
    with pytest.raises(ValueError, match="sink kind must be one of"):
        make_sink("csvlogger", tmp_path)


@_needs("tensorboard")
def test_train_config_log_sinks(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from nclab.train import ConfigError, resolve_config, train

    cfg = {
        "data": {"name": "digits", "per_class": 10, "test_per_class": 5},
        "model": {"name": "mlp", "options": {"widths": [16]}},
        "train": {"epochs": 2, "batch_size": 50, "threads": 1},
        "measure": {"epochs": [0, 2], "splits": ["train"]},
        "log": {"sinks": ["table", "tensorboard"]},
        "report": False,
    }
    res = train(resolve_config(cfg), tmp_path, progress=False)
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    nc1 = {r.epoch: r.value for r in res.rows if r.metric == "nc1" and r.layer == res.penultimate}
    got = {e.step: e.value for e in acc.Scalars(f"collapse/train/{res.penultimate}/nc1")}
    assert got == pytest.approx(nc1, rel=1e-6)  # event files hold float32
    with pytest.raises(ConfigError, match="unknown sink"):
        resolve_config(cfg, ["log.sinks=[neptune]"])


def _monitored(out, sink) -> tuple[dict, list]:
    """A monitor writing to ``sink`` measured at epochs 0 and 1: its settings and its rows."""
    import torch
    from torch import nn

    from nclab import CollapseMonitor

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    x, y = torch.randn(60, 4), torch.arange(60) % 3
    monitor = CollapseMonitor(net, 3, layers=["0", "penultimate"], out=out, sinks=[sink], conventions={"ddof": 0})
    monitor.measure((x, y), epoch=0)
    monitor.measure((x, y), epoch=1)
    settings = monitor.settings
    monitor.close()
    assert settings["conventions/ddof"] == 0 and settings["track/0"] == "full" and settings["K"] == 3
    return settings, monitor.rows


@_needs("tensorboard")
def test_tensorboard_sink_records_the_monitor_settings_as_hparams(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

    settings, rows = _monitored(tmp_path, "tensorboard")
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    content = acc.PluginTagToContent("hparams")
    start = HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info.hparams
    got = {
        k: v.string_value or (v.bool_value if v.HasField("bool_value") else v.number_value) for k, v in start.items()
    }
    assert got == param_values(settings)
    assert got["layers"] == '["0", "penultimate"]' and got["conventions/pinv_rank"] == "null"
    experiment = HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    assert {m.name.tag for m in experiment.metric_infos} == {tag(r) for r in rows if r.epoch == 0}
    assert set(acc.Tags()["scalars"]) == {tag(r) for r in rows}  # the same run: no second folder for the hparams


@_needs("mlflow")
def test_mlflow_sink_records_the_monitor_settings_as_params(tmp_path):
    import mlflow

    settings, rows = _monitored(tmp_path, "mlflow")
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{(tmp_path / 'mlflow.db').resolve()}")
    (run,) = client.search_runs([client.get_experiment_by_name("nclab").experiment_id])
    assert run.data.params == {k: str(v) for k, v in param_values(settings).items()}
    assert run.data.params["conventions/ddof"] == "0" and run.data.params["classifier"] == "2"
    assert run.data.metrics["collapse/train/0/nc1"] == next(
        r.value for r in rows if (r.epoch, r.layer, r.metric) == (1, "0", "nc1")
    )


@_needs("mlflow")
def test_mlflow_params_longer_than_its_limit_are_cut_not_refused(tmp_path):
    sink = make_sink("mlflow", tmp_path)
    sink.log_params({"layers": ["x" * 10] * 1000, "K": 3})
    sink.write(ROWS)
    sink.close()
    params = sink.client.get_run(sink.run_id).data.params
    assert len(params["layers"]) == 6000 and params["layers"].endswith("...") and params["K"] == "3"


@_needs("wandb")
def test_wandb_sink_records_the_monitor_settings_in_the_run_config(tmp_path, monkeypatch):
    import json
    import re

    import wandb

    monkeypatch.setenv("WANDB_SILENT", "true")
    settings, _ = _monitored(tmp_path, {"kind": "wandb", "project": "nclab-test"})
    wandb.teardown()  # the service process writes the run's file out when it stops
    (log,) = (tmp_path / "wandb").glob("offline-run-*/*.wandb")
    data = log.read_bytes()  # wandb 0.31 has no offline reader: each config item is its key, then its JSON value
    for key, value in settings.items():
        text = json.dumps(value, separators=(",", ":")).encode()
        assert re.search(re.escape(key.encode()) + rb".{1,4}" + re.escape(text), data, re.DOTALL), key


def test_flatten_params_joins_nested_keys():
    nested = {"model": {"name": "mlp", "options": {"widths": [16, 8]}}, "seed": 0}
    assert flatten_params(nested) == {"model/name": "mlp", "model/options/widths": [16, 8], "seed": 0}
    assert param_values(flatten_params(nested)) == {"model/name": "mlp", "model/options/widths": "[16, 8]", "seed": 0}
