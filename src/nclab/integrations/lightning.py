"""Lightning callback: collapse measured on the schedule, before training and at the end of training epochs.

At the start of training (the model before its first step: epoch 0 of a new fit, as nclab's own trainer
measures it) and at the end of each scheduled epoch ``e`` (``trainer.current_epoch + 1``, so epochs count from 1)
the callback measures the train dataloader and the first validation dataloader (logged as split ``test``, from
epoch 0 on, whether or not Lightning runs a sanity check or validates in that epoch) with a
:class:`~nclab.CollapseMonitor` (held-out NCC against the training means), logs each row under
``collapse/{split}/{layer}/{metric}`` (the keys of the Hugging Face callback, :mod:`nclab.integrations.hf`) and
writes the monitor's sinks (the run table in ``out`` by default). Epoch ``e >= 1`` is logged through
``pl_module.log_dict`` (so the values reach every logger and ``trainer.callback_metrics``, and checkpoint
callbacks can monitor them); the start of training directly through ``trainer.logger.log_metrics`` at the current
step, since values logged in ``on_train_start`` would only reach the loggers merged into the first epoch's. Under
DDP each rank measures its sampler's shard and the monitor all-reduces, so every rank logs the same values.

Epoch numbers follow the trainer's own counter: a fit resumed from a checkpoint (``fit(ckpt_path=...)``)
starts at the checkpoint's epoch (its first measurement is that epoch again, and replaces its rows in the table),
and a second fit of the same module with the same callback continues after the first one's last epoch. The table
in ``out`` is appended to (the monitor's run identity; see :class:`~nclab.CollapseMonitor`). Only whole epochs are
measured: an epoch cut short (``max_steps``, ``max_time``, a stop request mid-epoch) is not measured, with a
warning, since the epoch column is an integer and rounding would label half an epoch as a whole one. With
``fast_dev_run`` (Lightning suppresses logging and checkpointing) nothing is measured and no table is written.
"""

from __future__ import annotations

import math
import warnings
import weakref
from typing import Any

try:
    import lightning.pytorch as pl
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError("nclab.integrations.lightning needs Lightning: pip install nclab[lightning]") from err

from nclab.io.sinks import tag
from nclab.metrics.classes import ClassesRule, check_classes
from nclab.monitor import CollapseMonitor, MonitorResult

__all__ = ["CollapseCallback"]


class CollapseCallback(pl.Callback):
    """Measure collapse during ``Trainer.fit``; ``K`` and ``monitor_options`` as
    :class:`~nclab.CollapseMonitor` (``layers``, ``classifier``, ``schedule``, ``track``, ``sinks``, ``out``,
    ``run_id``, ``overwrite``, ...). :attr:`results` keeps every measurement; :attr:`monitor` is the monitor of the
    current fit.

    Parameters
    ----------
    K : int
        Number of classes, ``>= 2``.
    classes : {"all", "present"}, default "all"
        The classes measured, as :class:`~nclab.CollapseMonitor`: every class, or those with at least
        ``min_count`` samples (the classifier's rows subset with them; ``K_present`` recorded).
    min_count : int, optional
        The samples a class needs under ``classes="present"`` (default 1).
    **monitor_options
        As :class:`~nclab.CollapseMonitor` (``layers``, ``classifier``, ``schedule``, ``track``, ``sinks``, ``out``,
        ``run_id``, ``overwrite``, ...).

    Examples
    --------
    Two epochs of a tiny module: the callback measures the model before training (epoch 0) and after each epoch.

    >>> import torch
    >>> from torch import nn
    >>> class Module(pl.LightningModule):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    ...     def forward(self, x):
    ...         return self.net(x)
    ...     def training_step(self, batch, batch_idx):
    ...         x, y = batch
    ...         return nn.functional.cross_entropy(self(x), y)
    ...     def configure_optimizers(self):
    ...         return torch.optim.SGD(self.parameters(), lr=0.1)
    >>> _ = torch.manual_seed(0)
    >>> x, y = torch.randn(30, 4), torch.arange(30) % 3
    >>> data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=10)
    >>> cb = CollapseCallback(K=3, out=None)
    >>> trainer = pl.Trainer(
    ...     max_epochs=2, callbacks=[cb], logger=False, enable_checkpointing=False, enable_progress_bar=False,
    ...     enable_model_summary=False, accelerator="cpu",
    ... )
    >>> trainer.fit(Module(), data)
    >>> [(r.epoch, r.split) for r in cb.results], sorted(cb.results[-1].reports)
    ([(0, 'train'), (1, 'train'), (2, 'train')], ['output', 'penultimate'])
    """

    def __init__(
        self, K: int, *, classes: ClassesRule = "all", min_count: int | None = None, **monitor_options: Any
    ) -> None:
        self.K = K
        check_classes(classes, min_count)
        self.options = {**monitor_options, "classes": classes, "min_count": min_count}
        self.monitor: CollapseMonitor | None = None
        self.results: list[MonitorResult] = []
        #: epochs the model of the last fit has been trained for, over this callback's fits, and that model
        self._trained = 0.0
        self._model: weakref.ref[pl.LightningModule] | None = None
        self._base = 0.0  # the epoch number of this fit's trainer epoch 0

    def _measure(self, trainer: pl.Trainer, epoch: float, where: str) -> dict[str, float]:
        assert self.monitor is not None
        label = self._base + epoch
        if not math.isclose(label, round(label), abs_tol=1e-9):
            warnings.warn(
                f"CollapseCallback: {where} is at epoch {label:.4g}, not at the end of an epoch: that model is not "
                "measured (nclab records whole epochs; the epoch column is an integer)",
                UserWarning,
                stacklevel=3,
            )
            return {}
        if not self.monitor.due(round(label)):
            return {}
        rows = []
        res = self.monitor.measure(trainer.train_dataloader, split="train", epoch=round(label))
        self.results.append(res)
        rows += res.rows
        val = self._val_loader(trainer)
        if val is not None:
            res = self.monitor.measure(val, split="test", epoch=round(label))
            self.results.append(res)
            rows += res.rows
        return {tag(r): float(r.value) for r in rows}

    @staticmethod
    def _val_loader(trainer: pl.Trainer) -> Any:
        """The first validation dataloader; loaded here when Lightning has not loaded it yet (no sanity check, and
        no validation due in this epoch: ``check_val_every_n_epoch``), as Lightning itself loads it at the start
        of training for its progress bar. ``None`` when validation is off (no ``validation_step``, no val data,
        ``limit_val_batches=0``)."""
        if trainer.val_dataloaders is None and trainer.enable_validation:
            trainer.validating = True
            try:
                trainer.fit_loop.epoch_loop.val_loop.setup_data()
            finally:
                trainer.training = True
        val = trainer.val_dataloaders
        if isinstance(val, list | tuple):
            val = val[0] if val else None
        return val

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.monitor is not None:  # a fit that ended in an exception: give its folder back first
            self.monitor.close()
        self.monitor = None
        if trainer.fast_dev_run:  # type: ignore[attr-defined]  # set on Trainer by a connector, not declared
            warnings.warn(
                "CollapseCallback: fast_dev_run: nothing is measured and no table is written (Lightning suppresses "
                "logging and checkpointing in this mode)",
                UserWarning,
                stacklevel=2,
            )
            return
        self.monitor = CollapseMonitor(pl_module, self.K, **self.options)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.monitor is None:
            return
        # the loops are restored here (not yet in on_fit_start): a resumed fit's current_epoch is the checkpoint's
        fresh = trainer.current_epoch == 0 and trainer.global_step == 0
        same = self._model is not None and self._model() is pl_module
        self._base = self._trained if fresh and same else 0.0
        self._model = weakref.ref(pl_module)
        self._trained = self._base + trainer.current_epoch
        # the dataloaders exist from here on (the validation ones too); no step of this fit has been taken yet
        values = self._measure(trainer, trainer.current_epoch, "the model at the start of training")
        if values:
            for logger in trainer.loggers:
                logger.log_metrics(values, step=trainer.global_step)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.monitor is None:
            return
        done = trainer.fit_loop.epoch_loop.batch_progress.current.completed
        total = trainer.num_training_batches
        part = 1.0 if not math.isfinite(total) or done >= total else done / total
        epoch = trainer.current_epoch + part
        self._trained = self._base + epoch
        values = self._measure(trainer, epoch, f"the model after {done} of the epoch's {total} batches")
        if values:
            pl_module.log_dict(values, on_step=False, on_epoch=True)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.monitor is not None:
            self.monitor.close()

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if self.monitor is not None:
            self.monitor.close()
