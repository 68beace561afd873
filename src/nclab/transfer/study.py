"""The transfer study of [Xu & Liu 2023, Sec. 6.3]: which collapse metric of a pretrained network predicts MLOG?

A study pretrains one network per setting of a grid -- groups of values of one config axis (the paper: the CE
temperature ``loss.tau``, and the weight ``loss.cosreg_weight`` of the within-class cosine regulariser of
:mod:`nclab.train.losses`), times seeds -- with :func:`nclab.train.train`. For each run it then

1. measures every collapse metric (:func:`nclab.metrics.collapse_report`) of the penultimate features of the
   pretraining **training** split (the paper's "50k ImageNet train subset");
2. scores the pretraining test accuracy ``p_0``;
3. probes each downstream task with :func:`nclab.transfer.linear_probe` on the frozen penultimate features;
4. computes MLO and MLOG (:mod:`nclab.transfer.scores`).

It writes ``table.csv`` (one row per run: setting, every metric, ``p_0``, each task's accuracy, MLO, MLOG),
``correlations.csv`` (Pearson r and Spearman rho of each chosen metric against MLOG, per group and pooled; with
several seeds, on the per-setting seed means, plus the spread of the per-seed r; a ``note`` says why a
correlation is nan) and ``fig7.png`` (the analogue of the paper's Fig. 7: metric vs MLOG, one row per group, r
and rho in the legends). ``study.json`` sums up, with the ``notes`` of the study: why correlations are nan (a
group of fewer than 3 settings: r of 2 points is +-1 whatever the data), perfect probes (MLOG = +inf), test
classes a probe never saw.

The pretraining runs are the trials of a sweep (:func:`nclab.train.sweep.run_sweep`): ``runs/sweep.yaml`` (one
override list per setting and seed), ``runs/<trial-id>/`` (an ordinary run directory), ``runs/sweep.csv`` (the
index); on Ray when it is installed, one after another in this process otherwise or with ``local=True``. A re-run
skips the finished trials (a changed config is a new trial id, so it trains again).

Features are streamed: each split passes through the network in batches and its penultimate features go to
``.npy`` files (:func:`nclab.monitor.extract_features`) in a temporary folder of the run, read back
memory-mapped. The collapse metrics then accumulate over row chunks of that file, so the study holds at most one
batch of raw features per model in memory, apart from the probe's design matrix (float64, the training split of
one downstream task), which L-BFGS needs whole. That holds for in-memory pretraining data (the splits are
tensors); a run on a streamed dataset (ImageNet: ``data.name`` one of :data:`nclab.data.IMAGE_DATASETS`) is
evaluated by :func:`nclab.transfer.streamed.evaluate_streamed_run` instead, sized by the study's ``stream``
mapping: one pass over a subset of the training split into float64 statistics, downstream features cached under a
memory cap.

A study is a mapping (a YAML file for ``nclab transfer run``)::

    name: my-study
    base: {data: {name: fashion-mnist, options: {classes: [0, 1, 2, 3, 4]}}, model: {name: cnn}, ...}
    groups:
      - {name: tau, axis: loss.tau, values: [0.1, 0.2, 0.4, 0.6, 0.8, 1.0]}
      - {name: lambda, axis: loss.cosreg_weight, values: [2.5, 5, 10], set: {loss.name: ce_cosreg}}
    seeds: [0, 1]
    downstream:
      - {name: heldout, dataset: fashion-mnist, classes: [5, 6, 7, 8, 9], per_class: 200, test_per_class: 100}
      - {name: digits, dataset: digits, score: mean_per_class}
    probe: {lams: [1.0e-6, 1.0e2, 33], val_fraction: 0.2}
    stream: {per_class: 50, batch_size: 256, workers: 16, cache_mb: 4096}   # streamed pretraining data only
    metrics: [nc1, trace_ratio, within_class_cosine, vci]
    resources: {num_cpus: 2, cpus_per_trial: 1}   # of the sweep (Ray), optional

Downstream inputs are brought to the pretraining input shape (bilinear resize; a grey image is repeated over
colour channels, a colour image averaged to grey) and standardised per channel with the task's own training-split
mean and std. ``transform`` (``none``, ``rot90``, ``transpose``, ``invert``) makes a transformed task.
"""

from __future__ import annotations

import io
import json
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
import yaml
from scipy import stats as sps

from nclab._threads import blas_threads, torch_threads
from nclab.data import IMAGE_DATASETS, ArrayDataset, load
from nclab.io.atomic import atomic_write_bytes, atomic_write_text
from nclab.io.rundir import RunDir
from nclab.io.tables import csv_text
from nclab.io.yaml_io import load_yaml_file
from nclab.measure import collect_features
from nclab.metrics import collapse_report
from nclab.monitor import extract_features
from nclab.nets import build_model
from nclab.stats import ClassStats
from nclab.train.checkpoint import load_checkpoint
from nclab.train.config import RunConfig, resolve_config
from nclab.train.sweep import override_string, run_sweep
from nclab.train.trainer import run_id
from nclab.transfer.probe import Score, linear_probe, probe_options, task_data_options
from nclab.transfer.scores import log_odds_note, mean_log_odds, mlog
from nclab.transfer.streamed import StreamOptions, evaluate_streamed_run
from nclab.validation import check_choice, did_you_mean

__all__ = [
    "PAPER_METRICS",
    "DownstreamTask",
    "StudyGroup",
    "StudyResult",
    "StudySpec",
    "correlation_table",
    "evaluate_run",
    "load_study",
    "make_task",
    "run_study",
    "transfer_figure",
]

#: The four metrics of [Xu & Liu 2023, Fig. 7 / Table 2] in nclab's names: Fuzziness (NC1), Squared Distance
#: (Tr Sigma_W / Tr Sigma_B), Cosine Similarity (mean within-class cosine, higher = more collapsed), VCI.
PAPER_METRICS: tuple[str, ...] = ("nc1", "trace_ratio", "within_class_cosine", "vci")
_TRANSFORMS = ("none", "rot90", "transpose", "invert")
_TASK_KEYS = {"name", "dataset", "classes", "per_class", "test_per_class", "transform", "score", "root", "options"}
_SPLIT_KEYS = ("train_split", "val_split", "test_split")  # streamed pretraining only (nclab.transfer.streamed)
_TASK_KEYS |= set(_SPLIT_KEYS)


@dataclass
class StudyGroup:
    """One group of runs: ``axis`` (a dotted config key) takes each of ``values``; ``set`` fixes other keys."""

    name: str
    axis: str
    values: list[Any]
    set: dict[str, Any] = field(default_factory=dict)


def _check_keys(where: str, raw: Mapping[str, Any], known: set[str]) -> None:
    """Refuse keys of ``raw`` not in ``known``, naming them, the known ones and the closest of those."""
    extra = sorted(set(raw) - known)
    if extra:
        hint = did_you_mean(str(extra[0]), known)
        raise ValueError(f"{where}: unknown key(s) {extra}{hint}; known: {sorted(known)}")


@dataclass
class StudySpec:
    """A transfer study (see the module docstring for the mapping it is read from)."""

    name: str
    base: dict[str, Any]
    groups: list[StudyGroup]
    downstream: list[dict[str, Any]]
    seeds: list[int] = field(default_factory=lambda: [0])
    probe: dict[str, Any] = field(default_factory=dict)
    metrics: list[str] = field(default_factory=lambda: list(PAPER_METRICS))
    threads: int | None = None
    resources: dict[str, Any] = field(default_factory=dict)
    #: How a run on a streamed dataset is evaluated (:class:`nclab.transfer.streamed.StreamOptions`).
    stream: StreamOptions = field(default_factory=StreamOptions)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> StudySpec:
        """Validate ``raw``; errors name the offending key."""
        if not isinstance(raw, Mapping):
            raise ValueError(f"a study must be a mapping, got {type(raw).__name__}")
        known = {"name", "base", "groups", "downstream", "seeds", "probe", "metrics", "threads", "resources", "stream"}
        _check_keys("study", raw, known)
        for key in ("name", "groups", "downstream"):
            if key not in raw:
                raise ValueError(f"study: missing key {key!r}")
        groups = []
        for i, g in enumerate(raw["groups"] or []):
            if not isinstance(g, Mapping) or not {"name", "axis", "values"} <= set(g):
                raise ValueError(f"study.groups[{i}] needs name, axis and values, got {g!r}")
            _check_keys(f"study.groups[{i}]", g, {"name", "axis", "values", "set"})
            if not g["values"]:
                raise ValueError(f"study.groups[{i}].values is empty")
            groups.append(StudyGroup(str(g["name"]), str(g["axis"]), list(g["values"]), dict(g.get("set") or {})))
        if not groups:
            raise ValueError("study.groups is empty")
        if len({g.name for g in groups}) != len(groups) or "pooled" in {g.name for g in groups}:
            raise ValueError("study.groups: names must be distinct and not 'pooled'")
        tasks = [dict(t) for t in raw["downstream"] or []]
        if not tasks:
            raise ValueError("study.downstream is empty")
        for i, t in enumerate(tasks):
            if "name" not in t or "dataset" not in t:
                raise ValueError(f"study.downstream[{i}] needs name and dataset, got {t!r}")
            _check_keys(f"study.downstream[{i}]", t, _TASK_KEYS)
        if len({t["name"] for t in tasks}) != len(tasks):
            raise ValueError("study.downstream: task names must be distinct")
        seeds = [int(s) for s in raw.get("seeds", [0])]
        if not seeds or len(set(seeds)) != len(seeds):
            raise ValueError(f"study.seeds must be distinct integers, got {raw.get('seeds')!r}")
        spec = cls(
            name=str(raw["name"]),
            base=dict(raw.get("base") or {}),
            groups=groups,
            downstream=tasks,
            seeds=seeds,
            probe=dict(raw.get("probe") or {}),
            metrics=list(raw.get("metrics") or PAPER_METRICS),
            threads=raw.get("threads"),
            resources=dict(raw.get("resources") or {}),
            stream=StreamOptions.from_dict(raw.get("stream")),
        )
        _refuse_streamed_keys(spec, has_stream="stream" in raw)
        return spec

    def trials(self) -> list[tuple[StudyGroup, Any, int]]:
        """Every ``(group, value, seed)``, groups in order, seeds innermost."""
        return [(g, v, s) for g in self.groups for v in g.values for s in self.seeds]

    def overrides(self, group: StudyGroup, value: Any, seed: int) -> list[str]:
        """The ``--set`` strings of one trial on top of ``base``: the group's ``set``, the axis value, the seed
        and the run name ``<study>-<group>=<value>-s<seed>``."""
        sets = [override_string(k, v) for k, v in group.set.items()]
        sets += [override_string(group.axis, value), f"seed={seed}"]
        return [*sets, override_string("name", f"{self.name}-{run_name(group, value, seed)}")]

    def run_config(self, group: StudyGroup, value: Any, seed: int) -> RunConfig:
        """The validated run config of one trial: ``base`` with :meth:`overrides`."""
        return resolve_config(self.base, self.overrides(group, value, seed))

    def sweep(self) -> dict[str, Any]:
        """The sweep file (:mod:`nclab.train.sweep`) whose trials are this study's pretraining runs, in order."""
        raw: dict[str, Any] = {
            "name": self.name,
            "base": self.base,
            "overrides": [self.overrides(g, v, s) for g, v, s in self.trials()],
        }
        if self.resources:
            raw["resources"] = dict(self.resources)
        return raw


def _refuse_streamed_keys(spec: StudySpec, *, has_stream: bool) -> None:
    """Refuse the split keys of a task and the ``stream`` section when a trial pretrains on in-memory data: that
    path (:func:`make_task`) takes each dataset's ``train`` / ``test`` splits and the probe's stratified 20 %, so
    a ``val_split`` there would be ignored without a word."""
    given = [(f"study.downstream[{i}].{k}", t[k]) for i, t in enumerate(spec.downstream) for k in _SPLIT_KEYS if k in t]
    if has_stream:
        given.append(("study.stream", "..."))
    if not given:  # only then resolve the trials' configs: a study without these keys is read as before
        return
    for trial in spec.trials():
        data = spec.run_config(*trial).data
        if not data.streamed:
            key, value = given[0]
            raise ValueError(
                f"{key}: {value!r} applies to streamed pretraining data only (data.name one of "
                f"{', '.join(IMAGE_DATASETS)}), but run {run_name(*trial)!r} pretrains on {data.name!r} in memory, "
                "whose probes use each dataset's train and test splits and the probe's stratified 20 % for "
                "validation; remove the key"
            )


def load_study(path: str | Path) -> StudySpec:
    """Read a study from a YAML file."""
    return StudySpec.from_dict(load_yaml_file(path))


def run_name(group: StudyGroup, value: Any, seed: int) -> str:
    """The folder name of a trial, e.g. ``tau=0.4-s1``."""
    return f"{group.name}={value}-s{seed}"


@dataclass
class DownstreamTask:
    """A probe task: inputs already in the pretraining input shape, ``score`` the reported accuracy."""

    name: str
    train: tuple[torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor]
    K: int
    score: Score = "top1"
    description: str = ""


def _adapt(x: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    if x.ndim != 4:
        raise ValueError(f"downstream inputs must be images (N, C, H, W), got shape {tuple(x.shape)}")
    C, H, W = shape
    if x.shape[1] != C:
        x = x.mean(dim=1, keepdim=True) if C == 1 else x.mean(dim=1, keepdim=True).expand(-1, C, -1, -1)
    if tuple(x.shape[2:]) != (H, W):
        x = F.interpolate(x, size=(H, W), mode="bilinear", align_corners=False)
    return x.contiguous()


def _transform(x: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "rot90":
        return torch.rot90(x, 1, dims=(2, 3)).contiguous()
    if kind == "transpose":
        return x.transpose(2, 3).contiguous()
    if kind == "invert":
        return -x
    return x


def make_task(spec: Mapping[str, Any], input_shape: Sequence[int], seed: int = 0) -> DownstreamTask:
    """Build the downstream task ``spec`` (keys: name, dataset, classes, per_class, test_per_class, transform,
    score, root, options) for a network with inputs ``input_shape`` (C, H, W)."""
    transform = spec.get("transform", "none")
    if transform not in _TRANSFORMS:
        raise ValueError(f"downstream {spec.get('name')!r}: transform must be one of {_TRANSFORMS}, got {transform!r}")
    if len(input_shape) != 3:
        raise ValueError(f"downstream tasks need image inputs (C, H, W), the network takes {tuple(input_shape)}")
    for key in _SPLIT_KEYS:  # this path reads train and test; a named split would be ignored
        if key in spec:
            raise ValueError(
                f"downstream {spec.get('name')!r}: {key} applies to streamed pretraining data only "
                "(nclab.transfer.streamed.task_splits); in memory the probe reads the train and test splits"
            )
    common = dict(root=spec.get("root"), seed=seed, **task_data_options(spec))
    tr = load(spec["dataset"], "train", per_class=spec.get("per_class"), **common)
    te = load(spec["dataset"], "test", per_class=spec.get("test_per_class"), **common)
    xs = [_transform(_adapt(d.x, input_shape), transform) for d in (tr, te)]
    dims = [0, 2, 3]
    mean, std = xs[0].mean(dim=dims, keepdim=True), xs[0].std(dim=dims, keepdim=True).clamp_min(1e-8)
    xs = [(x - mean) / std for x in xs]
    desc = (
        f"{spec['dataset']}"
        + (f" classes {list(spec['classes'])}" if spec.get("classes") is not None else "")
        + (f", {transform}" if transform != "none" else "")
        + f": {len(tr)} train / {len(te)} test, K={tr.K}, "
        + f"input {tuple(tr.input_shape)} -> {tuple(input_shape)}"
    )
    return DownstreamTask(
        name=str(spec["name"]),
        train=(xs[0], tr.y),
        test=(xs[1], te.y),
        K=tr.K,
        score=check_choice(spec.get("score", "top1"), Score, name=f"downstream {spec['name']!r}: score"),
        description=desc,
    )


def _pretrain_data(cfg: RunConfig) -> tuple[ArrayDataset, ArrayDataset]:
    # the same calls as the trainer's, so the metrics see exactly the training split the run trained on
    d = cfg.data
    common = dict(root=d.root, seed=cfg.seed, pad_to=d.pad_to, normalize=d.normalize, **d.options)
    return (
        load(d.name, "train", per_class=d.per_class, **common),
        load(d.name, "test", per_class=d.test_per_class, **common),
    )


_BATCH = 1024  # rows per forward pass, the same on both feature paths so that they see identical features


def _features(model: Any, x: torch.Tensor, y: torch.Tensor, folder: Path | None, K: int) -> tuple[Any, np.ndarray]:
    """Penultimate features of ``x`` and their labels: in memory (``folder`` None) or streamed batch by batch to
    ``folder`` and read back memory-mapped."""
    name = model.penultimate_name
    if folder is None:
        return collect_features(model, x, layers=[name], batch_size=_BATCH)[name], y.numpy()
    # slices are views: the list costs no copy of x, and the monitor may read it twice
    batches = [(x[i : i + _BATCH], y[i : i + _BATCH]) for i in range(0, x.shape[0], _BATCH)]
    paths = extract_features(model, batches, layers=[name], out=folder, K=K)
    return np.load(paths[name], mmap_mode="r"), np.load(paths["labels"])


def _design(H: Any) -> np.ndarray:
    # the probe's design matrix, float64 in memory (a memory-mapped file is read here, once)
    if isinstance(H, torch.Tensor):
        return H.to(torch.float64).numpy()
    return np.asarray(H, dtype=np.float64)


def evaluate_run(
    run_dir: str | Path,
    cfg: RunConfig,
    tasks_spec: Sequence[Mapping[str, Any]],
    probe: Mapping[str, Any],
    *,
    stream: bool = True,
) -> dict[str, Any]:
    """Metrics on the pretraining train split, ``p_0``, every task's probe accuracy, MLO and MLOG of a run.

    Parameters
    ----------
    run_dir : a finished run directory of ``cfg`` (``checkpoints/last.pt``)
    cfg : the run's config
    tasks_spec : downstream tasks (:func:`make_task`)
    probe : keyword arguments of :func:`nclab.transfer.linear_probe` (``lams`` also as ``{start, stop, num}``)
    stream : stream each split's features through :func:`nclab.monitor.extract_features` to ``.npy`` files in a
        temporary folder of ``run_dir`` (removed at the end) and read them back memory-mapped; ``False`` keeps
        them in memory. Both give the same features, hence the same numbers.

    Returns
    -------
    dict: the metrics, ``pretrain_accuracy``, ``acc_<task>`` and ``lam_<task>`` per task, ``mlo``, ``mlog``, and
    ``notes`` (a list of strings: the probes' notes, prefixed with the task name, and why MLO / MLOG is
    infinite when an accuracy is 0 or 1).
    """
    run_dir = Path(run_dir)
    train_data, test_data = _pretrain_data(cfg)
    model = build_model(
        cfg.model.name,
        train_data.input_shape,
        train_data.K,
        head=cfg.model.head.build_kwargs(),
        **cfg.model.options,
    )
    state = load_checkpoint(RunDir(run_dir).checkpoint)
    model.load_state_dict(state["model"])
    model.eval()
    with tempfile.TemporaryDirectory(dir=run_dir, prefix="features-") if stream else nullcontext() as tmp:
        folder = (lambda sub: Path(tmp) / sub) if tmp is not None else (lambda sub: None)
        K = train_data.K
        H, y = _features(model, train_data.x, train_data.y, folder("pretrain"), K)
        # row chunks: a memory-mapped H is read a chunk at a time, never whole
        stats = ClassStats.from_arrays(H, y, K, batch_size=_BATCH if stream else None)
        row: dict[str, Any] = dict(collapse_report(stats))
        del H
        with torch.no_grad():
            pred = torch.cat([model(test_data.x[i : i + _BATCH]).argmax(1) for i in range(0, len(test_data), _BATCH)])
        row["pretrain_accuracy"] = float((pred == test_data.y).double().mean())
        accs = []
        notes: list[str] = []
        kw = probe_options(probe)
        for spec in tasks_spec:
            task = make_task(spec, train_data.input_shape, seed=0)
            Htr, ytr = _features(model, *task.train, folder(f"{task.name}-train"), K)
            Hte, yte = _features(model, *task.test, folder(f"{task.name}-test"), K)
            # a probe's matrices are small: a second intra-op thread mostly waits (a whole fit measured 6.7x
            # slower with two threads than with one on the loaded 2-core machine)
            with torch_threads(1):
                res = linear_probe(
                    (_design(Htr), ytr),
                    (_design(Hte), yte),
                    score=task.score,
                    K=task.K,
                    **kw,
                )
            del Htr, Hte
            row[f"acc_{task.name}"] = res.accuracy
            row[f"lam_{task.name}"] = res.lam
            accs.append(res.accuracy)
            notes += [f"{task.name}: {note}" for note in res.notes]
    row["mlo"] = mean_log_odds(accs)
    row["mlog"] = mlog(accs, row["pretrain_accuracy"])
    infinite = log_odds_note(dict(zip([t["name"] for t in tasks_spec], accs, strict=True)), row["pretrain_accuracy"])
    row["notes"] = [*notes, *([infinite] if infinite is not None else [])]
    return row


@dataclass
class StudyResult:
    """What :func:`run_study` returns: the per-run table, the correlation table and the written files."""

    rows: list[dict[str, Any]]
    correlations: list[dict[str, Any]]
    files: dict[str, Path]
    seconds: float
    #: What the numbers do not say by themselves: why correlations are nan, perfect probes, unseen test classes.
    notes: list[str] = field(default_factory=list)


def _corr(x: np.ndarray, y: np.ndarray, target: str = "mlog") -> tuple[float, float, str]:
    """Pearson r and Spearman rho of ``x`` and ``y``, or nan and the reason. Two points give r = rho = +-1
    whatever they are (a line always passes through two points), so a correlation needs at least 3."""
    nan = float("nan")
    if x.size < 3:
        points = f"{x.size} point" + ("s" if x.size != 1 else "")
        return nan, nan, f"{points}: r and rho need at least 3 (any 2 points give r = rho = +-1, which is no evidence)"
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return nan, nan, "a value is infinite or nan (e.g. MLOG = +inf of a perfect probe)"
    if np.ptp(x) == 0:
        return nan, nan, "the metric is constant over the points: no correlation is defined"
    if np.ptp(y) == 0:
        return nan, nan, f"{target} is constant over the points: no correlation is defined"
    return float(sps.pearsonr(x, y)[0]), float(sps.spearmanr(x, y)[0]), ""


def correlation_table(
    rows: Sequence[Mapping[str, Any]], metrics: Sequence[str], target: str = "mlog"
) -> list[dict[str, Any]]:
    """Pearson r and Spearman rho of each metric against ``target``, per group and pooled.

    ``rows`` need ``group``, ``value``, ``seed``, the metrics and ``target``. The headline r / rho use one
    point per setting (the mean over seeds, as the paper has one run per setting); ``r_runs`` uses every run;
    ``r_seed_mean`` / ``r_seed_sd`` are the mean and standard deviation over seeds of the per-seed r (the
    spread a single-seed study would see; NaN with one seed). ``note`` says why the headline r / rho is nan
    (fewer than 3 settings, a constant or non-finite value), empty otherwise.
    """
    groups = list(dict.fromkeys(r["group"] for r in rows))
    out = []
    for gname in [*groups, "pooled"]:
        sel = [r for r in rows if gname == "pooled" or r["group"] == gname]
        settings = list(dict.fromkeys((r["group"], r["value"]) for r in sel))
        seeds = sorted({r["seed"] for r in sel})
        for m in [*metrics, "pretrain_accuracy"]:
            mean_x = np.array([np.mean([r[m] for r in sel if (r["group"], r["value"]) == s]) for s in settings])
            mean_y = np.array([np.mean([r[target] for r in sel if (r["group"], r["value"]) == s]) for s in settings])
            r_set, rho_set, note = _corr(mean_x, mean_y, target)
            r_runs, _, _ = _corr(np.array([r[m] for r in sel]), np.array([r[target] for r in sel]))
            per_seed = [
                _corr(
                    np.array([r[m] for r in sel if r["seed"] == s]),
                    np.array([r[target] for r in sel if r["seed"] == s]),
                )[0]
                for s in seeds
            ]
            out.append(
                {
                    "group": gname,
                    "metric": m,
                    "settings": len(settings),
                    "seeds": len(seeds),
                    "pearson_r": r_set,
                    "spearman_rho": rho_set,
                    "r_runs": r_runs,
                    "r_seed_mean": float(np.mean(per_seed)) if len(seeds) > 1 else float("nan"),
                    "r_seed_sd": float(np.std(per_seed, ddof=1)) if len(seeds) > 1 else float("nan"),
                    "note": note,
                }
            )
    return out


def transfer_figure(
    rows: Sequence[Mapping[str, Any]],
    correlations: Sequence[Mapping[str, Any]],
    metrics: Sequence[str],
    target: str = "mlog",
) -> bytes:
    """The analogue of [Xu & Liu 2023, Fig. 7]: one row per group, one column per metric, metric vs ``target``
    (one point per run, coloured by the group's axis value), Pearson r and Spearman rho in each legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(dict.fromkeys(r["group"] for r in rows))
    fig, axes = plt.subplots(len(groups), len(metrics), figsize=(3.2 * len(metrics), 2.8 * len(groups)), squeeze=False)
    corr = {(c["group"], c["metric"]): c for c in correlations}
    for i, g in enumerate(groups):
        sel = [r for r in rows if r["group"] == g]
        vals = sorted({float(r["value"]) for r in sel})
        for j, m in enumerate(metrics):
            ax = axes[i, j]
            c = corr.get((g, m), {})
            sc = ax.scatter(
                [r[m] for r in sel],
                [r[target] for r in sel],
                c=[vals.index(float(r["value"])) for r in sel],
                cmap="viridis",
                s=22,
                label=f"r={c.get('pearson_r', float('nan')):+.2f}, rho={c.get('spearman_rho', float('nan')):+.2f}",
            )
            ax.legend(loc="best", fontsize=7, handlelength=0, markerscale=0)
            ax.set_xlabel(m, fontsize=8)
            ax.tick_params(labelsize=7)
            if j == 0:
                ax.set_ylabel(f"{g}: {target.upper()}", fontsize=8)
            if j == len(metrics) - 1:
                cb = fig.colorbar(sc, ax=ax, ticks=range(len(vals)))
                cb.ax.set_yticklabels([f"{v:g}" for v in vals], fontsize=6)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def run_study(
    spec: StudySpec | Mapping[str, Any],
    out: str | Path,
    *,
    local: bool | None = None,
    address: str | None = None,
    log: Callable[[str], None] | None = None,
) -> StudyResult:
    """Pretrain every trial of ``spec`` as a sweep under ``out/runs/``, evaluate each, and write the study's
    table, correlations and figure.

    Parameters
    ----------
    spec : StudySpec or its mapping
    out : the study folder: ``runs/`` is the sweep directory (``sweep.yaml``, ``sweep.csv``, one run directory
        per trial, finished trials skipped on a re-run), then ``table.csv``, ``correlations.csv``, ``fig7.png``
        and ``study.json``
    local : run the pretraining trials one after another in this process; ``None`` (default): on Ray when it
        is installed or ``address`` is given, locally otherwise
    address : an existing Ray cluster (see :func:`nclab.train.sweep.run_sweep`)
    log : called with each line of the sweep's log and one line per evaluated trial

    Returns
    -------
    StudyResult

    Raises
    ------
    ValueError
        An invalid study, or a pretraining trial that failed (its error is in ``runs/sweep.csv``).

    See Also
    --------
    evaluate_run, correlation_table, transfer_figure, nclab.train.sweep.run_sweep
    """

    spec = spec if isinstance(spec, StudySpec) else StudySpec.from_dict(spec)
    if local is None:
        local = address is None and not _has_ray()
    out = Path(out)
    sweep_dir = out / "runs"
    sweep_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    # one writer of the study folder at a time (its sweep directory has its own lock, taken by run_sweep)
    with RunDir(out).lock(), torch_threads(spec.threads), blas_threads(spec.threads):
        # the study's own sweep file: a study with more seeds or values extends its sweep in place
        sweep_file = atomic_write_text(RunDir(sweep_dir).sweep_file, yaml.safe_dump(spec.sweep(), sort_keys=False))
        # a study needs every run: a trial that failed in an earlier attempt is tried again
        result = run_sweep(sweep_file, sweep_dir, local=local, address=address, retry_failed=True, echo=log)
        if result.failed:
            errors = "; ".join(f"{tid}: {result.rows[tid]['error']}" for tid in result.failed)
            table = RunDir(sweep_dir).sweep_table
            raise ValueError(f"{len(result.failed)} pretraining trial(s) failed ({table}): {errors}")
        for group, value, seed in spec.trials():
            cfg = spec.run_config(group, value, seed)
            tid = run_id(cfg)
            t = time.perf_counter()
            row: dict[str, Any] = {
                "run": run_name(group, value, seed),
                "trial_id": tid,
                "group": group.name,
                "axis": group.axis,
            }
            row.update(value=value, seed=seed)
            if cfg.data.streamed:  # ImageNet-scale: nothing held whole (nclab.transfer.streamed)
                row.update(evaluate_streamed_run(sweep_dir / tid, cfg, spec.downstream, spec.probe, spec.stream))
            else:
                row.update(evaluate_run(sweep_dir / tid, cfg, spec.downstream, spec.probe))
            notes += [f"{row['run']}: {note}" for note in row.pop("notes")]
            rows.append(row)
            if log is not None:
                took = time.perf_counter() - t
                log(f"{row['run']}: mlog {row['mlog']:+.4f}, p0 {row['pretrain_accuracy']:.4f} ({took:.1f}s)")
        corr = correlation_table(rows, spec.metrics)
        notes += _correlation_notes(corr)
        files = {
            "table": atomic_write_text(out / "table.csv", csv_text(rows)),
            "correlations": atomic_write_text(out / "correlations.csv", csv_text(corr)),
            "figure": atomic_write_bytes(out / "fig7.png", transfer_figure(rows, corr, spec.metrics)),
        }
        seconds = time.perf_counter() - t0
        summary = {
            "name": spec.name,
            "runs": len(rows),
            "seconds": seconds,
            "tasks": [t["name"] for t in spec.downstream],
            "notes": notes,
        }
        files["summary"] = atomic_write_text(out / "study.json", json.dumps(summary, indent=2) + "\n")
    return StudyResult(rows=rows, correlations=corr, files=files, seconds=seconds, notes=notes)


def _correlation_notes(correlations: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per distinct reason for a nan correlation, naming the ``group/metric`` rows it concerns."""
    by_note: dict[str, list[str]] = {}
    for c in correlations:
        if c["note"]:
            by_note.setdefault(c["note"], []).append(f"{c['group']}/{c['metric']}")
    lines = []
    for note, where in by_note.items():
        listed = ", ".join(where[:6]) + (f" and {len(where) - 6} more" if len(where) > 6 else "")
        lines.append(f"r and rho are nan for {listed}: {note}")
    return lines


def _has_ray() -> bool:
    import importlib.util

    return importlib.util.find_spec("ray") is not None
