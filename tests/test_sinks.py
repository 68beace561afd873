"""Sinks: what each logger received, read back from its own files (TensorBoard event file, W&B offline run,
MLflow file store), and the trainer's ``log.sinks``."""

from __future__ import annotations

import importlib.util

import pytest

from nclab.io.run_table import MetricRow, read_metrics
from nclab.io.sinks import MetricSink, RunTableSink, make_sink, tag

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
