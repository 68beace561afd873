"""Train to the terminal phase and measure collapse on a schedule: ``train(config, out)``.

Per epoch: one pass of mini-batch training (shuffled by a generator seeded with ``(seed, epoch)``, so the order
does not depend on any saved RNG state), then, at measured epochs, :func:`nclab.train.measure.measure_split`
on the train split (and the test split), then an atomic checkpoint and an atomic rewrite of ``metrics.csv``.

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
deterministic for a fixed thread count).
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from nclab._threads import blas_threads, torch_threads
from nclab.data import ArrayDataset, load
from nclab.nets import CollapseNet, build_model
from nclab.theory.mse import mse_decomposition_from_stats
from nclab.train.config import ConfigError, RunConfig, resolve_config
from nclab.train.losses import LossFn, make_loss, paper004_lambda
from nclab.train.measure import OUTPUT_LAYER, _classifier, measure_split
from nclab.train.optim import lr_at, make_optimizer
from nclab.train.runio import Row, atomic_torch_save, atomic_write_text, write_metrics

__all__ = ["RunResult", "measurement_epochs", "train"]

CHECKPOINT_FORMAT = 1


def measurement_epochs(epochs: int, num_log: int) -> list[int]:
    """``{0, epochs} U round(logspace(0, log10(epochs), num_log))``, sorted (the zero-error epoch is added
    during the run)."""
    pts = np.unique(np.round(np.logspace(0, math.log10(max(epochs, 1)), num_log)).astype(int))
    return sorted({0, epochs, *(int(p) for p in pts if 1 <= p <= epochs)})


@dataclass
class RunResult:
    """What :func:`train` returns: the run directory, the config, the zero-error epoch, all metric rows."""

    out: Path
    config: RunConfig
    zero_error_epoch: int | None
    measured_epochs: list[int]
    rows: list[Row]
    penultimate: str
    timings: dict[str, float] = field(default_factory=dict)
    #: ``(epoch, train_s, measure_s)`` for each epoch run by this call (a resumed run lists its new epochs only);
    #: ``measure_s`` counts that epoch's measurements and zero-error checks. Wall-clock seconds.
    epoch_timings: list[tuple[int, float, float]] = field(default_factory=list)

    def series(self, metric: str, layer: str | None = None, split: str = "train") -> dict[int, float]:
        """``{epoch: value}`` of ``metric`` at ``layer`` (default: the penultimate layer; ``"output"`` for
        loss / error / lr rows)."""
        layer = layer or self.penultimate
        return {e: v for e, s, lay, m, v in self.rows if s == split and lay == layer and m == metric}


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


class _Run:
    def __init__(self, cfg: RunConfig, out: Path, console: Console, show_progress: bool) -> None:
        self.cfg, self.out, self.console, self.show_progress = cfg, out, console, show_progress
        self.ckpt_dir = out / "checkpoints"
        self.log_path = out / "log.txt"

    # ------------------------------------------------------------------ setup
    def log(self, msg: str) -> None:
        with open(self.log_path, "a", encoding="utf-8") as fh:
            fh.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}\n")

    def load_data(self) -> tuple[ArrayDataset, ArrayDataset | None]:
        d = self.cfg.data
        common = dict(root=d.root, seed=self.cfg.seed, pad_to=d.pad_to, normalize=d.normalize, **d.options)
        train = load(d.name, "train", per_class=d.per_class, **common)
        test = None
        if "test" in self.cfg.measure.splits:
            test = load(d.name, "test", per_class=d.test_per_class, **common)
        return train, test

    def build(self, train: ArrayDataset) -> tuple[CollapseNet, torch.optim.Optimizer, LossFn]:
        cfg = self.cfg
        torch.manual_seed(cfg.seed)  # model initialisation (and CMF head rows) depend on the seed only
        model = build_model(
            cfg.model.name,
            train.input_shape,
            train.num_classes,
            head=cfg.model.head.build_kwargs(),
            **cfg.model.options,
        )
        model.to(self.device)
        return model, make_optimizer(model, cfg.optim), make_loss(cfg.loss, train.num_classes)

    # ------------------------------------------------------------------ epochs
    def train_epoch(
        self,
        epoch: int,
        model: CollapseNet,
        opt: torch.optim.Optimizer,
        loss_fn: LossFn,
        data: ArrayDataset,
        progress: Progress,
        task: Any,
    ) -> tuple[float, float]:
        cfg = self.cfg.train
        gen = torch.Generator().manual_seed(self.cfg.seed * 1_000_003 + epoch)
        perm = torch.randperm(len(data), generator=gen)
        n_batches = len(data) // cfg.batch_size if cfg.drop_last else math.ceil(len(data) / cfg.batch_size)
        if n_batches == 0:
            raise ConfigError(
                f"train.batch_size={cfg.batch_size} exceeds the {len(data)} training samples with drop_last: no batch"
            )
        progress.reset(task, total=n_batches, info="")
        observe = getattr(model.head, "observe", None)
        model.train()
        tot_loss, tot_wrong, seen = 0.0, 0, 0
        x_all, y_all = data.x, data.y
        for i in range(n_batches):
            idx = perm[i * cfg.batch_size : (i + 1) * cfg.batch_size]
            xb, yb = x_all[idx].to(self.device), y_all[idx].to(self.device)
            h = model.features(xb)
            logits = model.head(h)
            loss = loss_fn(logits, yb, h)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if observe is not None:
                observe(h.detach(), yb)
            tot_loss += float(loss.detach()) * len(yb)
            tot_wrong += int((logits.detach().argmax(1) != yb).sum())
            seen += len(yb)
            progress.advance(task)
        if not math.isfinite(tot_loss):
            raise FloatingPointError(f"training diverged at epoch {epoch} (loss {tot_loss / seen}); lower optim.lr")
        return tot_loss / seen, tot_wrong / seen

    @torch.no_grad()
    def eval_error(self, model: CollapseNet, data: ArrayDataset) -> float:
        model.eval()
        wrong, bs = 0, self.cfg.measure.batch_size
        for s in range(0, len(data), bs):
            out = model(data.x[s : s + bs].to(self.device))
            wrong += int((out.argmax(1) != data.y[s : s + bs].to(self.device)).sum())
        model.train()
        return wrong / len(data)

    def measure(
        self,
        epoch: int,
        model: CollapseNet,
        loss_fn: LossFn,
        train: ArrayDataset,
        test: ArrayDataset | None,
        progress: Progress,
    ) -> tuple[list[Row], float]:
        m = self.cfg.measure
        layers = None if m.layers == "all" else ([model.penultimate_name] if m.layers == "penultimate" else m.layers)
        rows: list[Row] = []
        ref = None
        train_error = math.nan
        for split, data in (("train", train), ("test", test)):
            if split not in m.splits or data is None:
                continue
            task = progress.add_task(f"measure {split}", total=2 * len(data), info=f"epoch {epoch}")
            res = measure_split(
                model,
                data.x.to(self.device),
                data.y.to(self.device),
                data.num_classes,
                layers=layers,
                penultimate=model.penultimate_name,
                loss_fn=loss_fn,
                reference=ref,
                full_layers=m.full_layers,
                conventions=m.conventions,
                batch_size=m.batch_size,
                cache_mb=m.cache_mb,
                advance=lambda n, t=task: progress.advance(t, n),
                blas_threads=m.blas_threads,
                geodesic=m.geodesic and split == "train",
            )
            progress.remove_task(task)
            if split == "train":
                ref, train_error = res.stats, res.error
            for w in res.warnings:
                self.log(f"epoch {epoch} {split}: {w}")
            rows += [(epoch, split, lay, met, v) for lay, met, v in res.rows]
            rows += [(epoch, split, OUTPUT_LAYER, met, v) for met, v in self._mse_decomposition(model, res, data)]
            for st in res.stats.values():  # the d x d caches the report kept for the decomposition
                st.clear_memo()
        return rows, train_error

    def _mse_decomposition(self, model: CollapseNet, res: Any, data: ArrayDataset) -> list[tuple[str, float]]:
        """Paper 004's loss decomposition (Fig. 2) of an MSE run at the penultimate layer: L = L_NC1 + L_NC2/3 +
        L_perp, with the lambda this run trains with (``paper004_lambda``). Only for MSE on unit one-hot targets
        with a linear head, from the full ClassStats of the same pass (no extra pass)."""
        loss = self.cfg.loss
        stats = res.stats.get(model.penultimate_name)
        W, b = _classifier(model)
        if loss.name != "mse" or loss.target_scale != 1.0 or W is None or stats is None or stats.track != "full":
            return []
        if getattr(model.head, "cosine", False) or stats.empty_classes.size:
            return []
        lam = paper004_lambda(self.cfg.optim.weight_decay, data.num_classes, loss.reduction)
        dec = mse_decomposition_from_stats(stats, W, b, lam=lam)
        keys = ("L", "L_LS", "L_NC1", "L_NC23", "L_perp", "proximity_ratio")
        return [(f"mse_{k}", float(dec[k])) for k in keys]

    # ------------------------------------------------------------------ checkpoint
    def save(self, state: dict[str, Any], keep: bool) -> None:
        self.ckpt_dir.mkdir(exist_ok=True)
        atomic_torch_save(state, self.ckpt_dir / "last.pt")
        if keep:
            shutil.copyfile(self.ckpt_dir / "last.pt", self.ckpt_dir / f"epoch_{state['epoch']:04d}.pt")
        write_metrics(state["rows"], self.out)

    @property
    def device(self) -> torch.device:
        return torch.device(self.cfg.train.device)


def _prepare_dir(cfg: RunConfig, out: Path, resume: bool, overwrite: bool) -> dict[str, Any] | None:
    ckpt = out / "checkpoints" / "last.pt"
    cfg_path = out / "config.yaml"
    if resume and ckpt.is_file():
        saved = yaml.safe_load(cfg_path.read_text()) if cfg_path.is_file() else None
        if saved is not None and saved != cfg.to_dict():
            diff = _diff_keys(saved, cfg.to_dict())
            raise ConfigError(f"cannot resume {out}: the config differs from the saved one at {', '.join(diff[:10])}")
        state = torch.load(ckpt, map_location="cpu", weights_only=True)
        if state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"{ckpt}: unknown checkpoint format {state.get('format')!r}")
        return state
    if not resume and (ckpt.is_file() or (out / "metrics.csv").is_file()):
        if not overwrite:
            raise FileExistsError(
                f"{out} already holds a run: pass resume=True (--resume) to continue it, "
                "overwrite=True, or choose another output folder"
            )
        for name in ("metrics.csv", "metrics.parquet", "log.txt", "summary.json", "report.html"):
            (out / name).unlink(missing_ok=True)
        shutil.rmtree(out / "checkpoints", ignore_errors=True)
    return None


def _diff_keys(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += _diff_keys(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    return [] if a == b else [prefix.rstrip(".")]


def train(
    config: RunConfig | dict[str, Any],
    out: str | Path,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    console: Console | None = None,
    on_epoch_end: Callable[[int], None] | None = None,
) -> RunResult:
    """Run (or, with ``resume=True``, continue) the training run ``config`` in folder ``out``.

    Writes ``config.yaml`` (resolved), ``metrics.csv`` (+ ``metrics.parquet`` with pyarrow), ``log.txt``,
    ``checkpoints/last.pt``, ``summary.json`` and ``report.html`` (``config.report``). ``on_epoch_end(epoch)``
    is called after each epoch's checkpoint (tests use it to interrupt a run).
    """
    cfg = config if isinstance(config, RunConfig) else resolve_config(config)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    console = console or Console(stderr=True)
    state = _prepare_dir(cfg, out, resume, overwrite)
    atomic_write_text(out / "config.yaml", yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    # train.threads governs the BLAS of numpy/scipy too (the measurements' syrk and eigendecompositions): with
    # torch on one thread and OpenBLAS on two, a few BLAS calls per run stall for 100+ ms waking their pool
    # (measured: the demo's eigh time 0.75 s -> 0.07 s, benchmarks/RESULTS.md)
    with torch_threads(cfg.train.threads), blas_threads(cfg.train.threads):
        return _train(cfg, out, state, console, progress, on_epoch_end)


def _train(
    cfg: RunConfig,
    out: Path,
    state: dict[str, Any] | None,
    console: Console,
    progress: bool,
    on_epoch_end: Callable[[int], None] | None,
) -> RunResult:
    run = _Run(cfg, out, console, progress)
    train_data, test_data = run.load_data()
    model, opt, loss_fn = run.build(train_data)
    E = cfg.train.epochs
    planned = set(measurement_epochs(E, cfg.measure.num_log) if cfg.measure.epochs == "log" else cfg.measure.epochs)
    planned = {e for e in planned if e <= E}
    rows: list[Row] = []
    zero_epoch: int | None = None
    start = 0
    timings = {"train_s": 0.0, "measure_s": 0.0, "checkpoint_s": 0.0}
    epoch_timings: list[tuple[int, float, float]] = []
    measured: list[int] = []
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        rows = [tuple(r) for r in state["rows"]]  # type: ignore[misc]
        zero_epoch, start = state["zero_error_epoch"], int(state["epoch"])
        timings.update(state.get("timings", {}))
        measured = list(state["measured"])
        run.log(f"resumed from epoch {start}")
    else:
        lam = paper004_lambda(cfg.optim.weight_decay, train_data.num_classes, cfg.loss.reduction)
        run.log(
            f"start: {cfg.name} ({cfg.data.name}, {cfg.model.name}, loss {cfg.loss.name}); "
            f"N_train={len(train_data)}; paper-004 lambda of this objective = {lam:g}"
        )

    def checkpoint(epoch: int) -> None:
        t0 = time.perf_counter()
        run.save(
            {
                "format": CHECKPOINT_FORMAT,
                "epoch": epoch,
                "model": model.state_dict(),
                "optimizer": opt.state_dict(),
                "torch_rng": torch.get_rng_state(),
                "rows": rows,
                "zero_error_epoch": zero_epoch,
                "measured": measured,
                "timings": timings,
            },
            keep=cfg.checkpoint.keep_measured and epoch in measured,
        )
        timings["checkpoint_s"] += time.perf_counter() - t0

    with _progress(console, progress) as bar:
        ep_task = bar.add_task("epochs", total=E, completed=start, info="")
        batch_task = bar.add_task("batches", total=1, info="")
        if start == 0 and state is None:
            if 0 in planned:
                t0 = time.perf_counter()
                new, _ = run.measure(0, model, loss_fn, train_data, test_data, bar)
                dt = time.perf_counter() - t0
                timings["measure_s"] += dt
                epoch_timings.append((0, 0.0, dt))
                rows += new
                measured.append(0)
            checkpoint(0)
        for epoch in range(start + 1, E + 1):
            lr = lr_at(epoch - 1, cfg.optim.lr, cfg.schedule, E)
            for g in opt.param_groups:
                g["lr"] = lr
            t0 = time.perf_counter()
            run_loss, run_err = run.train_epoch(epoch, model, opt, loss_fn, train_data, bar, batch_task)
            train_dt = time.perf_counter() - t0
            timings["train_s"] += train_dt
            rows += [
                (epoch, "train", OUTPUT_LAYER, "running_loss", run_loss),
                (epoch, "train", OUTPUT_LAYER, "running_error", run_err),
                (epoch, "train", OUTPUT_LAYER, "lr", lr),
            ]
            t0 = time.perf_counter()
            err = math.nan
            if epoch in planned:
                new, err = run.measure(epoch, model, loss_fn, train_data, test_data, bar)
                rows += new
                measured.append(epoch)
            elif zero_epoch is None and (
                cfg.measure.zero_error_check == "every_epoch" or run_err <= cfg.measure.zero_error_gate
            ):
                err = run.eval_error(model, train_data)
                rows.append((epoch, "train", OUTPUT_LAYER, "error", err))  # the exact check is a measurement too
            if zero_epoch is None and err == 0.0:
                zero_epoch = epoch
                run.log(f"epoch {epoch}: training error reached 0 (terminal phase begins)")
                if epoch not in planned:
                    new, _ = run.measure(epoch, model, loss_fn, train_data, test_data, bar)
                    rows += new
                    measured.append(epoch)
            measure_dt = time.perf_counter() - t0
            timings["measure_s"] += measure_dt
            epoch_timings.append((epoch, train_dt, measure_dt))
            if epoch % cfg.checkpoint.every == 0 or epoch == E:
                checkpoint(epoch)
            info = f"loss {run_loss:.4g} err {run_err:.3f}" + (f" | TPT from {zero_epoch}" if zero_epoch else "")
            bar.update(ep_task, advance=1, info=info)
            run.log(
                f"epoch {epoch}: lr {lr:.4g} running loss {run_loss:.6g} running error {run_err:.4f}"
                + ("" if math.isnan(err) else f" eval train error {err:.4f}")
            )
            if on_epoch_end is not None:
                on_epoch_end(epoch)

    summary = {
        "name": cfg.name,
        "epochs": E,
        "zero_error_epoch": zero_epoch,
        "measured_epochs": measured,
        "penultimate": model.penultimate_name,
        "layers": list(model.measured_layers()),
        "num_classes": train_data.num_classes,
        "train_samples": len(train_data),
        "test_samples": None if test_data is None else len(test_data),
        "paper004_lambda": paper004_lambda(cfg.optim.weight_decay, train_data.num_classes, cfg.loss.reduction),
        "timings": timings,
    }
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    run.log(
        f"done: zero-error epoch {zero_epoch}; train {timings['train_s']:.1f}s, measure {timings['measure_s']:.1f}s"
    )
    if cfg.report:
        from nclab.report.run_report import write_run_report

        write_run_report(out)
    return RunResult(
        out=out,
        config=cfg,
        zero_error_epoch=zero_epoch,
        measured_epochs=measured,
        rows=rows,
        penultimate=model.penultimate_name,
        timings=timings,
        epoch_timings=epoch_timings,
    )
