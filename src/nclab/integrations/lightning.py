"""Lightning callback: collapse measured on the schedule at the end of training epochs.

At the end of a scheduled epoch ``e`` (``trainer.current_epoch + 1``, so epochs count from 1) the callback
measures the train dataloader and the first validation dataloader with a :class:`~nclab.CollapseMonitor`
(held-out NCC against the training means), logs each row through ``trainer.logger.log_metrics`` under
``collapse/{split}/{layer}/{metric}`` with the epoch as step, and writes the monitor's
sinks (the run table in ``out`` by default). Under DDP each rank measures its sampler's shard and the monitor
all-reduces.
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

    def _measure(self, trainer: pl.Trainer, pl_module: pl.LightningModule, epoch: int) -> None:
        assert self.monitor is not None
        if not self.monitor.due(epoch):
            return
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
        values = {tag(r): float(r.value) for r in rows}
        if trainer.logger is not None:
            trainer.logger.log_metrics(values, step=epoch)

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.monitor = CollapseMonitor(pl_module, self.num_classes, **self.options)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._measure(trainer, pl_module, trainer.current_epoch + 1)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.monitor is not None:
            self.monitor.close()
