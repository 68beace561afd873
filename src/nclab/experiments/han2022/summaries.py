"""The keys [Han et al. 2022]'s claims (and the [Xu & Liu 2023] stand-ins) read off a trained run of
``fashion-mnist-cnn``: the MSE loss decomposition per epoch (:func:`decomposition_rows`, Fig. 2), the three findings
the CPU scale can contradict (:func:`findings`), the first-to-last trends of the collapse metrics
(:func:`collapse_trends`), the terminal-phase keys of each run (:func:`run_keys`) and DeepFool robustness
(:func:`robustness_summary`, Figs. 9 and 11).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from nclab.io.rundir import RunDir

__all__ = [
    "PAPER_VALUES",
    "ROBUSTNESS_PER_CLASS",
    "SERIES_METRICS",
    "TPT_METRICS",
    "TREND_METRICS",
    "collapse_trends",
    "decomposition_figure",
    "decomposition_rows",
    "findings",
    "paper_claim_keys",
    "robustness_images",
    "robustness_keys",
    "robustness_summary",
    "run_keys",
]


#: What [Han et al. 2022] reports for the three claims the CPU scale checks (Fig. 2, Table 1, Fig. 10).
PAPER_VALUES = {
    "negligible_ratio": 0.1,  # "L_perp becomes negligible against L_NC1": we read "negligible" as < 0.1
    "test_gain_mean": 1.833,  # Table 1: test accuracy, final minus zero-error epoch, points (mean of 15 pairs)
    "test_gain_median": 0.96,
}


def decomposition_rows(result: Any, split: str = "train") -> list[dict[str, Any]]:
    """Per measured epoch of an MSE run (:class:`~nclab.train.RunResult`): the [Han et al. 2022, Thms 1-2]
    decomposition the trainer logged (``mse_L*`` rows, :func:`nclab.theory.mse.mse_decomposition_from_stats`),
    ``L_perp / L_NC1`` and the train and test error. Empty when the run logged no decomposition (CE)."""
    from nclab.io.run_table import OUTPUT_LAYER

    terms = ("L", "L_NC1", "L_NC23", "L_perp")
    series = {k: result.series(f"mse_{k}", OUTPUT_LAYER, split) for k in terms}
    errors = {s: result.series("error", OUTPUT_LAYER, s) for s in ("train", "test")}
    rows = []
    for epoch in sorted(series["L_NC1"]):
        row: dict[str, Any] = {"epoch": epoch}
        row.update({k: series[k][epoch] for k in terms})
        nc1 = series["L_NC1"][epoch]
        row["L_perp/L_NC1"] = series["L_perp"][epoch] / nc1 if nc1 > 0 else math.nan
        row.update({f"{s} error": errors[s].get(epoch, math.nan) for s in errors})
        rows.append(row)
    return rows


def _ratio_at(rows: list[dict[str, Any]], epoch: int | None) -> float | None:
    hit = [r["L_perp/L_NC1"] for r in rows if r["epoch"] == epoch]
    return float(hit[0]) if hit else None


def decomposition_figure(rows: list[dict[str, Any]], zero_error_epoch: int | None) -> Any:
    """L_NC1, L_perp and L_NC2/3 (left) and L_perp / L_NC1 (right) against the epoch, log y; red dashed line at
    the zero-error epoch, grey dotted line at the paper's "negligible" ratio (:data:`PAPER_VALUES`)."""
    from nclab.experiments.common import legend, pyplot

    plt = pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.8))
    e = [r["epoch"] for r in rows]
    for key, label in (("L_NC1", "L_NC1"), ("L_perp", "L_perp"), ("L_NC23", "L_NC2/3")):
        ax.plot(e, [max(r[key], 1e-300) for r in rows], marker="o", ms=3, label=label)
    bx.plot(e, [r["L_perp/L_NC1"] for r in rows], marker="o", ms=3, color="C4")
    bx.axhline(PAPER_VALUES["negligible_ratio"], color="grey", ls=":", label="0.1 (our 'negligible')")
    for a in (ax, bx):
        a.set_yscale("log")
        a.set_xlabel("epoch")
        if zero_error_epoch is not None:
            a.axvline(zero_error_epoch, color="red", ls="--", lw=1, label="zero training error")
        legend(a)
    ax.set_ylabel("loss term")
    ax.set_title("MSE decomposition terms")
    bx.set_ylabel("L_perp / L_NC1")
    bx.set_title("L_perp against L_NC1")
    return fig


def findings(summary: dict[str, Any]) -> list[dict[str, str]]:
    """The three [Han et al. 2022] claims the CPU scale can contradict, each with the paper's statement, ours (the
    numbers of ``summary``) and whether they agree: L_perp negligible against L_NC1 from zero error on (Fig. 2),
    test accuracy improving after zero error (Table 1), MSE collapsing faster than CE (Fig. 10)."""

    def fmt(v: Any, spec: str = ".3g") -> str:
        return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)

    out = []
    r0, r1 = summary["lperp_over_lnc1_at_zero_error"], summary["lperp_over_lnc1_last"]
    negligible = PAPER_VALUES["negligible_ratio"]
    out.append(
        {
            "claim": "Fig. 2: L_perp is negligible against L_NC1 from an early epoch on",
            "ours": f"L_perp / L_NC1 = {fmt(r0)} at the zero-error epoch, {fmt(r1)} at the last",
            "verdict": "not reached"
            if r0 is None
            else ("agrees" if r0 < negligible else "contradicts at zero error")
            + ("" if r1 is None or r1 >= negligible or r0 < negligible else f"; < {negligible} by the end"),
        }
    )
    gain = summary["test_accuracy_gain_after_zero_error"].get("mse")
    out.append(
        {
            "claim": f"Table 1: test accuracy improves after zero error (mean +{PAPER_VALUES['test_gain_mean']}, "
            f"median +{PAPER_VALUES['test_gain_median']} points)",
            "ours": f"MSE: {fmt(gain, '+.2f')} points from the zero-error epoch to the last",
            "verdict": "not reached" if gain is None else ("agrees" if gain > 0 else "contradicts"),
        }
    )
    nc1 = summary["nc1_last"]
    out.append(
        {
            "claim": "Fig. 10: MSE-trained networks collapse faster than CE-trained ones",
            "ours": f"NC1 at the last epoch: MSE {fmt(nc1['mse'])}, CE {fmt(nc1['ce'])} (same epochs and init); "
            f"decades of NC1 after zero error: MSE {fmt(summary['nc1_decades_after_zero_error'].get('mse'))}, "
            f"CE {fmt(summary['nc1_decades_after_zero_error'].get('ce'))}",
            "verdict": "agrees" if nc1["mse"] < nc1["ce"] else "contradicts",
        }
    )
    return out


def paper_claim_keys(runs: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    """The summary keys of the three checked claims (:func:`findings`), from the runs' rows and ``summary``."""
    rows = decomposition_rows(runs["mse"])
    out: dict[str, Any] = {
        "lperp_over_lnc1_at_zero_error": _ratio_at(rows, runs["mse"].zero_error_epoch),
        "lperp_over_lnc1_last": _ratio_at(rows, rows[-1]["epoch"]) if rows else None,
        "test_accuracy_gain_after_zero_error": {},
        "nc1_decades_after_zero_error": {},
        "nc1_last": {loss: summary.get(f"{loss}: nc1 last") for loss in runs},
    }
    for loss in runs:
        at_zero = summary.get(f"{loss}: test error at zero-error epoch")
        if at_zero is not None:  # error fractions -> accuracy points
            out["test_accuracy_gain_after_zero_error"][loss] = 100 * (at_zero - summary[f"{loss}: test error last"])
        decades = summary.get(f"{loss}: orders of magnitude after TPT")
        if decades is not None:
            out["nc1_decades_after_zero_error"][loss] = decades
    return out


#: The penultimate-layer metrics (train split) whose first-to-last trend :func:`collapse_trends` reports, by the name
#: the summary gives them: NC1 (= Fuzziness / K, [Xu & Liu 2023]'s Table 2 form: the same trend), VCI, SqDist
#: (trace_ratio), CosSim (within_class_cosine) [Xu & Liu 2023, Fig. 3] and the within-class variance's parts in
#: V_B and V_B-perp [Xu & Liu 2023, Fig. 1] (the text's (1/KN) sum ||Proj(h_ki - mu_k)||^2, not divided by Tr Sigma_B).
TREND_METRICS: dict[str, str] = {
    "nc1": "nc1",
    "vci": "vci",
    "trace_ratio": "trace_ratio",
    "within_class_cosine": "within_class_cosine",
    "within_class_split_in_span": "within-class V_B part",
    "within_class_split_orthogonal": "within-class V_B-perp part",
}


def collapse_trends(result: Any) -> dict[str, Any]:
    """Trend keys of one training run (:class:`~nclab.train.RunResult`), read off its penultimate-layer rows.

    * For each of :data:`TREND_METRICS` on the train split: ``"{name} first measured"``, ``"{name} last"`` and
      ``"{name} falls"`` (last < first) [Xu & Liu 2023, Figs. 1, 3]; ``"sqdist V_B part"`` / ``"sqdist V_B-perp
      part"`` first measured and last: the two parts divided by Tr Sigma_B (the Fig. 1 caption's "projections of
      Squared Distance"), i.e. part x trace_ratio / Tr Sigma_W with Tr Sigma_W = the two parts' sum.
    * NC1 on the test split against the train split [Han et al. 2022, Fig. 12]: ``"test nc1 first measured"``,
      ``"test nc1 at zero-error epoch"`` (``None`` when the run never reached zero training error), ``"test nc1
      last"``, ``"test / train nc1 at zero-error epoch"``, ``"test / train nc1 last"``, ``"test nc1 falls"`` and
      the decades each split's NC1 falls from the first measured epoch to the last, ``"train nc1 decades"`` and
      ``"test nc1 decades"`` (log10(first / last); ``nan`` where a value is 0).

    A metric the run did not log (e.g. ``track="light"`` statistics have no NC1) gives no keys.

    "First measured" is the earliest measured epoch: epoch 0, the initialisation, before any step (the default
    ``measure.epochs="log"`` always measures it); "last" is the last measured epoch. The decades are
    ``log10(first / last)``; the part of the squared distance in the span V_B of the centred class means is
    ``Tr(P_B Sigma_W) / Tr Sigma_B`` and the rest ``Tr((I - P_B) Sigma_W) / Tr Sigma_B``.

    Parameters
    ----------
    result : RunResult
        A finished run: its metric rows (``result.series(metric, split=...)``) and ``zero_error_epoch``.

    Returns
    -------
    dict of str to float, bool or None
        The keys above; values are floats (``nan`` where undefined), the ``falls`` keys bools, and the
        zero-error keys ``None`` when the run never reached zero training error.

    See Also
    --------
    TREND_METRICS, nclab.train.RunResult.series

    Examples
    --------
    >>> from nclab.io.run_table import MetricRow
    >>> from nclab.train import RunConfig, RunResult
    >>> rows = [MetricRow(e, s, "fc", "nc1", v) for e, s, v in
    ...         [(0, "train", 2.0), (5, "train", 0.02), (0, "test", 3.0), (5, "test", 0.3)]]
    >>> keys = collapse_trends(RunResult(Path("run"), RunConfig(), 5, [0, 5], rows, "fc"))
    >>> keys["nc1 falls"], keys["test / train nc1 last"], keys["train nc1 decades"], keys["test nc1 decades"]
    (True, 15.0, 2.0, 1.0)
    """
    out: dict[str, Any] = {}
    train = {m: result.series(m) for m in TREND_METRICS}
    for metric, name in TREND_METRICS.items():
        if train[metric]:
            first, last = _first_last(train[metric])
            out.update({f"{name} first measured": first, f"{name} last": last, f"{name} falls": bool(last < first)})
    parts = (train["within_class_split_in_span"], train["within_class_split_orthogonal"], train["trace_ratio"])
    if all(parts):
        for at, epoch in (("first measured", min(parts[0])), ("last", max(parts[0]))):
            inside, orth, ratio = (p[epoch] for p in parts)
            scale = ratio / (inside + orth) if inside + orth > 0 else math.nan
            out[f"sqdist V_B part {at}"], out[f"sqdist V_B-perp part {at}"] = inside * scale, orth * scale
    test = result.series("nc1", split="test")
    if train["nc1"] and test:
        out.update(_test_nc1_keys(train["nc1"], test, result.zero_error_epoch))
    return out


#: The NC2-NC4 metrics of [Han et al. 2022, Figs. 3-6, 8] whose progress after zero training error
#: :func:`run_keys` reports: equinorm (Fig. 3), equiangularity (Fig. 4), max-equiangularity (Fig. 5, ``max_angle``),
#: self-duality (Fig. 6) and the NCC mismatch (Fig. 8), each at the penultimate layer on the train split.
TPT_METRICS: tuple[str, ...] = ("equinorm", "equiangularity", "max_angle", "self_duality", "ncc_mismatch")


#: The per-epoch series :func:`run_keys` stores (train split unless said), by metric: ``"{name} per epoch"``.
SERIES_METRICS: dict[str, str] = {
    "within_class_split_in_span": "within-class V_B part",
    "within_class_split_orthogonal": "within-class V_B-perp part",
    "nc1": "nc1",
    "vci": "vci",
}


def run_keys(label: str, result: Any, summary: dict[str, Any]) -> dict[str, Any]:
    """The per-run keys the paper claims read, prefixed ``"{label}: "``.

    * whether the run reached its target, zero training error, and its final training loss
      (:func:`nclab.experiments.convergence.convergence_keys`: ``converged``, ``final loss``, ``convergence``);
    * per-epoch series ``"{name} per epoch"`` as ``[[epoch, value], ...]`` for :data:`SERIES_METRICS` (train
      split) and ``"test vci per epoch"`` [Xu & Liu 2023, Figs. 1, 3, 6], with ``"test vci first measured"`` and
      ``"test vci last"``;
    * for each of :data:`TPT_METRICS`: ``"{m} at zero-error epoch"``, ``"{m} last"`` and ``"{m} decades after
      TPT"`` = log10(at zero error / last) (``None`` when the run never reached zero error, ``nan`` where a value
      is 0) [Han et al. 2022, Figs. 3-6, 8];
    * ``"test accuracy gain after zero error"`` in points (``None``: never reached) [Han et al. 2022, Table 1], and
      for an MSE run ``"lperp_over_lnc1 at zero-error epoch"``, ``"lperp_over_lnc1 last"`` and the decades each
      term of the decomposition falls from the first epoch after the initialisation to the last, ``"L_NC1
      decades"``, ``"L_NC23 decades"``, ``"L_perp decades"`` (Fig. 2).

    ``summary`` is the summary so far (its ``"{label}: test error ..."`` keys are read).

    Examples
    --------
    >>> from nclab.io.run_table import MetricRow
    >>> from nclab.train import RunConfig, RunResult
    >>> rows = [MetricRow(e, "train", "fc", "vci", v) for e, v in [(0, 0.5), (1, 0.4), (5, 0.1)]]
    >>> rows += [MetricRow(e, "train", "output", m, v) for e, m, v in [(5, "error", 0.0), (5, "loss", 0.02)]]
    >>> keys = run_keys("ce", RunResult(Path("run"), RunConfig(), 5, [0, 1, 5], rows, "fc"), {})
    >>> keys["ce: converged"], keys["ce: final loss"], keys["ce: vci per epoch"]
    (True, 0.02, [[0, 0.5], [1, 0.4], [5, 0.1]])
    """
    from nclab.experiments.convergence import convergence_keys
    from nclab.io.run_table import OUTPUT_LAYER

    zero = result.zero_error_epoch
    errors = result.series("error", OUTPUT_LAYER)
    losses = result.series("loss", OUTPUT_LAYER)
    if zero is not None:
        detail = f"zero training error at epoch {zero}"
    elif errors:
        detail = f"{100 * errors[max(errors)]:.1f} % training error at the last epoch"
    else:
        detail = "training error not measured"
    out: dict[str, Any] = convergence_keys(
        label,
        reached=zero is not None,
        final_loss=losses[max(losses)] if losses else None,
        target="zero training error",
        detail=detail,
    )
    for metric, name in SERIES_METRICS.items():
        series = result.series(metric)
        if series:
            out[f"{label}: {name} per epoch"] = [[int(e), float(series[e])] for e in sorted(series)]
    test_vci = result.series("vci", split="test")
    if test_vci:
        out[f"{label}: test vci per epoch"] = [[int(e), float(test_vci[e])] for e in sorted(test_vci)]
        out[f"{label}: test vci first measured"], out[f"{label}: test vci last"] = _first_last(test_vci)
    for metric in TPT_METRICS:
        series = result.series(metric)
        if not series:
            continue
        at_zero = float(series[zero]) if zero is not None and zero in series else None
        last = float(series[max(series)])
        out[f"{label}: {metric} at zero-error epoch"] = at_zero
        out[f"{label}: {metric} last"] = last
        out[f"{label}: {metric} decades after TPT"] = None if at_zero is None else _decades(at_zero, last)
    at_zero_err = summary.get(f"{label}: test error at zero-error epoch")
    last_err = summary.get(f"{label}: test error last")
    gain = None if at_zero_err is None or last_err is None else 100 * (at_zero_err - last_err)
    out[f"{label}: test accuracy gain after zero error"] = gain
    rows = decomposition_rows(result)
    if rows:
        out[f"{label}: lperp_over_lnc1 at zero-error epoch"] = _ratio_at(rows, zero)
        out[f"{label}: lperp_over_lnc1 last"] = _ratio_at(rows, rows[-1]["epoch"])
        after = [r for r in rows if r["epoch"] > 0] or rows  # from the first epoch after the initialisation
        for term in ("L_NC1", "L_NC23", "L_perp"):
            out[f"{label}: {term} decades"] = _decades(float(after[0][term]), float(after[-1][term]))
    return out


def _first_last(series: dict[int, float]) -> tuple[float, float]:
    return float(series[min(series)]), float(series[max(series)])


def _decades(first: float, last: float) -> float:
    return math.log10(first / last) if first > 0 and last > 0 else math.nan


def _test_nc1_keys(train: dict[int, float], test: dict[int, float], zero: int | None) -> dict[str, Any]:
    """The [Han et al. 2022, Fig. 12] keys of :func:`collapse_trends` from the two splits' ``{epoch: NC1}``."""

    def ratio(epoch: int | None) -> float | None:
        if epoch is None or epoch not in test or epoch not in train:
            return None
        return float(test[epoch] / train[epoch]) if train[epoch] > 0 else math.nan

    first, last = _first_last(test)
    return {
        "test nc1 first measured": first,
        "test nc1 at zero-error epoch": None if zero is None or zero not in test else float(test[zero]),
        "test nc1 last": last,
        "test / train nc1 at zero-error epoch": ratio(zero),
        "test / train nc1 last": ratio(max(test)),
        "test nc1 falls": bool(last < first),
        "train nc1 decades": _decades(*_first_last(train)),
        "test nc1 decades": _decades(first, last),
    }


#: Test images per class on which ``fashion-mnist-cnn`` measures DeepFool robustness (:func:`robustness_summary`): the
#: same images (the subset of seed 0) for every run, loss and seed. 20 per class at cpu scale: 200 images, ~3 s per
#: network on one busy core (ten backward passes per DeepFool step, ~3 steps per image), two networks per run.
ROBUSTNESS_PER_CLASS: dict[str, int] = {"tiny": 2, "cpu": 20}


def robustness_images(config: Any, per_class: int) -> tuple[Any, int]:
    """The fixed test subset DeepFool runs on: ``per_class`` test images per class of ``config``'s data, picked
    with seed 0 whatever the run's seed, as the run's network takes them (padding and standardisation of
    ``config``): a float tensor ``(N, C, H, W)``, and the number of classes K."""
    import torch

    from nclab.train.feeds import load_run_data

    fixed = config.model_copy(
        update={
            "seed": 0,
            "data": config.data.model_copy(update={"test_per_class": per_class}),
            "measure": config.measure.model_copy(update={"splits": ["train", "test"]}),
        }
    )
    test = load_run_data(fixed, torch.device("cpu"), config.train.batch_size).splits["test"]
    return test.x, test.K  # type: ignore[union-attr]  # the test split was asked for above


def robustness_keys(result: Any, x: Any, K: int) -> dict[str, Any]:
    """DeepFool robustness of one training run's network at its zero-error epoch and at its last epoch
    ([Han et al. 2022, Fig. 9]; [Papyan et al. 2020, Fig. 8] under CE), on the inputs ``x``.

    The measure is :func:`nclab.measure.deepfool`'s mean relative perturbation (overshoot 0.02, at most 50 steps):
    the mean over the inputs of ``||r(x)||_2 / ||x||_2``, larger = more robust. The networks are read back from
    the run's checkpoints: ``checkpoints/epoch_NNNN.pt`` of the zero-error epoch (kept with
    ``checkpoint.keep_measured``: the zero-error epoch is always measured) and ``checkpoints/last.pt``.

    Parameters
    ----------
    result : RunResult
        A finished run of the built-in trainer (its folder, config and zero-error epoch).
    x : torch.Tensor, shape (N, ...)
        The inputs, as the network takes them (:func:`robustness_images`).
    K : int
        The number of classes (the network's outputs).

    Returns
    -------
    dict of str to float, int or None
        ``"robustness at zero-error epoch"``, ``"robustness last"``, ``"robustness last / at zero-error epoch"``
        (> 1: more robust after training on past zero error), ``"robustness improvement after zero error"`` (that
        ratio minus 1, our reading of [Han et al. 2022, Fig. 9]'s "improvement", which the paper does not define)
        and ``"robustness unflipped at zero-error epoch"`` / ``"robustness unflipped last"`` (inputs
        DeepFool did not flip within 50 steps, or stalled where the network is locally constant: left out of the
        mean, see :class:`~nclab.measure.DeepFoolResult`). The zero-error keys are ``None`` when the run never
        reached zero training error; no key at all when the run kept no epoch checkpoints.

    See Also
    --------
    nclab.measure.deepfool, robustness_summary
    """
    from nclab._threads import torch_threads
    from nclab.measure import deepfool
    from nclab.nets import build_model
    from nclab.train.checkpoint import load_checkpoint

    cfg, run = result.config, RunDir(result.out)
    if not cfg.checkpoint.keep_measured:
        return {}

    def robustness(path: Path) -> tuple[float, int]:
        model = build_model(cfg.model.name, tuple(x.shape[1:]), K, head=cfg.model.head.build_kwargs(),
                            **cfg.model.options)  # fmt: skip
        model.load_state_dict(load_checkpoint(path)["model"])
        # one thread: its small backward passes gain nothing from more, and on a shared 2-core machine two threads
        # ran 8x slower (300 images: 42 s against 5 s)
        with torch_threads(1):
            res = deepfool(model, x, batch_size=256)
        return res.robustness, res.unflipped

    last, unflipped_last = robustness(run.checkpoint)
    out: dict[str, Any] = {"robustness at zero-error epoch": None, "robustness last": last}
    out |= {"robustness last / at zero-error epoch": None, "robustness improvement after zero error": None}
    out |= {"robustness unflipped at zero-error epoch": None, "robustness unflipped last": unflipped_last}
    zero = result.zero_error_epoch
    if zero is not None:
        at_zero, unflipped_zero = robustness(run.epoch_checkpoint(zero))
        out["robustness at zero-error epoch"] = at_zero
        ratio = last / at_zero if at_zero > 0 else math.nan  # at_zero is nan when no input flipped: nan too
        out["robustness last / at zero-error epoch"] = ratio
        out["robustness improvement after zero error"] = ratio - 1
        out["robustness unflipped at zero-error epoch"] = unflipped_zero
    return out


def robustness_summary(runs: dict[str, Any], scale: str) -> dict[str, Any]:
    """:func:`robustness_keys` of every run ``{label: RunResult}`` as ``"{label}: key"``, all on the same
    :data:`ROBUSTNESS_PER_CLASS` test images; ``{}`` at a scale without that entry (the paper scale keeps no
    epoch checkpoints of its large networks)."""
    if scale not in ROBUSTNESS_PER_CLASS or not runs:
        return {}
    x, K = robustness_images(next(iter(runs.values())).config, ROBUSTNESS_PER_CLASS[scale])
    return {f"{label}: {k}": v for label, r in runs.items() for k, v in robustness_keys(r, x, K).items()}
