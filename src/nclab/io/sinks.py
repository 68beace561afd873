"""Where measured rows go: one small interface, :class:`MetricSink`, for the run-directory table (the default),
TensorBoard, Weights & Biases and MLflow.

A sink receives :class:`~nclab.io.run_table.MetricRow` batches through :meth:`MetricSink.write` (one call per
measurement: one epoch, one split) and is closed once with :meth:`MetricSink.close`. Logger tags are
``collapse/{split}/{layer}/{metric}`` with the epoch as the step. The logger sinks also take the run's
parameters, ``log_params(params)`` (a :class:`~nclab.CollapseMonitor` gives its ``settings`` before its first
rows): TensorBoard's HPARAMS tab, the W&B run's config, the MLflow run's params; :func:`flatten_params` turns a
nested config into such parameters. The logger sinks import their package when
constructed; a missing package raises ``ImportError`` naming the extra to install (``pip install
nclab[tensorboard]``, ``nclab[wandb]``, ``nclab[mlflow]``), and importing this module never needs them.

Every sink checks its target when it is constructed, before any measurement runs: a folder that cannot be made
or written (``NotADirectoryError`` / ``PermissionError`` naming the option and the path), an MLflow store that
cannot be opened or a tracking server that does not answer (:class:`SinkError` naming the tracking URI and the
cause). A config entry's options are checked by :func:`check_sink_spec` against :data:`SINK_OPTIONS`: an
unknown (misspelt) option or a value of the wrong type is refused, never dropped.

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
import json
import math
import os
import socket
import sqlite3
import urllib.parse
import urllib.request
import warnings
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from nclab.io.run_table import MetricRow, write_metrics
from nclab.io.rundir import RunDir, RunIdentity

__all__ = [
    "PARAM_SEPARATOR",
    "SINKS",
    "SINK_OPTIONS",
    "MLflowSink",
    "MetricSink",
    "RunTableSink",
    "SinkError",
    "TensorBoardSink",
    "WandbSink",
    "check_sink_spec",
    "flatten_params",
    "make_sink",
    "param_values",
    "tag",
]


class SinkError(ValueError):
    """A logger sink cannot be set up (an MLflow store that cannot be opened, a tracking server that does not
    answer): the message names the sink's target and the cause."""


def tag(row: MetricRow) -> str:
    """The logger key of ``row``: ``collapse/{split}/{layer}/{metric}``.

    >>> tag(MetricRow(3, "train", "layer3", "nc1", 0.1))
    'collapse/train/layer3/nc1'
    """
    return f"collapse/{row.split}/{row.layer}/{row.metric}"


#: The separator of nested keys in a flat parameter name (``conventions/weighting``, ``track/net.fc1``): a
#: character every logger accepts in a key, and the one of the metric tags.
PARAM_SEPARATOR = "/"


def flatten_params(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``params`` with nested mappings flattened into :data:`PARAM_SEPARATOR`-joined keys (other values kept).

    >>> flatten_params({"K": 10, "conventions": {"weighting": "balanced", "ddof": 1}})
    {'K': 10, 'conventions/weighting': 'balanced', 'conventions/ddof': 1}
    """
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten_params(value, name + PARAM_SEPARATOR))
        else:
            out[name] = value
    return out


def param_values(params: Mapping[str, Any]) -> dict[str, bool | int | float | str]:
    """``params`` (flat) as the scalars a logger's parameters hold: bools, ints, floats and strings as they are,
    anything else as JSON text (``None`` is ``"null"``, a list ``'["a", "b"]'``), as a YAML config writes them.

    >>> param_values({"layers": ["fc1", "penultimate"], "rank": None, "K": 10})
    {'layers': '["fc1", "penultimate"]', 'rank': 'null', 'K': 10}
    """
    return {k: v if isinstance(v, bool | int | float | str) else json.dumps(v, default=str) for k, v in params.items()}


def _require(module: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"this sink needs the {module.split('.')[0]!r} package: pip install nclab[{extra}]") from err


def _make_folder(path: str | os.PathLike[str], name: str) -> Path:
    """``path`` made with its parents and checked writable now: a sink whose target cannot hold its files fails
    when it is constructed, not at its first write after a measurement. Errors name ``name`` (when given) and
    ``path``."""
    path = Path(path)
    where = f"{name} {path}: " if name else ""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            raise NotADirectoryError(f"{where}{blocker} is a file, not a folder") from None
        kind = FileNotFoundError if isinstance(err, FileNotFoundError) else PermissionError
        raise kind(f"{where}cannot create the folder {path} ({err.strerror or err})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise PermissionError(f"{where}the folder {path} is not writable")
    return path


@runtime_checkable
class MetricSink(Protocol):
    """Anything with ``write(rows)`` and ``close()``: the interface every sink implements. A sink may also have
    ``log_params(params)`` (a flat mapping of the run's parameters, given once, before the first ``write``):
    the logger sinks here do."""

    def write(self, rows: Sequence[MetricRow]) -> None: ...

    def close(self) -> None: ...


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class RunTableSink:
    """The run directory's ``metrics.csv`` (and ``metrics.parquet`` with pyarrow): every row of the run, rewritten
    atomically after each :meth:`write`, so the table on disk is always complete up to the last measurement.

    The sink is a writer of the folder (:class:`~nclab.io.rundir.RunDir`): it holds the folder's lock from its
    construction to :meth:`close` (shared with other sinks of the same run in this process; a write after
    ``close`` takes it again for the write), and follows :meth:`~nclab.io.rundir.RunDir.open_table`: with an
    ``identity`` it continues a table of the same run and refuses any other (a training run's folder, another
    run's rows, rows without a run id), before anything is written; without one it starts a table in an empty
    folder, and ``resume=True`` continues the table there. ``overwrite=True`` replaces the run in the folder.
    Rows of an ``(epoch, split)`` already in the table replace its rows (measuring an epoch twice never
    duplicates it). The table carries ``identity.run_id`` in its ``run_id`` column, and ``identity.json`` beside it.

    Raises
    ------
    RunDirError
        The folder holds another run (the message names it, both run ids and ``overwrite=True``).
    RunDirBusyError
        Another writer holds the folder (a training run, another process, a monitor of another run).
    """

    def __init__(
        self,
        out: str | Path,
        *,
        identity: RunIdentity | None = None,
        resume: bool = False,
        overwrite: bool = False,
    ) -> None:
        # made now: a target that cannot hold the table fails here, not after the first measurement
        self.out = _make_folder(out, "out")
        self.dir = RunDir(self.out)
        self.identity = identity
        self._share = None if identity is None else identity.run_id
        lock = self.dir.lock(share=self._share)
        try:
            self.rows: list[MetricRow] = self.dir.open_table(identity, resume=resume, overwrite=overwrite)
            #: the run id written in the table's ``run_id`` column (a table resumed without identity keeps its own)
            self.run_id = identity.run_id if identity is not None else self.dir.recorded_run_id()
        except BaseException:
            lock.release()
            raise
        if lock.note:
            warnings.warn(f"{self.out}: {lock.note}", UserWarning, stacklevel=2)
        self._lock = lock
        self._stamp = _stamp(self.dir.metrics)
        self._release = weakref.finalize(self, lock.release)  # an unclosed sink gives the folder back when collected

    def write(self, rows: Sequence[MetricRow]) -> None:
        rows = list(rows)
        if not rows:
            return
        again = None if self._release.alive else self.dir.lock(share=self._share)
        try:
            if _stamp(self.dir.metrics) != self._stamp:  # another writer of this run wrote it (or it was changed)
                self.rows = self.dir.open_table(self.identity, resume=self.identity is None)
            keys = {(r.epoch, r.split) for r in rows}
            merged = [r for r in self.rows if (r.epoch, r.split) not in keys] + rows
            merged.sort(key=lambda r: r.epoch)  # stable: a re-measured epoch goes back to its place
            if self.identity is not None:
                self.dir.write_identity(self.identity)
            write_metrics(merged, self.out, run_id=self.run_id)
            self.rows = merged
            self._stamp = _stamp(self.dir.metrics)
        finally:
            if again is not None:
                again.release()

    def close(self) -> None:
        """Give the folder back (release the lock); each write already left a complete table."""
        self._release()


class TensorBoardSink:
    """Scalars in a TensorBoard event file under ``log_dir`` (``torch.utils.tensorboard.SummaryWriter``); the
    parameters of :meth:`log_params` in the same file, for the HPARAMS tab."""

    def __init__(self, log_dir: str | Path) -> None:
        _require("tensorboard", "tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(log_dir))
        self._params: dict[str, Any] | None = None

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Record ``params`` (flat; :func:`param_values`) as the run's hyperparameters, with the next
        :meth:`write`: the HPARAMS tab lists the metrics by the tags of that write."""
        self._params = param_values(params)

    def _write_params(self, tags: Sequence[str]) -> None:
        from torch.utils.tensorboard.summary import hparams

        # the plugin's three summaries, in this run's own event file: SummaryWriter.add_hparams would open a
        # second run (a sub-folder) for them
        summaries = hparams(self._params, dict.fromkeys(tags, 0.0))  # type: ignore[no-untyped-call]  # torch: unannotated
        for summary in summaries:
            # torch leaves file_writer unannotated (None in __init__), so its FileWriter type is invisible
            self.writer.file_writer.add_summary(summary)  # type: ignore[attr-defined]
        self._params = None

    def write(self, rows: Sequence[MetricRow]) -> None:
        if self._params is not None:
            self._write_params(list(dict.fromkeys(tag(r) for r in rows)))
        for r in rows:
            self.writer.add_scalar(tag(r), float(r.value), global_step=int(r.epoch))
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    """A Weights & Biases run (``mode="offline"`` by default: files under ``dir``, no network). Each write is one
    ``run.log`` call with the rows' tags and ``epoch``; the epoch is the run's x axis (``define_metric``).
    ``dir`` is made now; one that cannot be made or written raises ``NotADirectoryError`` / ``PermissionError``
    naming it (W&B itself would fall back to a folder in the system temp directory without a word)."""

    def __init__(
        self, project: str = "nclab", *, dir: str | Path | None = None, mode: str = "offline", **init: Any
    ) -> None:
        wandb = _require("wandb", "wandb")
        if dir is not None:
            dir = _make_folder(dir, "dir")
        self.run = wandb.init(project=project, dir=None if dir is None else str(dir), mode=mode, **init)
        self.run.define_metric("epoch")
        self.run.define_metric("collapse/*", step_metric="epoch")

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Add ``params`` (flat; values kept as they are, lists included) to the run's config."""
        self.run.config.update(dict(params), allow_val_change=True)

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
    epoch.

    The store is checked before the run is created, and every failure is one :class:`SinkError` naming the
    tracking URI and the cause: a SQLite file that cannot be created or opened (checked with :mod:`sqlite3`
    at once, where MLflow would retry for about 100 s), an ``http(s)`` server that does not accept a
    connection within ``timeout`` seconds (default 10; at the URI's host and port, or at the proxy the
    environment names for it; MLflow would retry for minutes), a URI scheme MLflow has no store for. Requests
    after the check follow MLflow's own settings (``MLFLOW_HTTP_REQUEST_TIMEOUT``,
    ``MLFLOW_HTTP_REQUEST_MAX_RETRIES``).
    """

    def __init__(
        self,
        tracking_uri: str | None = None,
        *,
        experiment: str = "nclab",
        run_name: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        mlflow = _require("mlflow", "mlflow")
        from mlflow.exceptions import MlflowException
        from sqlalchemy.exc import SQLAlchemyError

        if not (isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and 0 < timeout < math.inf):
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        uri = tracking_uri if tracking_uri is not None else mlflow.get_tracking_uri()
        self.tracking_uri = uri
        _check_tracking_uri(uri, float(timeout))
        try:
            self.client = mlflow.MlflowClient(tracking_uri=uri)
            exp = self.client.get_experiment_by_name(experiment)
            exp_id = exp.experiment_id if exp is not None else self.client.create_experiment(experiment)
            self.run_id = self.client.create_run(exp_id, run_name=run_name).info.run_id
        except (MlflowException, SQLAlchemyError, OSError) as err:
            raise SinkError(f"MLflow tracking_uri {uri!r}: {_mlflow_cause(err, uri)}") from err

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Log ``params`` (flat; :func:`param_values`, as text) as the run's params. MLflow keeps a param's
        first value and holds at most 6,000 characters of it: a longer value (the names of hundreds of layers)
        is cut, ending in ``...``."""
        from mlflow.entities import Param

        limit = 6000
        text = {k: str(v) for k, v in param_values(params).items()}
        items = [Param(k, v if len(v) <= limit else v[: limit - 3] + "...") for k, v in text.items()]
        for start in range(0, len(items), 100):  # the tracking API's batch limit for params
            self.client.log_batch(self.run_id, params=items[start : start + 100])

    def write(self, rows: Sequence[MetricRow]) -> None:
        from mlflow.entities import Metric

        stamp = 0
        metrics = [Metric(tag(r), float(r.value), stamp, int(r.epoch)) for r in rows]
        for start in range(0, len(metrics), 1000):  # the tracking API's batch limit
            self.client.log_batch(self.run_id, metrics=metrics[start : start + 1000])

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


def _check_tracking_uri(uri: str, timeout: float) -> None:
    scheme = urllib.parse.urlsplit(uri).scheme
    if scheme == "sqlite":
        _check_sqlite(uri)
    elif scheme in ("http", "https"):
        _check_server(uri, timeout)


def _check_sqlite(uri: str) -> None:
    """Create / open the SQLite file of ``uri`` as MLflow would, failing at once: MLflow retries a file it
    cannot open for about 100 s and then reports SQLAlchemy's ``unable to open database file`` without the
    path, and a folder under a regular file as a misleading ``FileExistsError``."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        database = make_url(uri).database
    except ArgumentError as err:
        raise SinkError(f"MLflow tracking_uri {uri!r}: not a SQLAlchemy URL ({err})") from None
    if not database or database == ":memory:" or database.startswith("file:"):
        return  # an in-memory store, or SQLite's own URI syntax: nothing to check on disk
    path = Path(database)
    try:
        _make_folder(path.parent, "")
        con = sqlite3.connect(path)
        try:
            con.execute("PRAGMA schema_version")  # reads the header: a file that is not a database fails here
        finally:
            con.close()
    except (OSError, sqlite3.Error) as err:
        raise SinkError(f"MLflow tracking_uri {uri!r}: cannot open the SQLite database {path} ({err})") from None


def _check_server(uri: str, timeout: float) -> None:
    """Connect to the tracking server of ``uri`` (or to the proxy the environment names for it) within
    ``timeout`` seconds: MLflow's own retries with backoff wait for minutes on a server that is not there."""
    parts = urllib.parse.urlsplit(uri)
    host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    if not host:
        raise SinkError(f"MLflow tracking_uri {uri!r}: no host in the URI")
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(host):
        proxy_parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        host, port = proxy_parts.hostname or host, proxy_parts.port or 80
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as err:
        why = "no answer" if isinstance(err, TimeoutError) else (err.strerror or str(err))
        raise SinkError(
            f"MLflow tracking_uri {uri!r}: the tracking server at {host}:{port} cannot be reached within "
            f"{timeout:g} s ({why}); start the server, or fix tracking_uri"
        ) from None


def _mlflow_cause(err: BaseException, uri: str) -> str:
    from mlflow.tracking.registry import UnsupportedModelRegistryStoreURIException

    if isinstance(err, UnsupportedModelRegistryStoreURIException):
        # MLflow's message speaks of the model registry, though it is the tracking store that is missing
        scheme = urllib.parse.urlsplit(uri).scheme
        return (
            f"MLflow has no tracking store for the URI scheme {scheme!r} (use sqlite:///PATH, http(s)://HOST:PORT, "
            "postgresql://, mysql://, mssql:// or databricks)"
        )
    return f"{type(err).__name__}: {err}"


#: Sink kinds by name, as ``log.sinks`` of a training config names them.
SINKS: dict[str, type] = {
    "table": RunTableSink,
    "tensorboard": TensorBoardSink,
    "wandb": WandbSink,
    "mlflow": MLflowSink,
}


_PATH = (str, os.PathLike)
_NAME = (str, type(None))

#: The options of each sink kind in a ``{kind: ..., **options}`` config entry, with the types they accept
#: (:func:`check_sink_spec`). Other arguments of ``wandb.init`` go through :class:`WandbSink` itself.
SINK_OPTIONS: dict[str, dict[str, tuple[type, ...]]] = {
    "table": {"out": _PATH, "resume": (bool,), "overwrite": (bool,)},
    "tensorboard": {"log_dir": _PATH},
    "wandb": {
        "project": (str,),
        "dir": _PATH,
        "mode": (str,),
        "entity": _NAME,
        "name": _NAME,
        "group": _NAME,
        "job_type": _NAME,
        "notes": _NAME,
        "id": _NAME,
        "tags": (list,),
        "config": (Mapping,),
        "resume": (bool, str),
    },
    "mlflow": {"tracking_uri": (str,), "experiment": (str,), "run_name": _NAME, "timeout": (int, float)},
}


def _type_names(types: tuple[type, ...]) -> str:
    names = {str: "a string", os.PathLike: "a path", bool: "true/false", int: "a number", float: "a number"}
    names |= {list: "a list", Mapping: "a mapping", type(None): "null"}
    return " or ".join(dict.fromkeys(names[t] for t in types))


def check_sink_spec(spec: str | Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The kind and options of a sink config entry (a kind name or ``{"kind": NAME, **options}``), checked
    against :data:`SINK_OPTIONS` without constructing the sink.

    Raises
    ------
    ValueError
        An unknown kind, or an option the kind does not have (the message names it and the known ones).
    TypeError
        An option value of the wrong type (``resume: "yes"``, a number as a path).

    Examples
    --------
    >>> check_sink_spec({"kind": "tensorboard", "log_dir": "tb"})
    ('tensorboard', {'log_dir': 'tb'})
    >>> check_sink_spec({"kind": "tensorboard", "logdir": "tb"})
    Traceback (most recent call last):
        ...
    ValueError: sink 'tensorboard': unknown option 'logdir'; known: log_dir
    """
    opts = {"kind": spec} if isinstance(spec, str) else dict(spec)
    kind = opts.pop("kind", None)
    if kind not in SINKS:
        raise ValueError(f"sink kind must be one of {sorted(SINKS)}, got {kind!r}")
    known = SINK_OPTIONS[kind]
    for key, value in opts.items():
        if key not in known:
            raise ValueError(f"sink {kind!r}: unknown option {key!r}; known: {', '.join(known)}")
        # bool is an int: true is no timeout, and 1 is no resume flag
        if not isinstance(value, known[key]) or (isinstance(value, bool) and bool not in known[key]):
            raise TypeError(f"sink {kind!r}: option {key!r} must be {_type_names(known[key])}, got {value!r}")
    if kind == "wandb" and not all(isinstance(t, str) for t in opts.get("tags", [])):
        raise TypeError(f"sink 'wandb': option 'tags' must be a list of strings, got {opts['tags']!r}")
    return kind, opts


def make_sink(
    spec: str | Mapping[str, Any],
    out: str | Path,
    *,
    identity: RunIdentity | None = None,
    overwrite: bool = False,
) -> MetricSink:
    """A sink from a config entry: a kind name (``"table"``, ``"tensorboard"``, ``"wandb"``, ``"mlflow"``) or
    ``{"kind": NAME, **options}`` (the options of :data:`SINK_OPTIONS`, checked by :func:`check_sink_spec`);
    ``out`` is the run directory (the table's directory, TensorBoard's ``out/tensorboard``, W&B's ``dir``,
    MLflow's local store ``sqlite:///out/mlflow.db`` unless options say otherwise; MLflow 3 refuses new
    ``file:`` stores, its maintained local backend is SQLite). ``identity`` and ``overwrite`` go to the table
    (:class:`RunTableSink`; an ``overwrite`` option of the entry wins).
    """
    kind, opts = check_sink_spec(spec)
    out = Path(out)
    if kind == "table":
        opts.setdefault("overwrite", overwrite)
        return RunTableSink(opts.pop("out", out), identity=identity, **opts)
    if kind == "tensorboard":
        return TensorBoardSink(opts.pop("log_dir", out / "tensorboard"))
    if kind == "wandb":
        return WandbSink(dir=opts.pop("dir", out), **opts)
    return MLflowSink(opts.pop("tracking_uri", f"sqlite:///{(out / 'mlflow.db').resolve()}"), **opts)
