"""Hugging Face callback: collapse measured on the schedule while ``transformers.Trainer`` trains.

::

    trainer = Trainer(model=model, args=args, train_dataset=train_ds, eval_dataset=eval_ds)
    CollapseCallback(K=K, out="runs/hf").attach(trainer)
    trainer.train()

At the start of training (the model before its first step: epoch 0 of a new run, as nclab's own trainer
measures it) and at the end of each scheduled epoch ``e`` (``state.epoch``, so epochs count from 1) the callback
measures the training data and the held-out data (NCC against the training means) with a
:class:`~nclab.CollapseMonitor`, and writes the monitor's sinks (the run table in ``out`` by default, appended to
under the monitor's run identity; TensorBoard, W&B or MLflow through ``sinks=``).

Attached to its Trainer (:meth:`CollapseCallback.attach`), the callback logs each epoch's values through
``Trainer.log``, keyed ``collapse/{split}/{layer}/{metric}`` as the Lightning callback's: every ``report_to``
integration receives them (HF's TensorBoard and W&B integrations file every key that does not start with
``eval_`` under ``train/``, as they do the Trainer's own loss: ``train/collapse/test/penultimate/nc1``; MLflow keeps
the key), and so do ``state.log_history`` and the console. The held-out split is the Trainer's ``eval_dataset``
(the first one of a dict), measured from epoch 0 on through ``Trainer.get_eval_dataloader``. Why ``attach``: a
``TrainerCallback`` is never given its Trainer, and ``Trainer(callbacks=[cb])`` alone leaves the callback without
``Trainer.log`` and without a way to build the eval dataloader before the Trainer's first evaluation; the callback
then appends its values to ``state.log_history`` only, measures the held-out split from the first evaluation on
(or ``eval_data=`` from epoch 0), and says so once in a warning.

Epoch numbers follow the Trainer's own counter ``state.epoch``: ``train(resume_from_checkpoint=...)`` starts at the
checkpoint's epoch (measured again: its rows are replaced), and a second ``train()`` of the same model with the
same callback (a new ``state`` that counts from 0) continues after the first one's last epoch in the table (the
Trainer's log keeps its own ``epoch``). Only whole epochs are measured: where ``state.epoch`` is fractional
(``max_steps`` within an epoch, ``num_train_epochs=1.5``) the model is not measured, with a warning, since the
epoch column is an integer and rounding would label 0.75 of an epoch as epoch 1.

Which feature is the penultimate one
------------------------------------
For ``*ForSequenceClassification`` models the penultimate feature is the pooled representation that the last
linear layer with ``K`` outputs reads (:func:`~nclab.measure.find_classifier`):

- BERT, ALBERT, ELECTRA-style poolers (``BertForSequenceClassification``): the input of ``classifier``, i.e.
  the pooler's ``tanh(dense(h_[CLS]))`` (after dropout, which is off while measuring);
- RoBERTa, XLM-R, DeBERTa-v2 (``RobertaForSequenceClassification``): the input of ``classifier.out_proj``,
  the head's ``tanh(dense(h_[CLS]))``;
- DistilBERT: the input of ``classifier`` (``relu(pre_classifier(h_[CLS]))``);
- decoder models (``GPT2ForSequenceClassification``, Llama, Mistral, Qwen: ``score``): ``score`` runs on every
  position and the logits are pooled afterwards at the last non-padding token, so the input of ``score`` is
  ``(B, T, d)``; the callback pools it the same way (:func:`last_token_pooling`, ``config.pad_token_id``), so
  the feature is the hidden state of the last non-padding token. In that case no ``error`` row is measured (the
  monitor counts errors only without a ``targets_fn``); the Trainer's own evaluation reports accuracy.

Under DDP each rank measures its sampler's shard and the monitor all-reduces; rank 0 writes.
"""

from __future__ import annotations

import math
import warnings
import weakref
from collections.abc import Callable, Mapping
from typing import Any, Literal

import torch

try:
    import transformers
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError("nclab.integrations.hf needs transformers: pip install nclab[hf]") from err

from nclab.io.sinks import tag
from nclab.metrics.classes import ClassesRule, check_classes
from nclab.monitor import CollapseMonitor, MonitorResult
from nclab.validation import check_choice

__all__ = ["CollapseCallback", "last_token_pooling"]


def last_token_pooling(
    pad_token_id: int | None,
) -> Callable[[torch.Tensor, Any], tuple[torch.Tensor, torch.Tensor]]:
    """A ``targets_fn`` (:class:`~nclab.CollapseMonitor`) that pools a decoder's per-position features
    ``(B, T, d)`` at the last token that is not ``pad_token_id`` (the rightmost one, for left or right padding;
    the last position when ``pad_token_id`` is ``None``), as ``GPT2ForSequenceClassification`` pools its logits.
    Features that are already ``(B, d)`` pass through. Labels are the batch's.

    Parameters
    ----------
    pad_token_id : int or None
        The padding token (None: pool the last position).

    Returns
    -------
    callable
        ``targets_fn(features, batch) -> (h (B, d), y (B,))``.

    Examples
    --------
    >>> pool = last_token_pooling(0)
    >>> h = torch.arange(12.0).reshape(2, 3, 2)  # B = 2, T = 3, d = 2
    >>> ids = torch.tensor([[5, 6, 0], [7, 8, 9]])
    >>> feats, y = pool(h, ({"input_ids": ids}, torch.tensor([1, 0])))
    >>> feats.tolist(), y.tolist()
    ([[2.0, 3.0], [10.0, 11.0]], [1, 0])
    """

    def pool(features: torch.Tensor, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, labels = batch
        if features.ndim == 2:
            return features, labels
        if pad_token_id is None:
            return features[:, -1], labels
        ids = inputs["input_ids"] if isinstance(inputs, Mapping) else inputs
        keep = (ids != pad_token_id).to(features.device, torch.int64)
        positions = torch.arange(ids.shape[-1], device=features.device)
        last = (positions * keep).argmax(-1)
        return features[torch.arange(features.shape[0], device=features.device), last], labels

    return pool


class CollapseCallback(transformers.TrainerCallback):
    """Measure collapse during ``transformers.Trainer.train``; :meth:`attach` it to the Trainer.

    Parameters
    ----------
    K : int
        ``K`` (``config.num_labels`` of a sequence classifier).
    train_data, eval_data : iterable of batches, optional
        What to measure (any iterable of mapping batches with ``labels``, or ``(x, y)`` pairs). Default: the
        Trainer's train dataloader, and its ``eval_dataset`` through ``Trainer.get_eval_dataloader`` (the first
        one of a dict; attached callback: from epoch 0; otherwise the Trainer's eval dataloader once its first
        evaluation has built one). Iterating the Trainer's shuffled train dataloader may draw from its sampler's
        generator (and change the training order against a run without the callback); an unshuffled
        ``train_data`` cannot.
    classes : {"all", "present"}, default "all"
        The classes measured, as :class:`~nclab.CollapseMonitor`: every class, or those with at least
        ``min_count`` samples (the classifier's rows subset with them; ``K_present`` recorded). Token-level
        collapse over a vocabulary needs ``"present"``.
    min_count : int, optional
        The samples a class needs under ``classes="present"`` (default 1).
    log_step : {"global", "epoch"}, default "global"
        The step at which the Trainer's ``report_to`` loggers (TensorBoard, W&B, MLflow) and ``log_history``
        receive the collapse values: ``"global"``, the Trainer's global step (Hugging Face's convention: the same
        axis as its loss curves); ``"epoch"``, the epoch of nclab's table (0 = before training), so that a
        TensorBoard curve's steps are the table's epochs. The values also carry ``"epoch"`` either way.
    **monitor_options
        As :class:`~nclab.CollapseMonitor` (``layers``, ``classifier``, ``schedule``, ``track``, ``sinks``,
        ``out``, ...). ``targets_fn`` defaults to :func:`last_token_pooling` with the model's
        ``config.pad_token_id`` when the classifier is ``score`` (decoder models, see the module docstring).

    Attributes
    ----------
    results : list of MonitorResult
        Every measurement, in order.
    monitor : CollapseMonitor or None
        The monitor of the current ``train()`` call.

    Examples
    --------
    A one-layer BERT built from its config (no download). Building a ``Trainer`` takes several seconds (it imports
    ``accelerate``), so the doctests skip this example:

    >>> import torch  # doctest: +SKIP
    >>> from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments  # doctest: +SKIP
    >>> cfg = BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
    ...                  intermediate_size=16, num_labels=3)  # doctest: +SKIP
    >>> ids = torch.randint(1, 20, (12, 5))  # doctest: +SKIP
    >>> data = [{"input_ids": ids[i], "labels": i % 3} for i in range(12)]  # doctest: +SKIP
    >>> args = TrainingArguments("runs/hf-tmp", num_train_epochs=1, report_to=[], save_strategy="no",
    ...                          use_cpu=True)  # doctest: +SKIP
    >>> trainer = Trainer(model=BertForSequenceClassification(cfg), args=args, train_dataset=data)  # doctest: +SKIP
    >>> cb = CollapseCallback(K=3, out=None).attach(trainer)  # doctest: +SKIP
    >>> _ = trainer.train()  # doctest: +SKIP
    >>> [(r.epoch, r.split) for r in cb.results]  # doctest: +SKIP
    [(0, 'train'), (1, 'train')]
    """

    def __init__(
        self,
        K: int,
        *,
        train_data: Any = None,
        eval_data: Any = None,
        classes: ClassesRule = "all",
        min_count: int | None = None,
        log_step: Literal["global", "epoch"] = "global",
        **monitor_options: Any,
    ) -> None:
        self.K = K
        self.log_step = check_choice(log_step, ("global", "epoch"), name="log_step")
        self.train_data, self.eval_data = train_data, eval_data
        check_classes(classes, min_count)
        self.options = {**monitor_options, "classes": classes, "min_count": min_count}
        self.monitor: CollapseMonitor | None = None
        self.results: list[MonitorResult] = []
        #: epochs the model of the last ``train()`` has been trained for, over this callback's runs, and that model
        self._trained = 0.0
        self._model: weakref.ref[torch.nn.Module] | None = None
        self._base = 0.0  # the epoch number of this train()'s state.epoch 0
        self._trainer: weakref.ref[transformers.Trainer] | None = None
        self._eval_loader: Any = None  # built from the Trainer's eval_dataset once per train()
        self._warned = False

    def attach(self, trainer: transformers.Trainer) -> CollapseCallback:
        """Give the callback its Trainer (and add it to the Trainer's callbacks when it is not among them yet):
        the values then go through ``trainer.log`` to every ``report_to`` logger, and the held-out split is the
        Trainer's ``eval_dataset`` from epoch 0 on. Returns the callback.

        Raises
        ------
        TypeError
            ``trainer`` is not a ``transformers.Trainer``.
        """
        if not isinstance(trainer, transformers.Trainer):
            raise TypeError(f"trainer must be a transformers.Trainer, got {type(trainer).__name__}")
        if not any(cb is self for cb in trainer.callback_handler.callbacks):
            trainer.add_callback(self)
        self._trainer = weakref.ref(trainer)
        return self

    @property
    def trainer(self) -> transformers.Trainer | None:
        """The Trainer given to :meth:`attach` (``None`` before, or once it is gone)."""
        return None if self._trainer is None else self._trainer()

    def _options(self, model: torch.nn.Module) -> dict[str, Any]:
        opts = dict(self.options)
        if "targets_fn" not in opts and isinstance(getattr(model, "score", None), torch.nn.Linear):
            opts["targets_fn"] = last_token_pooling(getattr(getattr(model, "config", None), "pad_token_id", None))
        return opts

    def _held_out(self, kwargs: Mapping[str, Any]) -> Any:
        """The held-out data: ``eval_data``, else the attached Trainer's ``eval_dataset`` (its eval dataloader,
        built once per ``train()``), else the eval dataloader of the Trainer's last evaluation (or ``None``)."""
        if self.eval_data is not None:
            return self.eval_data
        trainer = self.trainer
        if trainer is None or trainer.eval_dataset is None:
            return kwargs.get("eval_dataloader")
        if self._eval_loader is None:
            name = next(iter(trainer.eval_dataset), None) if isinstance(trainer.eval_dataset, dict) else None
            self._eval_loader = trainer.get_eval_dataloader(name)
        return self._eval_loader

    def _warn_detached(self, args: Any) -> None:
        """Once per callback: what a callback without its Trainer cannot do."""
        if self._warned or self.trainer is not None:
            return
        missing = []
        loggers = [r for r in (getattr(args, "report_to", None) or []) if r != "none"]
        if loggers:
            missing.append(
                f"its values do not reach the Trainer's report_to loggers ({', '.join(loggers)}), only "
                "trainer.state.log_history and the callback's sinks"
            )
        if self.eval_data is None:
            missing.append(
                "the held-out split (the Trainer's eval_dataset) is measured only once the Trainer's first "
                "evaluation has run (epoch 0 and the epochs before it are missing it)"
            )
        if missing:
            self._warned = True
            warnings.warn(
                f"CollapseCallback is not attached to its Trainer: {'; '.join(missing)}. Call "
                "callback.attach(trainer) after building the Trainer (it also adds the callback to it)",
                UserWarning,
                stacklevel=4,
            )

    def _measure(self, state: Any, kwargs: Mapping[str, Any]) -> None:
        assert self.monitor is not None
        label = self._base + float(state.epoch or 0)
        self._trained = label
        if not math.isclose(label, round(label), abs_tol=1e-9):
            warnings.warn(
                f"CollapseCallback: the model at epoch {label:.4g} (step {state.global_step}) is not at the end of an "
                "epoch (max_steps, or a fractional num_train_epochs): it is not measured (nclab records whole epochs; "
                "the epoch column is an integer)",
                UserWarning,
                stacklevel=3,
            )
            return
        epoch = round(label)
        if not self.monitor.due(epoch):
            return
        train = self.train_data if self.train_data is not None else kwargs.get("train_dataloader")
        values: dict[str, float] = {}
        for split, data in (("train", train), ("test", self._held_out(kwargs))):
            if data is None:
                continue
            res = self.monitor.measure(data, split=split, epoch=epoch)
            self.results.append(res)
            values.update({tag(r): float(r.value) for r in res.rows})
        if not values:
            return
        trainer = self.trainer
        step = int(state.global_step)
        if trainer is not None:  # every report_to logger's on_log, log_history and the console
            if self.log_step == "epoch":  # the loggers read the step from the state: lend them the epoch
                state.global_step = epoch
            try:
                trainer.log({**values, "epoch": float(epoch)})
            finally:
                state.global_step = step
        else:
            state.log_history.append(
                {**values, "epoch": float(epoch), "step": epoch if self.log_step == "epoch" else step}
            )

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.monitor is not None:  # a train() that ended in an exception: give its folder back first
            self.monitor.close()
        self._warn_detached(args)
        self._eval_loader = None
        model = kwargs["model"]
        # a resumed train() restores state (epoch, step); a second plain train() counts from 0 on a trained model
        fresh = not state.global_step
        same = self._model is not None and self._model() is model
        self._base = self._trained if fresh and same else 0.0
        self._model = weakref.ref(model)
        self.monitor = CollapseMonitor(model, self.K, **self._options(model))
        self._measure(state, kwargs)

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._measure(state, kwargs)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.monitor is not None:
            self.monitor.close()
