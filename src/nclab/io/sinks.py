"""Where measured rows go: one small interface, :class:`MetricSink`, for the run-directory table (the default),
TensorBoard, Weights & Biases and MLflow.

A sink receives :class:`~nclab.io.run_table.MetricRow` batches through :meth:`MetricSink.write` (one call per
measurement: one epoch, one split) and is closed once with :meth:`MetricSink.close`. Logger tags are
``collapse/{split}/{layer}/{metric}`` with the epoch as the step. The logger sinks import their package when
constructed; a missing package raises ``ImportError`` naming the extra to install (``pip install
nclab[tensorboard]``, ``nclab[wandb]``, ``nclab[mlflow]``), and importing this module never needs them.

Examples
--------
>>> import tempfile, pathlib
>>> from nclab.io.run_table import MetricRow, read_metrics
>>> out = pathlib.Path(tempfile.mkdtemp())
>>> sink = RunTableSink(out)
>>> sink.write([MetricRow(1, "train", "fc", "nc1", 0.5)])
>>> sink.close()
>>> read_metrics(out)[0].value
0.5
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from nclab.io.run_table import MetricRow, read_metrics, write_metrics

__all__ = [
    "SINKS",
    "MLflowSink",
    "MetricSink",
    "RunTableSink",
    "TensorBoardSink",
    "WandbSink",
    "make_sink",
    "tag",
]


def tag(row: MetricRow) -> str:
    """The logger key of ``row``: ``collapse/{split}/{layer}/{metric}``.

    >>> tag(MetricRow(3, "train", "layer3", "nc1", 0.1))
    'collapse/train/layer3/nc1'
    """
    return f"collapse/{row.split}/{row.layer}/{row.metric}"


def _require(module: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"this sink needs the {module.split('.')[0]!r} package: pip install nclab[{extra}]") from err


@runtime_checkable
class MetricSink(Protocol):
    """Anything with ``write(rows)`` and ``close()``: the interface every sink implements."""

    def write(self, rows: Sequence[MetricRow]) -> None: ...

    def close(self) -> None: ...


class RunTableSink:
    """The run directory's ``metrics.csv`` (and ``metrics.parquet`` with pyarrow): every row written so far,
    rewritten atomically after each :meth:`write`, so the table on disk is always complete up to the last
    measurement. ``resume=True`` keeps the rows of an existing table in ``out``."""

    def __init__(self, out: str | Path, *, resume: bool = False) -> None:
        self.out = Path(out)
        self.rows: list[MetricRow] = []
        if resume and (self.out / "metrics.csv").exists():
            self.rows = read_metrics(self.out)

    def write(self, rows: Sequence[MetricRow]) -> None:
        self.rows.extend(rows)
        write_metrics(self.rows, self.out)

    def close(self) -> None:
        """Nothing to release: each write leaves a complete table."""


class TensorBoardSink:
    """Scalars in a TensorBoard event file under ``log_dir`` (``torch.utils.tensorboard.SummaryWriter``)."""

    def __init__(self, log_dir: str | Path) -> None:
        _require("tensorboard", "tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(log_dir))

    def write(self, rows: Sequence[MetricRow]) -> None:
        for r in rows:
            self.writer.add_scalar(tag(r), float(r.value), global_step=int(r.epoch))
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    """A Weights & Biases run (``mode="offline"`` by default: files under ``dir``, no network). Each write is one
    ``run.log`` call with the rows' tags and ``epoch``; the epoch is the run's x axis (``define_metric``)."""

    def __init__(
        self, project: str = "nclab", *, dir: str | Path | None = None, mode: str = "offline", **init: Any
    ) -> None:
        wandb = _require("wandb", "wandb")
        self.run = wandb.init(project=project, dir=None if dir is None else str(dir), mode=mode, **init)
        self.run.define_metric("epoch")
        self.run.define_metric("collapse/*", step_metric="epoch")

    def write(self, rows: Sequence[MetricRow]) -> None:
        by_epoch: dict[int, dict[str, float]] = {}
        for r in rows:
            by_epoch.setdefault(int(r.epoch), {})[tag(r)] = float(r.value)
        for epoch, values in sorted(by_epoch.items()):
            self.run.log({"epoch": epoch, **values})

    def close(self) -> None:
        self.run.finish()


class MLflowSink:
    """Metrics of an MLflow run (``tracking_uri``: e.g. a local ``sqlite:///PATH`` store or a server), step =
    epoch."""

    def __init__(
        self, tracking_uri: str | None = None, *, experiment: str = "nclab", run_name: str | None = None
    ) -> None:
        mlflow = _require("mlflow", "mlflow")
        self.client = mlflow.MlflowClient(tracking_uri=tracking_uri)
        exp = self.client.get_experiment_by_name(experiment)
        exp_id = exp.experiment_id if exp is not None else self.client.create_experiment(experiment)
        self.run_id = self.client.create_run(exp_id, run_name=run_name).info.run_id

    def write(self, rows: Sequence[MetricRow]) -> None:
        from mlflow.entities import Metric

        stamp = 0
        metrics = [Metric(tag(r), float(r.value), stamp, int(r.epoch)) for r in rows]
        for start in range(0, len(metrics), 1000):  # the tracking API's batch limit
            self.client.log_batch(self.run_id, metrics=metrics[start : start + 1000])

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


#: Sink kinds by name, as ``log.sinks`` of a training config names them.
SINKS: dict[str, type] = {
    "table": RunTableSink,
    "tensorboard": TensorBoardSink,
    "wandb": WandbSink,
    "mlflow": MLflowSink,
}


def make_sink(spec: str | Mapping[str, Any], out: str | Path) -> MetricSink:
    """A sink from a config entry: a kind name (``"table"``, ``"tensorboard"``, ``"wandb"``, ``"mlflow"``) or
    ``{"kind": NAME, **options}``; ``out`` is the run directory (the table's directory, TensorBoard's
    ``out/tensorboard``, W&B's ``dir``, MLflow's local store ``sqlite:///out/mlflow.db`` unless options say
    otherwise; MLflow 3 refuses new ``file:`` stores, its maintained local backend is SQLite).
    """
    opts = {"kind": spec} if isinstance(spec, str) else dict(spec)
    kind = opts.pop("kind", None)
    if kind not in SINKS:
        raise ValueError(f"sink kind must be one of {sorted(SINKS)}, got {kind!r}")
    out = Path(out)
    if kind == "table":
        return RunTableSink(opts.pop("out", out), **opts)
    if kind == "tensorboard":
        return TensorBoardSink(opts.pop("log_dir", out / "tensorboard"))
    if kind == "wandb":
        return WandbSink(dir=opts.pop("dir", out), **opts)
    return MLflowSink(opts.pop("tracking_uri", f"sqlite:///{(out / 'mlflow.db').resolve()}"), **opts)
