"""Train to the terminal phase and measure collapse on a schedule: ``train(config, out)``.

Per epoch: one pass of mini-batch training (shuffled by a generator seeded with ``(seed, epoch)``, so the order
does not depend on any saved RNG state), then, at measured epochs, :func:`nclab.measure.measure_split`
on the train split (and the test split), then an atomic checkpoint and an atomic rewrite of ``metrics.csv``.
The run's state lives in one :class:`Trainer` (``epoch()``, ``measure()``, ``checkpoint()``, its
:class:`RunState`); :func:`train` prepares the folder and loops over it.

The mini-batches come from :mod:`nclab.train.feeds` (in-memory slices, or a DataLoader over image files;
augmented and mixed as ``data.augment`` says). Each optimisation step runs ``train.grad_accum`` micro-batches
whose gradients add up to the batch's; the forward passes of training, of the measurements and of the zero-error
check run under the autocast of ``train.precision`` (``fp16`` with a gradient scaler), the statistics in float64.

Measured epochs: 0 (initialisation), the last epoch, ``measure.num_log`` log-spaced epochs, and the first epoch
whose **eval-mode** training error is exactly 0 (the start of the terminal phase, TPT). That error is checked
exactly (a forward pass over the train split) after every epoch whose running training error (train mode,
during the epoch) is at most ``measure.zero_error_gate`` -- or after every epoch with
``zero_error_check: every_epoch`` -- and at every measured epoch.

Resume: the checkpoint ``checkpoints/last.pt`` holds the model, the optimiser, the epoch, the zero-error
epoch, the torch RNG state and every metric row so far; it is written before ``metrics.csv`` (which is only
rewritten with a checkpoint), so a run killed at any moment loses at most the epochs since the last checkpoint
(``checkpoint.every``, default 1: the epoch in progress) and never a row already in ``metrics.csv``; and
``resume=True`` continues with bit-identical results (same machine, same thread count: CPU kernels are
deterministic for a fixed thread count). The folder's files, its lock ``run.lock`` and the rules for starting
and resuming are :class:`nclab.io.rundir.RunDir`'s; when a resume is allowed (the checkpoint and an unedited
``config.yaml`` required, extending ``train.epochs``) is :mod:`nclab.train.rundir`'s. The checkpoint holds the
run id and the config that trained it, so an edited ``config.yaml`` is refused, naming the key.

Checkpoints off the training thread: inside ``with Trainer(...)`` (as :func:`train` runs it) the state is copied
(:func:`~nclab.train.checkpoint.snapshot_state`, tensors cloned on their device) and the next epoch trains while
a background thread seals and writes the copy, then ``metrics.csv``: at most one checkpoint in flight (the next
waits for it), the file the same bytes as a synchronous write. The epoch's line in ``log.txt`` follows its
checkpoint; a failed write fails the run at the next epoch (or at the end); the writes are finished before the
run ends or fails. A kill during a write leaves the previous checkpoint (atomic rename) and its temporary file.

Progress: with ``progress=True`` the run directory is printed at the start; on a terminal rich progress bars
follow, elsewhere (a pipe, a batch job's log) one plain line per epoch, at most every
:data:`PLAIN_PROGRESS_EVERY_S` seconds (the first and last epoch and the zero-error epoch always), with epoch,
running loss and error, and the run directory. A run that fails before its first epoch ends (bad data, an
unknown layer, impossible sizes) removes the folder it created, so no half-made run is left behind.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import itertools
import json
import math
import pickle
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from nclab._threads import blas_threads, torch_threads
from nclab.data import CorruptDatasetError
from nclab.io.atomic import atomic_write_bytes, atomic_write_text
from nclab.io.integrity import object_sha256
from nclab.io.run_table import OUTPUT_LAYER, MetricRow, read_run_id, write_metrics
from nclab.io.rundir import RunDir, run_id_of
from nclab.io.sinks import MetricSink, RunTableSink, make_sink
from nclab.io.tables import to_frame
from nclab.io.yaml_io import load_yaml_file
from nclab.measure import (
    MeasurePlan,
    SplitMeasurement,
    autocast,
    find_classifier,
    is_distributed,
    measurement_epochs,
    rank,
    resolve_layers,
)
from nclab.nets import CollapseNet, build_model
from nclab.theory.mse import mse_decomposition_from_stats
from nclab.train import distributed as ddp
from nclab.train.checkpoint import (
    CheckpointWriter,
    checkpoint_bytes,
    columns_to_rows,
    load_checkpoint,
    snapshot_state,
)
from nclab.train.config import ConfigError, RunConfig, check_device_available, resolve_config
from nclab.train.feeds import EvalSplit, RunData, TrainingBatch, load_run_data
from nclab.train.losses import LossFn, lambda_from_weight_decay, make_loss
from nclab.train.optim import lr_at, make_optimizer
from nclab.train.rundir import (
    RunDirError,
    RunLock,
    budget_dependent_fields,
    disk_full_error,
    metrics_file_status,
    resume_differences,
)
from nclab.validation import check_output_dir

__all__ = ["AUTOCAST_DTYPES", "PLAIN_PROGRESS_EVERY_S", "RunResult", "RunState", "Trainer", "run_id", "train"]

#: Least seconds between two plain progress lines (stdout not a terminal); a batch log stays short.
PLAIN_PROGRESS_EVERY_S = 5.0

#: ``train.precision`` -> the ``torch.autocast`` dtype of the forward passes (``None``: float32, no autocast).
AUTOCAST_DTYPES: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


#: Whether this process writes ``metrics.parquet`` beside ``metrics.csv`` (:func:`nclab.io.run_table.write_metrics`).
_HAVE_PYARROW = importlib.util.find_spec("pyarrow") is not None


def run_id(config: RunConfig) -> str:
    """The run's identifier ``NAME-HASH``: the config name and the first 10 hex digits of the SHA-256 of the
    resolved config (keys sorted), so two runs share an id exactly when they share a resolved config.
    ``summary.json`` records it beside the zero-error epoch.

    Examples
    --------
    >>> cfg = resolve_config({"name": "x", "data": {"name": "digits"}, "model": {"name": "mlp"}})
    >>> rid = run_id(cfg)
    >>> rid.startswith("x-"), len(rid) == len("x-") + 10, rid == run_id(resolve_config(cfg.to_dict()))
    (True, True, True)
    """
    return run_id_of(config.name, config.to_dict())


@dataclass
class RunResult:
    """What :func:`train` returns: the run directory, the config, the zero-error epoch, all metric rows.

    Parameters
    ----------
    out : pathlib.Path
        The run directory.
    config : RunConfig
        The resolved config that trained it.
    zero_error_epoch : int or None
        The first epoch whose eval-mode training error was exactly 0 (the start of the terminal phase);
        ``None`` when the run never reached it.
    measured_epochs : list of int
        The epochs measured, in order.
    rows : list of MetricRow
        Every metric row of the run (resumed runs: the earlier epochs' too).
    penultimate : str
        The network's penultimate layer (the default layer of :meth:`series`).
    timings : dict of str to float, default={}
        Cumulative wall-clock seconds by phase (``train_s``, ``measure_s``, ``checkpoint_s``).
    epoch_timings : list of (int, float, float), default=[]
        ``(epoch, train_s, measure_s)`` for each epoch run by this call.

    Examples
    --------
    >>> from nclab.io.run_table import MetricRow
    >>> rows = [MetricRow(0, "train", "fc", "nc1", 2.0), MetricRow(5, "train", "fc", "nc1", 0.5),
    ...         MetricRow(5, "test", "fc", "nc1", 0.7)]
    >>> res = RunResult(Path("runs/x"), RunConfig(), 5, [0, 5], rows, "fc")
    >>> res.series("nc1"), res.series("nc1", split="test")
    ({0: 2.0, 5: 0.5}, {5: 0.7})
    """

    out: Path
    config: RunConfig
    zero_error_epoch: int | None
    measured_epochs: list[int]
    rows: list[MetricRow]
    penultimate: str
    timings: dict[str, float] = field(default_factory=dict)
    #: ``(epoch, train_s, measure_s)`` for each epoch run by this call (a resumed run lists its new epochs only);
    #: ``measure_s`` counts that epoch's measurements and zero-error checks. Wall-clock seconds.
    epoch_timings: list[tuple[int, float, float]] = field(default_factory=list)

    def series(self, metric: str, layer: str | None = None, split: str = "train") -> dict[int, float]:
        """``{epoch: value}`` of ``metric`` at ``layer`` (default: the penultimate layer; ``OUTPUT_LAYER`` for
        loss / error / lr rows)."""
        layer = layer or self.penultimate
        return {r.epoch: r.value for r in self.rows if r.split == split and r.layer == layer and r.metric == metric}

    def to_frame(self) -> Any:
        """The metric rows as a tidy ``pandas.DataFrame`` (columns of :class:`~nclab.io.MetricRow`; needs pandas)."""
        return to_frame(self.rows)


def _progress(console: Console, enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"),
        console=console,
        transient=True,
        disable=not enabled,
    )


@dataclass
class RunState:
    """What a checkpoint restores besides the model, the optimiser and the torch RNG: the last completed epoch,
    every metric row so far, the zero-error epoch, the measured epochs and the cumulative timings (seconds).

    Parameters
    ----------
    epoch : int, default=0
        The last completed epoch (0: none yet).
    rows : list of MetricRow, default=[]
        Every metric row so far.
    zero_error_epoch : int or None, default=None
        The first epoch with eval-mode training error exactly 0, once reached.
    measured : list of int, default=[]
        The epochs measured so far.
    timings : dict of str to float
        Cumulative seconds of ``train_s``, ``measure_s`` and ``checkpoint_s`` (default: all 0.0).

    Examples
    --------
    >>> state = RunState()
    >>> state.epoch, state.zero_error_epoch, state.timings["train_s"]
    (0, None, 0.0)
    >>> RunState().rows is not state.rows  # each state has its own lists
    True
    """

    epoch: int = 0
    rows: list[MetricRow] = field(default_factory=list)
    zero_error_epoch: int | None = None
    measured: list[int] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=lambda: {"train_s": 0.0, "measure_s": 0.0, "checkpoint_s": 0.0})


class Trainer:
    """One training run, epoch by epoch: the data, the model, the optimiser, the loss and the :class:`RunState`
    in one place. :func:`train` prepares the folder ``out`` (resume checks, ``config.yaml``) and loops over it::

        with Trainer(cfg, out, saved) as trainer:  # saved: a checkpoint's dict to continue, or None
            if saved is None:
                trainer.begin()  # epoch 0: measure the initialisation, first checkpoint
            while not trainer.done:
                trainer.epoch()  # train, check the error, measure, checkpoint when due
        result = trainer.finish()  # summary.json, report.html

    Building it creates ``out``, loads the data and builds the model (seeded by ``cfg.seed``), then restores
    ``saved``. Inside ``with``, rich progress bars are shown when ``progress`` is true.

    Parameters
    ----------
    cfg : RunConfig
        The resolved config.
    out : str or pathlib.Path
        The run directory (created; the caller checks and locks it, as :func:`train` does).
    saved : dict, optional
        A checkpoint's contents (:func:`~nclab.train.checkpoint.load_checkpoint`) to continue from; ``None``
        starts at epoch 0.
    console : rich.console.Console, optional
        Where progress goes (default: standard error).
    progress : bool, default=False
        Show progress: bars on a terminal, else a plain line per epoch.
    background_checkpoints : bool, default=True
        Inside ``with``, write the checkpoints (and ``metrics.csv``, ``log.txt``) on a background thread (see
        :meth:`checkpoint`); ``False``, or outside ``with``, writes them before :meth:`checkpoint` returns.

    Raises
    ------
    ConfigError
        A batch that does not divide over the processes, or ``measure.geodesic`` under DDP.

    See Also
    --------
    train : the folder's checks and lock, then this loop.

    Examples
    --------
    >>> import tempfile
    >>> cfg = resolve_config({"data": {"per_class": 3}, "model": {"options": {"widths": [8]}},
    ...                       "train": {"epochs": 1, "batch_size": 10}, "measure": {"epochs": [1]}})
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with Trainer(cfg, tmp) as trainer:
    ...         while not trainer.done:
    ...             trainer.epoch()
    ...     epochs = {row.epoch for row in trainer.state.rows}
    >>> trainer.state.epoch, trainer.state.measured, sorted(epochs)
    (1, [1], [1])
    """

    def __init__(
        self,
        cfg: RunConfig,
        out: str | Path,
        saved: dict[str, Any] | None = None,
        *,
        console: Console | None = None,
        progress: bool = False,
        background_checkpoints: bool = True,
    ) -> None:
        self.cfg, self.out = cfg, Path(out)
        self.background_checkpoints = background_checkpoints
        #: the background writer of the checkpoints while inside ``with`` (rank 0), else None: writes are synchronous
        self._writer: CheckpointWriter | None = None
        #: :func:`run_id` of the config, computed once (hashing the YAML of the config costs ~10 ms per checkpoint)
        self.run_id = run_id(cfg)
        #: rank 0 of a DDP run (or the single process): the one that writes (log, checkpoints, tables, report)
        self.main = ddp.is_main()
        if self.main:
            self.out.mkdir(parents=True, exist_ok=True)
        #: the folder's files (:class:`~nclab.io.rundir.RunDir`)
        self.run_dir = RunDir(self.out)
        self.log_path = self.run_dir.log
        self.device = ddp.device_for(cfg.train.device)
        try:
            self.batch_size = ddp.per_rank_batch(cfg.train.batch_size)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        if cfg.measure.geodesic and is_distributed():
            raise ConfigError("measure.geodesic needs every training sample's features in one process: not under DDP")
        #: the training feed and the measured splits (:mod:`nclab.train.feeds`)
        self.data = self._load_data()
        #: ``torch.autocast`` dtype of the forward passes (training and measurements), or None (``fp32``)
        self.autocast_dtype = AUTOCAST_DTYPES[cfg.train.precision]
        self.model, self.opt, self.loss_fn = self._build()
        #: fp16's loss scaler (its state goes with the checkpoint), else None
        self.scaler = torch.amp.GradScaler(self.device.type) if cfg.train.precision == "fp16" else None
        #: ``forward(x) -> (logits, h)``; in DistributedDataParallel under DDP (``self.model`` stays the bare net)
        self.step = ddp.training_module(self.model, self.device)
        E, m = cfg.train.epochs, cfg.measure
        planned = measurement_epochs(E, m.num_log) if m.epochs == "log" else m.epochs
        self.planned = {e for e in planned if e <= E}
        self.state = RunState()
        #: ``(epoch, train_s, measure_s)`` of each epoch run by this trainer (see :class:`RunResult`)
        self.epoch_timings: list[tuple[int, float, float]] = []
        if saved is not None:
            self._restore(saved)
        else:
            lam = lambda_from_weight_decay(cfg.optim.weight_decay, self.data.K, cfg.loss.reduction)
            self.log(
                f"start: {cfg.name} ({cfg.data.name}, {cfg.model.name}, loss {cfg.loss.name}); "
                f"N_train={len(self.data.train)}; [Han et al. 2022] lambda of this objective = {lam:g}"
            )
        # the table is the checkpoint's own write (write_metrics); the other sinks get each measurement's rows
        self.sinks: list[MetricSink] = [make_sink(s, self.out) for s in cfg.log.sinks if s != "table" and self.main]
        self.sinks = [s for s in self.sinks if not isinstance(s, RunTableSink)]
        self.console = console or Console(stderr=True)
        # a live bar only redraws on a terminal: piped, it would stay silent until the run ends
        self.plain = progress and not self.console.is_terminal
        self._last_plain = -math.inf
        self.bar = _progress(self.console, progress and not self.plain)
        self._epoch_task = self.bar.add_task("epochs", total=E, completed=self.state.epoch, info="")
        self._batch_task = self.bar.add_task("batches", total=1, info="")

    def __enter__(self) -> Trainer:
        self.bar.start()
        if self.main and self.background_checkpoints and self._writer is None:
            self._writer = CheckpointWriter()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            self._close_writer(exc)
        finally:
            self.bar.stop()

    def _close_writer(self, exc: BaseException | None = None) -> None:
        """Finish the background writes and end the writer (later writes are synchronous). A failed write is
        raised; when the run is already failing with ``exc``, it is added to ``exc``'s notes instead."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:
            writer.close()
        except Exception as err:
            if exc is None:
                raise
            exc.add_note(f"the background checkpoint writer failed too: {type(err).__name__}: {err}")

    def wait_for_writes(self) -> None:
        """Return once every checkpoint (and log line) submitted so far is on disk; a failed write is raised.
        Call it before reading the run's files while inside ``with``."""
        if self._writer is not None:
            self._writer.wait()

    @property
    def done(self) -> bool:
        """Whether every epoch of the config has been trained."""
        return self.state.epoch >= self.cfg.train.epochs

    def log(self, msg: str) -> None:
        """Append a time-stamped line to ``log.txt`` (rank 0 only); with a background writer, through its queue,
        so the line lands after the checkpoints submitted before it."""
        if not self.main:
            return
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}\n"
        if self._writer is not None:
            self._writer.submit(functools.partial(_append_line, self.log_path, line))
        else:
            _append_line(self.log_path, line)

    # ------------------------------------------------------------------ the run
    def begin(self) -> None:
        """Epoch 0 of a fresh run: measure the initialisation (when planned) and write the first checkpoint."""
        if 0 in self.planned:
            t0 = time.perf_counter()
            self.measure()
            dt = time.perf_counter() - t0
            self.state.timings["measure_s"] += dt
            self.epoch_timings.append((0, 0.0, dt))
        self.checkpoint()

    def epoch(self) -> None:
        """Train the next epoch, then its zero-error check and measurements, and the checkpoint when it is due
        (``checkpoint.every``, and the last epoch)."""
        cfg, st = self.cfg, self.state
        if self._writer is not None:
            self._writer.raise_error()  # the previous epoch's checkpoint failed: so does the run
        epoch = st.epoch + 1
        lr = lr_at(epoch - 1, cfg.optim.lr, cfg.schedule, cfg.train.epochs)
        for g in self.opt.param_groups:
            g["lr"] = lr
        t0 = time.perf_counter()
        run_loss, run_err = self._train_pass(epoch)
        train_dt = time.perf_counter() - t0
        st.timings["train_s"] += train_dt
        st.epoch = epoch
        running = (("running_loss", run_loss), ("running_error", run_err), ("lr", lr))
        st.rows += [MetricRow(epoch, "train", OUTPUT_LAYER, m, v) for m, v in running]
        t0 = time.perf_counter()
        err = self._check_and_measure(run_err)
        measure_dt = time.perf_counter() - t0
        st.timings["measure_s"] += measure_dt
        self.epoch_timings.append((epoch, train_dt, measure_dt))
        if epoch % cfg.checkpoint.every == 0 or epoch == cfg.train.epochs:
            self.checkpoint()
        tpt = f" | TPT from {st.zero_error_epoch}" if st.zero_error_epoch else ""
        self.bar.update(self._epoch_task, advance=1, info=f"loss {run_loss:.4g} err {run_err:.3f}{tpt}")
        self._plain_line(epoch, run_loss, run_err)
        self.log(
            f"epoch {epoch}: lr {lr:.4g} running loss {run_loss:.6g} running error {run_err:.4f}"
            # .4g: 2 errors in 60,000 read 3.333e-05, not 0.0000 (which a reader takes for the zero-error epoch)
            + ("" if math.isnan(err) else f" eval train error {err:.4g}")
        )

    def _plain_line(self, epoch: int, run_loss: float, run_err: float) -> None:
        now = time.monotonic()
        due = now - self._last_plain >= PLAIN_PROGRESS_EVERY_S or epoch == self.state.zero_error_epoch
        if not self.plain or not (due or epoch == self.cfg.train.epochs):
            return
        self._last_plain = now
        tpt = f" zero-error epoch {self.state.zero_error_epoch}" if self.state.zero_error_epoch else ""
        self.console.print(
            f"epoch {epoch}/{self.cfg.train.epochs} loss {run_loss:.4g} error {run_err:.4f}{tpt} run {self.out}",
            soft_wrap=True,
            markup=False,
            highlight=False,
        )

    def _check_and_measure(self, run_err: float) -> float:
        """The current epoch's measurement (planned, or the first at zero error) and exact zero-error check;
        returns the eval-mode training error (nan when neither ran)."""
        st, m = self.state, self.cfg.measure
        err = math.nan
        if st.epoch in self.planned:
            err = self.measure()
        elif st.zero_error_epoch is None and (m.zero_error_check == "every_epoch" or run_err <= m.zero_error_gate):
            err = self.eval_error()
            if err != 0.0:  # at zero, the measurement below records this epoch's error (one row per key)
                st.rows.append(MetricRow(st.epoch, "train", OUTPUT_LAYER, "error", err))  # the check is a measurement
        if st.zero_error_epoch is None and err == 0.0:
            st.zero_error_epoch = st.epoch
            self.log(f"epoch {st.epoch}: training error reached 0 (terminal phase begins)")
            if st.epoch not in self.planned:
                self.measure()
        return err

    def measure(self) -> float:
        """Measure the model at the current epoch on the configured splits (:func:`measure_split`; the test split
        against the training means), adding the rows and the epoch to the state; returns the eval-mode training
        error (nan when the train split is not measured)."""
        epoch, m = self.state.epoch, self.cfg.measure
        first_new = len(self.state.rows)
        plan = self.measure_plan()
        ref = None
        train_error = math.nan
        for split, data in self.data.splits.items():
            if split not in m.splits or data is None:
                continue
            task = self.bar.add_task(f"measure {split}", total=2 * data.shard_size(m.batch_size), info=f"epoch {epoch}")
            advance = lambda n, t=task: self.bar.advance(t, n)  # noqa: E731
            here = replace(plan, advance=advance, geodesic=plan.geodesic and split == "train")  # geodesic: train only
            res = data.measure(self.model, here, ref)
            self.bar.remove_task(task)
            if split == "train":
                ref, train_error = res.stats, res.error
            for w in res.warnings:
                self.log(f"epoch {epoch} {split}: {w}")
            self.state.rows += [MetricRow(epoch, split, lay, met, v) for lay, met, v in res.rows]
            dec = self._mse_decomposition(res, data)
            self.state.rows += [MetricRow(epoch, split, OUTPUT_LAYER, met, v) for met, v in dec]
        self.state.measured.append(epoch)
        for sink in self.sinks:
            sink.write(self.state.rows[first_new:])
        return train_error

    def measure_plan(self) -> MeasurePlan:
        """The :class:`~nclab.measure.MeasurePlan` of the config's ``measure`` section for the model as it is now
        (the classifier's current weights)."""
        m, model = self.cfg.measure, self.model
        layers = None if m.layers == "all" else ([model.penultimate_name] if m.layers == "penultimate" else m.layers)
        return MeasurePlan.of(
            model,
            self.data.K,
            layers=layers,
            penultimate=model.penultimate_name,
            loss_fn=self.loss_fn if self.autocast_dtype is None else self._loss,
            full_layers=m.full_layers,
            conventions=m.conventions,
            batch_size=m.batch_size,
            cache_mb=m.cache_mb,
            compute_dtype=m.compute_dtype,
            threads=m.blas_threads,
            geodesic=m.geodesic,
            distributed=is_distributed(),
            autocast_dtype=self.autocast_dtype,
        )

    @torch.no_grad()
    def eval_error(self) -> float:
        """Eval-mode error of the model on the training split (the exact zero-error check), in the run's
        precision."""
        model, data = self.model, self.data.splits["train"]
        assert data is not None
        model.eval()
        wrong = data.wrong(model, self.cfg.measure.batch_size, self.autocast_dtype)
        model.train()
        (total,) = ddp.sum_all(wrong)
        return total / data.N

    def checkpoint(self) -> None:
        """Write ``checkpoints/last.pt`` (copied to ``epoch_NNNN.pt`` at a measured epoch with
        ``checkpoint.keep_measured``), then ``metrics.csv``, each atomically; rank 0 only. The checkpoint is sealed
        with its checksum (:mod:`nclab.train.checkpoint`).

        With a background writer (inside ``with``) this waits for the previous checkpoint's write (raising its
        error), copies the state (:func:`~nclab.train.checkpoint.snapshot_state`: the model's and the
        optimiser's tensors cloned on their device) and returns; the writer seals and writes the copy while
        training goes on. ``timings["checkpoint_s"]`` counts the training thread's share (the wait and the copy).
        """
        if not self.main:
            return
        t0 = time.perf_counter()
        st = self.state
        if self._writer is not None:
            self._writer.wait()  # at most one checkpoint in flight, so they land in order
        # a background write gets copies (training goes on while it seals them); a synchronous one the originals
        copy = (lambda s: s) if self._writer is None else snapshot_state
        payload = {
            "epoch": st.epoch,
            "model": copy(self.model.state_dict()),
            "optimizer": copy(self.opt.state_dict()),
            "torch_rng": torch.get_rng_state(),
            "rows": list(st.rows),  # immutable rows; made plain tuples by the writer
            "zero_error_epoch": st.zero_error_epoch,
            "measured": list(st.measured),
            "timings": dict(st.timings),
            # who trained it: verify and resume check config.yaml and metrics.csv against these
            "run_id": self.run_id,
            "config": self.cfg.to_dict(),
            # whether metrics.parquet goes with metrics.csv (pyarrow installed): verify reports it missing then
            "parquet": _HAVE_PYARROW,
        }
        if self.scaler is not None:  # fp16: the loss scale goes on where it was
            payload["grad_scaler"] = self.scaler.state_dict()
        keep = self.cfg.checkpoint.keep_measured and st.epoch in st.measured
        write = functools.partial(self._write_checkpoint, payload, keep)
        if self._writer is not None:
            self._writer.submit(write)
        else:
            write()
        st.timings["checkpoint_s"] += time.perf_counter() - t0

    def _write_checkpoint(self, payload: dict[str, Any], keep: bool) -> None:
        """Seal ``payload`` (:meth:`checkpoint`'s copy of the state) and write it, then ``metrics.csv`` from its
        rows; on the background writer's thread or the caller's."""
        rows = payload["rows"]
        payload["rows"] = [tuple(r) for r in rows]  # plain tuples: the weights_only loader refuses unknown classes
        data = checkpoint_bytes(payload)
        atomic_write_bytes(self.run_dir.checkpoint, data)
        if keep:
            atomic_write_bytes(self.run_dir.epoch_checkpoint(payload["epoch"]), data)
        write_metrics(rows, self.out, run_id=self.run_id)

    def finish(self) -> RunResult:
        """Write ``summary.json`` (and ``report.html`` with ``config.report``; rank 0 only); the run's
        :class:`RunResult`."""
        cfg, st, model, data = self.cfg, self.state, self.model, self.data
        self._close_writer()  # every checkpoint on disk (the report reads metrics.csv); what follows is synchronous
        if not self.main:
            return RunResult(self.out, cfg, st.zero_error_epoch, st.measured, st.rows, model.penultimate_name)
        summary = {
            "run_id": self.run_id,
            "name": cfg.name,
            "epochs": cfg.train.epochs,
            "zero_error_epoch": st.zero_error_epoch,
            "measured_epochs": st.measured,
            "penultimate": model.penultimate_name,
            "layers": list(model.measured_layers()),
            "num_classes": data.K,
            "train_samples": len(data.train),
            "test_samples": None if data.splits["test"] is None else data.splits["test"].N,
            "lambda_from_weight_decay": lambda_from_weight_decay(cfg.optim.weight_decay, data.K, cfg.loss.reduction),
            "timings": st.timings,
        }
        summary = json.loads(json.dumps(summary))  # sealed as a reader loads it back (tuples become lists)
        summary["sha256"] = object_sha256(
            summary
        )  # `nclab verify` then sees any edit, also of fields nothing else records
        atomic_write_text(self.run_dir.summary, json.dumps(summary, indent=2) + "\n")
        for sink in self.sinks:
            sink.close()
        t = st.timings
        self.log(
            f"done: zero-error epoch {st.zero_error_epoch}; train {t['train_s']:.1f}s, measure {t['measure_s']:.1f}s"
        )
        if cfg.report:
            from nclab.report.run_report import write_run_report

            write_run_report(self.out)
        return RunResult(
            out=self.out,
            config=cfg,
            zero_error_epoch=st.zero_error_epoch,
            measured_epochs=st.measured,
            rows=st.rows,
            penultimate=model.penultimate_name,
            timings=st.timings,
            epoch_timings=self.epoch_timings,
        )

    # ------------------------------------------------------------------ pieces
    def _load_data(self) -> RunData:
        try:
            return load_run_data(self.cfg, self.device, self.batch_size)
        except CorruptDatasetError:
            raise
        except (ValueError, TypeError) as err:  # a value only the loader can judge (per_class vs the data)
            raise ConfigError(f"invalid config:\n  data: {err}") from None

    def _build(self) -> tuple[CollapseNet, torch.optim.Optimizer, LossFn]:
        cfg, data = self.cfg, self.data
        if cfg.train.channels_last and len(data.input_shape) != 3:
            raise ConfigError(
                f"invalid config:\n  train.channels_last: needs image inputs (C, H, W); {cfg.data.name} has inputs "
                f"of shape {data.input_shape}"
            )
        if self.batch_size % cfg.train.grad_accum:
            raise ConfigError(
                f"invalid config:\n  train.grad_accum: {cfg.train.grad_accum} does not divide this process's batch "
                f"of {self.batch_size} (train.batch_size={cfg.train.batch_size} over the processes)"
            )
        torch.manual_seed(cfg.seed)  # model initialisation (and CMF head rows) depend on the seed only
        try:
            model = build_model(
                cfg.model.name,
                data.input_shape,
                data.K,
                head=cfg.model.head.build_kwargs(),
                **cfg.model.options,
            )
        except (ValueError, TypeError) as err:  # a value only the constructor can judge (an activation's name)
            raise ConfigError(f"invalid config:\n  model: {err}") from None
        if isinstance(cfg.measure.layers, list):  # names only the built model can check: before epoch 0
            try:
                resolve_layers(model, cfg.measure.layers)
            except KeyError as err:
                raise ConfigError(f"invalid config:\n  measure.layers: {err.args[0]}") from None
        model.to(self.device)
        if cfg.train.channels_last:
            model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # torch's stubs omit it
        return model, make_optimizer(model, cfg.optim), make_loss(cfg.loss, data.K)

    def _restore(self, saved: dict[str, Any]) -> None:
        self.model.load_state_dict(saved["model"])
        self.opt.load_state_dict(saved["optimizer"])
        if self.scaler is not None and "grad_scaler" in saved:
            self.scaler.load_state_dict(saved["grad_scaler"])
        torch.set_rng_state(saved["torch_rng"])
        st = self.state
        st.rows = [MetricRow(*r) for r in columns_to_rows(saved["rows"])]  # as loaded, or a raw torch.load
        st.zero_error_epoch, st.epoch = saved["zero_error_epoch"], int(saved["epoch"])
        st.timings.update(saved.get("timings", {}))
        st.measured = list(saved["measured"])
        self.log(f"resumed from epoch {st.epoch}")

    def _train_pass(self, epoch: int) -> tuple[float, float]:
        """One epoch of mini-batch training in the order drawn from ``(seed, epoch)``; the running (train-mode)
        loss and error (against the unmixed labels)."""
        cfg, feed, model = self.cfg.train, self.data.train, self.model
        n_batches = feed.num_batches()
        if n_batches == 0:
            raise ConfigError(
                f"train.batch_size={cfg.batch_size} exceeds the {len(feed)} training samples with drop_last: no batch"
            )
        self.bar.reset(self._batch_task, total=n_batches, info="")
        model.train()
        tot_loss, tot_wrong, seen = 0.0, 0, 0
        for batch in feed.batches(epoch):
            loss_sum, wrong = self._optimise(batch)
            tot_loss += loss_sum
            tot_wrong += wrong
            seen += len(batch.y)
            self.bar.advance(self._batch_task)
        loss_all, wrong_all, seen_all = ddp.sum_all(tot_loss, tot_wrong, seen)
        if not math.isfinite(loss_all):
            raise FloatingPointError(f"training diverged at epoch {epoch} (loss {loss_all / seen_all}); lower optim.lr")
        return loss_all / seen_all, wrong_all / seen_all

    def _loss(self, logits: torch.Tensor, target: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """The loss in float32 whatever the autocast dtype of the forward pass (``.float()`` is a no-op on float32)."""
        return self.loss_fn(logits.float(), target, h.float())

    def _optimise(self, batch: TrainingBatch) -> tuple[float, int]:
        """One optimisation step on ``batch``: ``train.grad_accum`` micro-batches (each loss weighted by its share
        of the batch, so the gradients add up to the whole batch's), under the run's autocast, then the step (through
        the fp16 loss scaler when there is one). Returns the batch's summed loss and its misclassified count."""
        model, k, n = self.model, self.cfg.train.grad_accum, len(batch.y)
        edges = [j * n // k for j in range(k + 1)]
        parts = [slice(a, b) for a, b in itertools.pairwise(edges) if b > a]
        observe = getattr(model.head, "observe", None)
        no_sync = getattr(self.step, "no_sync", None)  # DistributedDataParallel's
        seen: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.opt.zero_grad(set_to_none=True)
        loss_sum, wrong = 0.0, 0
        for j, part in enumerate(parts):
            x, y, target = batch.x[part], batch.y[part], batch.target[part]
            if self.cfg.train.channels_last and x.ndim == 4:
                x = x.contiguous(memory_format=torch.channels_last)
            # DDP: all-reduce the gradients once, after the last micro-batch
            last = j == len(parts) - 1
            sync = contextlib.nullcontext() if last or no_sync is None else no_sync()
            with sync:
                with autocast(model, self.autocast_dtype):
                    logits, h = self.step(x)
                loss = self._loss(logits, target, h)
                scaled = loss if len(parts) == 1 else loss * (len(y) / n)
                (scaled if self.scaler is None else self.scaler.scale(scaled)).backward()
            if observe is not None:
                seen.append((h.detach().float(), y))
            loss_sum += float(loss.detach()) * len(y)
            wrong += int((logits.detach().argmax(1) != y).sum())
        if self.scaler is None:
            self.opt.step()
        else:
            self.scaler.step(self.opt)
            self.scaler.update()
        if observe is not None:
            for h, y in seen:  # the CMF head's class means, after the step as before accumulation existed
                observe(h, y)
        return loss_sum, wrong

    def _mse_decomposition(self, res: SplitMeasurement, data: EvalSplit) -> list[tuple[str, float]]:
        """The [Han et al. 2022] loss decomposition (Fig. 2) of an MSE run at the penultimate layer:
        L = L_NC1 + L_NC2/3 + L_perp, with the lambda this run trains with (``lambda_from_weight_decay``). Only for
        MSE on unit one-hot targets with a linear head, from the full ClassStats of the same pass (no extra pass)."""
        loss, model = self.cfg.loss, self.model
        stats = res.moments.get(model.penultimate_name)  # the report's view: its Sigma_W and Sigma_T are reused
        clf = find_classifier(model)
        if loss.name != "mse" or loss.target_scale != 1.0 or clf is None or stats is None or stats.track != "full":
            return []
        if getattr(model.head, "cosine", False) or stats.empty_classes.size:
            return []
        lam = lambda_from_weight_decay(self.cfg.optim.weight_decay, data.K, loss.reduction)
        dec = mse_decomposition_from_stats(stats, clf.W, clf.b, lam=lam)
        keys = ("L", "L_LS", "L_NC1", "L_NC23", "L_perp", "proximity_ratio")
        return [(f"mse_{k}", float(dec[k])) for k in keys]


def _append_line(path: Path, line: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)


def _prepare_dir(cfg: RunConfig, out: Path, resume: bool, overwrite: bool) -> tuple[dict[str, Any] | None, list[str]]:
    """The checkpoint to continue (``None``: a fresh run) and the notes for the log. Every refusal happens
    before anything in ``out`` is written (:meth:`RunDir.start`, :func:`_prepare_resume`); a resume then repairs a
    ``metrics.csv`` shorter than the checkpoint's rows (see :mod:`nclab.train.rundir`)."""
    run = RunDir(out)
    if resume:
        return _prepare_resume(cfg, run)
    run.start(overwrite=overwrite)
    return None, []


def _prepare_resume(cfg: RunConfig, run: RunDir) -> tuple[dict[str, Any], list[str]]:
    out, ckpt = run.path, run.checkpoint
    run.check_resumable()
    try:
        saved_cfg = load_yaml_file(run.config)
    except ValueError as err:  # not valid YAML, or a duplicate key
        msg = f"cannot resume {out}: its config.yaml cannot be read ({err}); nothing was changed"
        raise RunDirError(msg) from None
    saved_cfg = saved_cfg if isinstance(saved_cfg, dict) else {}
    given = cfg.to_dict()
    diff = resume_differences(saved_cfg, given)
    if diff:
        raise ConfigError(
            f"cannot resume {out}: the config differs from the saved one at {', '.join(diff)} (only train.epochs "
            "may change, to extend the run); nothing was changed"
        )
    try:
        state = load_checkpoint(ckpt)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError, ValueError) as err:
        msg = f"cannot resume {out}: its checkpoint {ckpt} cannot be read ({err}); nothing was changed"
        raise RunDirError(msg) from None
    _check_saved_config(run, saved_cfg, state)
    done, budget = int(state["epoch"]), cfg.train.epochs
    if done > budget:
        raise RunDirError(
            f"cannot resume {out}: its checkpoint is at epoch {done}, past train.epochs={budget} "
            "(a run can be extended, not cut short); nothing was changed"
        )
    notes = []
    old_budget = saved_cfg["train"]["epochs"]
    if old_budget != budget:
        note = f"extending the run: train.epochs {old_budget} -> {budget} from epoch {done}"
        moving = budget_dependent_fields(given)
        if moving:
            # the epochs already trained keep the lr and measurements of the old budget: not an uninterrupted run
            note += (
                f"; from epoch {done + 1} on, these follow the new budget: {'; '.join(moving)} (epochs 1-{done} keep "
                f"the old ones, recorded in metrics.csv)"
            )
        notes.append(note)
    status, n = metrics_file_status(run.metrics, state["rows"])
    if status == "different":
        raise RunDirError(
            f"cannot resume {out}: its metrics.csv disagrees with the checkpoint {ckpt} at "
            f"{'the header' if n == 0 else f'data line {n}'} (edited, or from another run), so it cannot be repaired "
            "from the checkpoint; nothing was changed. Move metrics.csv away to have it rebuilt from the checkpoint"
        )
    if status != "same":  # fewer rows than the checkpoint, or a cut line after all of them
        write_metrics([MetricRow(*r) for r in state["rows"]], out, run_id=run_id(cfg))
        held = "was missing" if status == "missing" else f"held {n} of the checkpoint rows, cut"
        notes.append(f"metrics.csv {held}: rewritten from the checkpoint ({len(state['rows'])} rows)")
    elif _HAVE_PYARROW and not run.parquet.exists():  # deleted: the same table again, both files
        write_metrics([MetricRow(*r) for r in state["rows"]], out, run_id=run_id(cfg))
        notes.append(f"metrics.parquet was missing: rewritten from the checkpoint ({len(state['rows'])} rows)")
    # this process owns the folder now: the temporary files of a write its killed predecessor never renamed go
    removed = run.remove_leftover_temporaries()
    if removed:
        names = ", ".join(p.relative_to(out).as_posix() for p in removed)
        notes.append(f"removed {len(removed)} temporary file(s) left by an interrupted write: {names}")
    return state, notes


def _dotted(config: Any, key: str) -> Any:
    for part in key.split("."):
        config = config.get(part) if isinstance(config, dict) else None
    return config


def _check_saved_config(run: RunDir, saved: dict[str, Any], state: dict[str, Any]) -> None:
    """Refuse a ``config.yaml`` edited after the run wrote it (the config given is compared with it, so an edit
    would otherwise continue the checkpoint under another config and relabel every row): it must equal the config
    in the checkpoint except :data:`~nclab.train.rundir.EXTENDABLE_KEYS`; an older checkpoint without one, the run
    id that the run's rows record must be the hash of ``config.yaml``."""
    out, ckpt = run.path, run.checkpoint
    trained = state.get("config")
    if isinstance(trained, dict):
        edited = resume_differences(trained, saved)
        if edited:
            values = "; ".join(
                f"{k} is {_dotted(saved, k)!r} in config.yaml, {_dotted(trained, k)!r} in the checkpoint"
                for k in edited[:4]
            )
            raise RunDirError(
                f"cannot resume {out}: its config.yaml was edited after the run wrote it: it differs from the config "
                f"that trained the checkpoint {ckpt} at {', '.join(edited)} ({values}); only train.epochs may change "
                "(to extend the run). Nothing was changed: restore config.yaml, or train the new config in another "
                "folder"
            )
        return
    try:
        recorded = state.get("run_id") or (read_run_id(run.metrics) if run.metrics.is_file() else None)
    except ValueError:  # an unreadable header: metrics_file_status reports it
        recorded = None
    name = str(saved.get("name", ""))
    if recorded is None or recorded == run_id_of(name, saved):
        return
    # an extension killed before its first checkpoint: config.yaml has the new budget, the rows the old one's id
    done = int(state["epoch"])
    budget = _dotted(saved, "train.epochs")
    if isinstance(budget, int) and any(
        run_id_of(name, {**saved, "train": {**saved["train"], "epochs": e}}) == recorded
        for e in range(done, max(done, budget) + 1)
    ):
        return
    raise RunDirError(
        f"cannot resume {out}: its config.yaml hashes to the run id {run_id_of(name, saved)}, but the run's "
        f"metrics.csv records {recorded}: config.yaml was edited after the run wrote it (or the table is another "
        "run's). Nothing was changed: restore config.yaml, or train the new config in another folder"
    )


def _prepare_shared(
    cfg: RunConfig, out: Path, resume: bool, overwrite: bool
) -> tuple[dict[str, Any] | None, list[str]]:
    """:func:`_prepare_dir` and ``config.yaml`` by rank 0 alone; the other ranks wait for its verdict (an error
    there fails them too) and then load the checkpoint it resumes from. A single process just prepares. Returns
    the checkpoint resumed from (or None) and the notes of the resume."""
    saved, error = None, None
    notes: list[str] = []
    run = RunDir(out)
    if ddp.is_main():
        try:
            saved, notes = _prepare_dir(cfg, out, resume, overwrite)
            atomic_write_text(run.config, yaml.safe_dump(cfg.to_dict(), sort_keys=False))
        except Exception as err:
            error = err
    verdict = ddp.broadcast((None if error is None else f"{type(error).__name__}: {error}", saved is not None))
    if error is not None:
        raise error
    if verdict[0] is not None:
        raise RunDirError(f"rank {rank()}: rank 0 could not prepare {out}: {verdict[0]}")
    if verdict[1] and saved is None:
        saved = load_checkpoint(run.checkpoint)
    return saved, notes


def train(
    config: RunConfig | dict[str, Any],
    out: str | Path,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    console: Console | None = None,
    on_epoch_end: Callable[[int], None] | None = None,
    lock: bool = True,
) -> RunResult:
    """Run (or, with ``resume=True``, continue) the training run ``config`` in folder ``out``.

    Writes ``config.yaml`` (resolved), ``metrics.csv`` (+ ``metrics.parquet`` with pyarrow), ``log.txt``,
    ``checkpoints/last.pt``, ``summary.json`` and ``report.html`` (``config.report``). ``on_epoch_end(epoch)``
    is called after each epoch's checkpoint is taken (tests use it to interrupt a run: the checkpoint being
    written in the background is finished before the exception leaves ``train``). The loop is :class:`Trainer`'s.
    When the run fails before its first epoch is checkpointed and ``out`` did not exist before, ``out`` is removed.

    Ownership and resume (:class:`~nclab.io.rundir.RunDir`, :mod:`nclab.train.rundir`): the process holds the
    lock ``out/run.lock`` while it writes (``lock=False`` skips it, for a process that shares the run of one that
    holds it, such as a DDP rank other than 0); a second writer fails at once with ``RunDirBusyError``.
    ``resume=True`` needs the checkpoint and the saved ``config.yaml``, unedited (it must equal the config in the
    checkpoint); the config must equal the saved one except ``train.epochs`` (extending the run); ``resume`` with
    ``overwrite`` is refused. A resume rewrites a ``metrics.csv`` that lost rows the checkpoint holds. A full disk
    ends the run with a ``RunDirError`` saying how to continue.

    Under ``torchrun`` (``RANK`` / ``WORLD_SIZE`` set) the run is data-parallel (:mod:`nclab.train.distributed`):
    ``train.batch_size`` is the global batch, every rank trains and measures its share, and rank 0 alone writes
    ``out`` (and alone holds its lock); every rank returns the same rows. A lost rank fails the others within
    ``$NCLAB_DDP_TIMEOUT_S``.

    Parameters
    ----------
    config : RunConfig or dict
        The run's config, resolved or as plain data (:func:`~nclab.train.resolve_config`: a preset is merged).
    out : str or pathlib.Path
        The run directory.
    resume : bool, default=False
        Continue the run in ``out`` from its checkpoint (``train.epochs`` may be raised).
    overwrite : bool, default=False
        Replace a finished or different run in ``out``.
    progress : bool, default=True
        Print the run directory and show progress (rank 0 only).
    console : rich.console.Console, optional
        Where progress and notes go (default: standard error).
    on_epoch_end : callable, optional
        ``on_epoch_end(epoch)`` after each epoch's checkpoint is taken.
    lock : bool, default=True
        Hold ``out/run.lock`` while writing.

    Returns
    -------
    RunResult
        The run directory, the resolved config, the zero-error epoch (``None`` if never reached), the measured
        epochs and every metric row.

    Raises
    ------
    ConfigError
        An invalid config, or a device this machine does not have.
    RunDirBusyError
        Another process holds the run's lock.
    RunDirError
        ``out`` cannot be started or resumed as asked (the message says why), or the disk is full.

    See Also
    --------
    Trainer : the loop, for a caller that drives it epoch by epoch.
    plan_run : the run's plan, without training.

    Examples
    --------
    A run of 30 digits (3 per class) for 2 epochs, measured at 0 and 2; the same seed gives the same numbers.

    >>> import tempfile
    >>> cfg = {"data": {"per_class": 3}, "model": {"options": {"widths": [8]}}, "train": {"epochs": 2,
    ...        "batch_size": 10}, "measure": {"epochs": [0, 2]}, "report": False}
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     a = train(cfg, Path(tmp) / "a", progress=False)
    ...     b = train(cfg, Path(tmp) / "b", progress=False)
    ...     files = {p.name for p in a.out.iterdir()}
    >>> a.measured_epochs, sorted(a.series("error", OUTPUT_LAYER)), a.series("nc1") == b.series("nc1")
    ([0, 2], [0, 2], True)
    >>> sorted(files & {"checkpoints", "config.yaml", "log.txt", "metrics.csv", "report.html", "summary.json"})
    ['checkpoints', 'config.yaml', 'log.txt', 'metrics.csv', 'summary.json']
    """
    cfg = config if isinstance(config, RunConfig) else resolve_config(config)
    out = Path(out)
    # user errors that need this machine (no GPU, an unwritable folder) are found before any work starts
    check_device_available(cfg.train.device)
    with ddp.session(cfg.train.device):
        main = ddp.is_main()
        created = main and not out.exists()
        owner = None
        early: Exception | None = None
        if main:  # the refusals that must not touch out, and the lock: rank 0's, told to every rank
            try:
                if resume and (overwrite or not out.is_dir()):
                    RunDir(out).check_resumable(overwrite=overwrite)
                check_output_dir(out, name="run directory", create=True)
                owner = RunDir(out).lock() if lock else None
            except OSError as err:
                full = disk_full_error(err, out, resumable=False)
                if full is None:
                    early = err
                else:
                    full.__cause__ = err
                    early = full
            except Exception as err:
                early = err
        verdict = ddp.broadcast(None if early is None else f"{type(early).__name__}: {early}")
        if early is not None:
            raise early
        if verdict is not None:  # rank 0 says why (a user error, exit 2 each): no traceback per rank
            raise RunDirError(f"rank {rank()}: rank 0 could not take {out}: {verdict}")
        try:
            return _run(cfg, out, resume, overwrite, progress and main, console, on_epoch_end, owner)
        except BaseException as err:
            if owner is not None:
                owner.release()  # before a cleanup that removes the folder, lock file included
            # a run that never finished an epoch holds nothing worth keeping; a folder the caller made stays
            if created and _last_epoch(out) == 0:
                shutil.rmtree(out, ignore_errors=True)
            if isinstance(err, dist.DistError):
                raise RuntimeError(
                    f"rank {rank()}: {type(err).__name__} in a collective: another rank of this run failed or "
                    f"was killed; rank 0's last complete checkpoint (epoch {_last_epoch(out)}) is in "
                    f"{RunDir(out).checkpoints}: continue with --resume"
                ) from err
            full = disk_full_error(err, out, resumable=RunDir(out).checkpoint.is_file())
            if full is not None:
                raise full from err
            raise
        finally:
            if owner is not None:
                owner.release()


def _last_epoch(out: Path) -> int:
    try:
        return int(load_checkpoint(RunDir(out).checkpoint)["epoch"])
    except (OSError, ValueError):  # missing or corrupt: no finished epoch either
        return 0


def _run(
    cfg: RunConfig,
    out: Path,
    resume: bool,
    overwrite: bool,
    progress: bool,
    console: Console | None,
    on_epoch_end: Callable[[int], None] | None,
    owner: RunLock | None,
) -> RunResult:
    con = console or Console(stderr=True)
    notes = [owner.note] if owner is not None and owner.note else []
    for note in notes:  # before any refusal below: the takeover happened either way
        con.print(f"note: {note}", soft_wrap=True, markup=False, highlight=False)
    saved, resume_notes = _prepare_shared(cfg, out, resume, overwrite)
    for note in resume_notes:
        con.print(f"note: {note}", soft_wrap=True, markup=False, highlight=False)
    if progress:
        con.print(f"nclab train {cfg.name}: run directory {out}", soft_wrap=True, markup=False, highlight=False)
    # train.threads governs the BLAS of numpy/scipy too (the measurements' syrk and eigendecompositions): with
    # torch on one thread and OpenBLAS on two, a few BLAS calls per run stall for 100+ ms waking their pool
    # (measured: the demo's eigh time 0.75 s -> 0.07 s, benchmarks/RESULTS.md)
    with torch_threads(cfg.train.threads), blas_threads(cfg.train.threads):
        with Trainer(cfg, out, saved, console=console, progress=progress) as trainer:
            for note in notes + resume_notes:
                trainer.log(note)
            if saved is None:
                trainer.begin()
            while not trainer.done:
                trainer.epoch()
                if on_epoch_end is not None:
                    on_epoch_end(trainer.state.epoch)
        return trainer.finish()
