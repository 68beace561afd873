"""Lightning callback: collapse measured on the schedule, before training and at the end of training epochs.

At the start of training (epoch 0, the model before its first step, as nclab's own trainer measures it) and at
the end of each scheduled epoch ``e`` (``trainer.current_epoch + 1``, so epochs count from 1) the callback
measures the train dataloader and the first validation dataloader with a :class:`~nclab.CollapseMonitor`
(held-out NCC against the training means), logs each row under ``collapse/{split}/{layer}/{metric}`` and
writes the monitor's sinks (the run table in ``out`` by default). Epoch ``e >= 1`` is logged through
``pl_module.log_dict`` (so the values reach every logger and ``trainer.callback_metrics``, and checkpoint
callbacks can monitor them); epoch 0 directly through ``trainer.logger.log_metrics`` with step 0, since values
logged in ``on_train_start`` would only reach the loggers merged into the first epoch's. Under DDP each rank
measures its sampler's shard and the monitor all-reduces, so every rank logs the same values.
"""

from __future__ import annotations

from typing import Any

try:
    import lightning.pytorch as pl
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError("nclab.integrations.lightning needs Lightning: pip install nclab[lightning]") from err

from nclab.io.sinks import tag
from nclab.monitor import CollapseMonitor, MonitorResult

__all__ = ["CollapseCallback"]


class CollapseCallback(pl.Callback):
    """Measure collapse during ``Trainer.fit``; ``num_classes`` and ``monitor_options`` as
    :class:`~nclab.CollapseMonitor` (``layers``, ``classifier``, ``schedule``, ``track``, ``sinks``, ``out``,
    ...). :attr:`results` keeps every measurement; :attr:`monitor` is the monitor of the current fit."""

    def __init__(self, num_classes: int, **monitor_options: Any) -> None:
        self.num_classes = num_classes
        self.options = monitor_options
        self.monitor: CollapseMonitor | None = None
        self.results: list[MonitorResult] = []

    def _measure(self, trainer: pl.Trainer, pl_module: pl.LightningModule, epoch: int) -> dict[str, float]:
        assert self.monitor is not None
        if not self.monitor.due(epoch):
            return {}
        rows = []
        res = self.monitor.measure(trainer.train_dataloader, split="train", epoch=epoch)
        self.results.append(res)
        rows += res.rows
        val = trainer.val_dataloaders
        if isinstance(val, list | tuple):
            val = val[0] if val else None
        if val is not None:
            res = self.monitor.measure(val, split="test", epoch=epoch)
            self.results.append(res)
            rows += res.rows
        return {tag(r): float(r.value) for r in rows}

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.monitor = CollapseMonitor(pl_module, self.num_classes, **self.options)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # the dataloaders exist from here on (the validation ones too); no step has been taken yet
        values = self._measure(trainer, pl_module, 0)
        if values:
            for logger in trainer.loggers:
                logger.log_metrics(values, step=0)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        values = self._measure(trainer, pl_module, trainer.current_epoch + 1)
        if values:
            pl_module.log_dict(values, on_step=False, on_epoch=True)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.monitor is not None:
            self.monitor.close()
