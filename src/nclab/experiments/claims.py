"""The claim engine: what a paper says (quoted), how our measurement is judged against it, and the outcome.

A :class:`Claim` holds what a paper says (the quoted sentence with its file and line in the papers' text files,
:class:`Quote`, and the value the paper reports), the experiment whose summary measures it with ours, and the
criteria (:class:`Criterion`) that turn our numbers into an outcome. Each paper's claims are written once, in its
package's ``paper.py`` (``CLAIMS``, e.g. :mod:`nclab.experiments.han2022.paper`), apart from the code that runs the
experiments, with the protocol values the paper states (:class:`Value`); the registry attaches them to the
experiments that measure them. :func:`verdicts` evaluates the claims of one experiment on its
summary (what ``nclab experiment run`` adds to its summary and report), :func:`claims_table_html` shows them and
:func:`page_markdown` writes the generated part of ``docs/reproductions.md``.

**Outcomes** (:data:`OUTCOMES`). Each criterion gives ``pass``, ``partial``, ``fail``, ``inconclusive`` (the
difference is inside the seeds' spread, or too few runs converged) or ``favour`` (ours beats the paper's
direction). A claim's outcome from its criteria, in this order:

* a summary key a criterion reads is absent -> ``not measured`` (the experiment did not run, does not measure it at
  this scale, or no experiment exists: :attr:`Claim.protocol` then says what it would take);
* every criterion passes -> ``reproduced``;
* every criterion passes or favours ours, at least one favours -> ``differs in our favour``;
* every criterion passes or is inconclusive, at least one inconclusive -> ``inconclusive``;
* no criterion passes, favours or partly passes (at least one fails) -> ``not reproduced``, or ``paper erratum
  confirmed`` for a claim that tests a statement the paper gets wrong (:attr:`Claim.erratum`);
* a conjunctive claim (:attr:`Claim.all_required`: the paper says "all", "every", "both") with a criterion that
  fails (a fail is outside the seeds' spread where a criterion has one) -> ``not reproduced`` likewise;
* otherwise -> ``partly``.

A claim with more than one judged criterion, not all passing, says how many pass beside its outcome (``1 of 4
criteria pass``).

A claim of kind ``"check"`` (a derived analysis, the arithmetic of a paper's tables, a consistency check) is no
reproduction of a paper claim: its outcome is ``holds`` / ``partly holds`` / ``does not hold`` / ``inconclusive``
/ ``not measured`` (:data:`CHECK_OUTCOMES`), it is shown apart and counted apart.

**Runs over seeds.** A criterion may read a :class:`Runs` instead of one key: the same quantity of several training
runs (seeds), summarised as mean and sample standard deviation. Every training run records whether it reached its
target and its final loss under :func:`convergence_keys`; with ``converged_only`` (the default) a run that did not
converge is dropped, and the criterion's text says which and why; fewer than ``min_runs`` converged runs make the
criterion ``inconclusive``. :class:`Compare` compares two settings over >= 3 seeds each: a difference of means
``|mean_a - mean_b| <= sd_a + sd_b`` is inside the seeds' spread -> ``inconclusive``.

Each criterion says its threshold and its baseline in :meth:`Criterion.describe` (``basis``: whose threshold, which
baseline). The papers' text files carry no page numbers: locations are figure / table and section, and quotes
cite ``file:line`` of ``/work/shared/papers``' text files (:data:`PAPER_FILES`).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from nclab.experiments.convergence import CONVERGED, CONVERGENCE, FINAL_LOSS, convergence_keys
from nclab.experiments.correlation import partial_pearson, pearson

__all__ = [
    "CHECK_OUTCOMES",
    "CONVERGED",
    "CONVERGENCE",
    "FINAL_LOSS",
    "ID_PREFIX",
    "OUTCOMES",
    "PAPER_FILES",
    "VERDICTS",
    "Bound",
    "Claim",
    "Close",
    "Compare",
    "Converged",
    "Criterion",
    "Flip",
    "MedianGain",
    "Monotone",
    "Order",
    "Quote",
    "Runs",
    "SettingR",
    "Sign",
    "Trend",
    "Value",
    "Verdict",
    "attach",
    "check_ids",
    "claims_table_html",
    "convergence_keys",
    "lookup",
    "ours",
    "outcome_counts",
    "page_markdown",
    "quote",
    "tally",
    "verdict",
    "verdicts",
]

REPRODUCED, PARTLY, NOT, UNMEASURED = "reproduced", "partly", "not reproduced", "not measured"
INCONCLUSIVE, FAVOUR, ERRATUM = "inconclusive", "differs in our favour", "paper erratum confirmed"
#: The outcomes of a reproduction claim, in the page's order.
OUTCOMES: tuple[str, ...] = (REPRODUCED, PARTLY, NOT, INCONCLUSIVE, FAVOUR, ERRATUM, UNMEASURED)
#: Kept for callers of the four-outcome registry: the same as :data:`OUTCOMES`.
VERDICTS = OUTCOMES
HOLDS, PARTLY_HOLDS, FAILS = "holds", "partly holds", "does not hold"
#: The outcomes of a claim of kind ``"check"`` (not a reproduction: shown and counted apart).
CHECK_OUTCOMES: tuple[str, ...] = (HOLDS, PARTLY_HOLDS, FAILS, INCONCLUSIVE, UNMEASURED)
_PASS, _PARTIAL, _FAIL, _INCONCLUSIVE, _FAVOUR = "pass", "partial", "fail", "inconclusive", "favour"
#: The outcomes a :meth:`Criterion.check` returns.
CRITERION_OUTCOMES: tuple[str, ...] = (_PASS, _PARTIAL, _FAIL, _INCONCLUSIVE, _FAVOUR)

#: The papers' text files (``/work/shared/papers``), by citation key: :class:`Quote` cites ``file:line`` in them.
PAPER_FILES: dict[str, str] = {
    "[Xu & Liu 2023]": "000_aebadd9e07b35241.txt",
    "[Tirer & Bruna 2022]": "001_a2c591b6d8465d5c.txt",
    "[Wang et al. 2024]": "002_bb3687aee9e8a545.txt",
    "[Jiang et al. 2024]": "003_6bab7c477745ac90.txt",
    "[Han et al. 2022]": "004_5b143c3eb2980993.txt",
}
#: The start of every claim id of a paper: the citation key's first author and year (readable without our internal
#: paper numbers), e.g. ``xu2023-fig1-vb-split``.
ID_PREFIX: dict[str, str] = {
    "[Xu & Liu 2023]": "xu2023",
    "[Tirer & Bruna 2022]": "tirer2022",
    "[Wang et al. 2024]": "wang2024",
    "[Jiang et al. 2024]": "jiang2024",
    "[Han et al. 2022]": "han2022",
}

#: A summary key: one key, or a path of keys / list indices into nested summaries; ``"*"`` maps over a list.
Key = str | tuple[str | int, ...]


class _Missing(KeyError):
    pass


def lookup(summary: Mapping[str, Any], key: Key) -> Any:
    """The value at ``key`` in a (nested) summary; ``"*"`` in a path collects that level's list into a list.

    >>> lookup({"sweep": [{"pfc1": 1.0}, {"pfc1": 2.0}], "r": {"tau/vci": -0.5}}, ("sweep", "*", "pfc1"))
    [1.0, 2.0]
    >>> lookup({"r": {"tau/vci": -0.5}}, ("r", "tau/vci"))
    -0.5
    """
    path = (key,) if isinstance(key, str) else tuple(key)
    node: Any = summary
    for i, part in enumerate(path):
        if part == "*":
            if not isinstance(node, Sequence) or isinstance(node, str):
                raise _Missing(f"{_key_text(key)} absent")
            return [lookup(item, path[i + 1 :]) if path[i + 1 :] else item for item in node]
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            raise _Missing(f"{_key_text(key)} absent") from None
    if isinstance(node, float) and math.isnan(node):  # an undefined measurement decides nothing
        raise _Missing(f"{_key_text(key)} undefined")
    if node is None:  # e.g. a ratio at the zero-error epoch of a run that never reached it
        raise _Missing(f"{_key_text(key)} not reached")
    return node


def _key_text(key: Key) -> str:
    if isinstance(key, str):
        return key
    return str(key[0]) + "".join(f"[{p}]" if isinstance(p, int) or p == "*" else f'["{p}"]' for p in key[1:])


def _num(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int | float | np.floating | np.integer):
        v = float(v)
        if math.isnan(v):
            return "undefined"
        return f"{v:.5g}" if v != 0 and (abs(v) >= 1e-3 and abs(v) < 1e5) else f"{v:.3g}"
    if isinstance(v, list):
        return "[" + ", ".join(_num(x) for x in v) + "]"
    return str(v)


# ============================================================================================ runs and convergence
@dataclass(frozen=True)
class Runs:
    """The same quantity of several training runs (seeds) in one summary: ``template.format(run=label)`` for each of
    ``labels`` (default template ``"{run}: {metric}"``).

    With ``converged_only`` (default) a run whose ``"{run}: converged"`` key (:func:`convergence_keys`) is false is
    dropped and named with its ``"{run}: convergence"`` text; a run without that key counts as converged only when
    ``converged_only`` is false (otherwise the criterion reads *not measured*: its convergence is not recorded).
    Fewer than ``min_runs`` converged runs make the criterion *inconclusive*.

    >>> r = Runs(("mse seed0", "mse seed1"), "nc1 last", converged_only=False)
    >>> r.values({"mse seed0: nc1 last": 1.0, "mse seed1: nc1 last": 3.0})[0]
    [1.0, 3.0]
    """

    labels: tuple[str, ...]
    metric: str
    template: str = "{run}: {metric}"
    converged_only: bool = True
    min_runs: int = 1
    name: str = ""  #: how the setting is called in texts (default: the labels' common start)

    def key(self, run: str) -> str:
        return self.template.format(run=run, metric=self.metric)

    def title(self) -> str:
        if self.name:
            return self.name
        first = self.labels[0] if self.labels else ""
        stem = first.split(" seed")[0]
        common = stem if all(x.split(" seed")[0] == stem for x in self.labels) else ""
        return f"{common}: {self.metric}" if common else self.metric

    def describe(self) -> str:
        conv = ", converged runs only" if self.converged_only else ""
        return f"{self.title()} over {len(self.labels)} runs{conv}"

    def values(self, summary: Mapping[str, Any]) -> tuple[list[Any], str]:
        """The values of the kept runs and a note naming the dropped ones (empty when none was dropped)."""
        kept, dropped = [], []
        for run in self.labels:
            if self.converged_only:
                ok = lookup(summary, f"{run}: {CONVERGED}")
                if not ok:
                    why = summary.get(f"{run}: {CONVERGENCE}", "did not converge")
                    dropped.append(f"{run}: {why}")
                    continue
            kept.append(lookup(summary, self.key(run)))
        note = f"dropped {len(dropped)} of {len(self.labels)} runs ({'; '.join(dropped)})" if dropped else ""
        return kept, note


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    v = np.asarray(values, dtype=np.float64)
    return float(v.mean()), (float(v.std(ddof=1)) if v.size > 1 else 0.0)


def _stat_text(mean: float, sd: float, n: int) -> str:
    return _num(mean) if n == 1 else f"{_num(mean)} ± {_num(sd)} (n = {n})"


@dataclass(frozen=True)
class SettingR:
    """A correlation over the settings of a group of runs, computed here from the summary's per-setting means
    (``setting_means``, one point per setting: the mean over its seeds) over the settings whose every run reached
    its target; the others are dropped and named with their p_0 (the pretraining accuracy) beside the kept ones'.

    ``against`` is ``"mlog"`` (Pearson r with MLOG), ``"mlo"`` (with MLO) or ``"partial"`` (with MLOG controlling
    for logit p_0). Its spread (:meth:`spread`) is the summary's ``pearson_r_sd_converged``: the standard
    deviation over seeds of the per-seed r over the same settings (key ``"group/metric"`` for MLOG,
    ``"group/metric/mlo"`` for MLO; none for the partial r). Fewer than 3 kept settings (4 for the
    partial r) decide nothing (``inconclusive``). A summary without per-setting values reads *not measured*.

    >>> rows = [{"value": v, "runs": 3, "converged": 3 if v > 0.1 else 0, "vci": v, "mlog": 2 * v, "mlo": v,
    ...          "p0": 0.85 if v > 0.1 else 0.76} for v in (0.1, 0.25, 0.5, 1.0)]
    >>> r, text, note = SettingR("tau", "vci").read({"setting_means": {"tau": rows}})
    >>> round(r, 3), note
    (1.0, 'dropped 1 of 4 settings (tau = 0.1: 0 of 3 runs reached their target, p0 0.76); kept p0 0.85 - 0.85')
    """

    group: str
    metric: str
    against: str = "mlog"

    def title(self) -> str:
        name = "partial r(%s, MLOG | logit p0)" if self.against == "partial" else f"r(%s, {self.against.upper()})"
        return f"{name % self.metric}, {self.group}"

    def describe(self) -> str:
        spread = "; spread: the sd over seeds of the per-seed r" if self.against != "partial" else ""
        return (
            f"{self.title()} over the settings whose every run reached its target (one point per setting, the mean "
            f"over seeds; the other settings dropped and named){spread}"
        )

    def read(self, summary: Mapping[str, Any]) -> tuple[float | None, str, str]:
        """``(r, text, note)``; ``r`` is ``None`` when too few settings are kept or r is undefined."""
        try:
            rows = lookup(summary, ("setting_means", self.group))
        except _Missing:
            raise _Missing(f'summary lacks per-setting values: setting_means["{self.group}"] absent') from None
        need_keys = (
            "value",
            "runs",
            "converged",
            "p0",
            self.metric,
            "mlog" if self.against == "partial" else self.against,
        )
        for k in need_keys:
            if any(not isinstance(r, Mapping) or k not in r for r in rows):
                raise _Missing(f'summary lacks per-setting values: setting_means["{self.group}"][*]["{k}"] absent')
        kept = [r for r in rows if r["converged"] == r["runs"]]
        dropped = [
            f"{self.group} = {_num(r['value'])}: {r['converged']} of {r['runs']} runs reached their target, "
            f"p0 {_num(r['p0'])}"
            for r in rows
            if r["converged"] != r["runs"]
        ]
        note = ""
        if dropped:
            p0 = [float(r["p0"]) for r in kept]
            kept_p0 = f"; kept p0 {_num(min(p0))} - {_num(max(p0))}" if p0 else ""
            note = f"dropped {len(dropped)} of {len(rows)} settings ({'; '.join(dropped)}){kept_p0}"
        need = 4 if self.against == "partial" else 3
        if len(kept) < need:
            return None, f"{self.title()}: {len(kept)} settings reached their target (< {need})", note
        x = [float(r[self.metric]) for r in kept]
        if self.against == "partial":
            p = np.asarray([float(r["p0"]) for r in kept])
            r = partial_pearson(x, [float(r["mlog"]) for r in kept], np.log(p / (1 - p)))
        else:
            r = pearson(x, [float(r[self.against]) for r in kept])
        if not math.isfinite(r):
            return None, f"{self.title()} undefined over {len(kept)} settings", note
        return r, f"{self.title()} = {r:+.3f} over {len(kept)} settings", note

    def spread(self, summary: Mapping[str, Any]) -> float | None:
        """The sd over seeds of the per-seed r (``pearson_r_sd_converged``); ``None`` when undefined (one seed) or
        not recorded (no per-seed r for MLO in the summary; never for the partial r)."""
        if self.against == "partial":
            return None
        name = f"{self.group}/{self.metric}" + ("/mlo" if self.against == "mlo" else "")
        try:
            return float(lookup(summary, ("pearson_r_sd_converged", name)))
        except _Missing:
            return None


Source = Key | Runs | SettingR


def _read(summary: Mapping[str, Any], source: Source) -> tuple[float | None, str, str]:
    """``(value, text, note)`` of one key or of the mean of a :class:`Runs` (``None``: too few runs converged)."""
    if isinstance(source, SettingR):
        return source.read(summary)
    if isinstance(source, Runs):
        vals, note = source.values(summary)
        if len(vals) < max(source.min_runs, 1):
            return None, f"{source.title()}: {len(vals)} converged runs (< {max(source.min_runs, 1)})", note
        m, sd = _mean_sd([float(x) for x in vals])
        return m, f"{source.title()} = {_stat_text(m, sd, len(vals))}", note
    v = float(lookup(summary, source))
    return v, f"{_key_text(source)} = {_num(v)}", ""


def _src_text(source: Source) -> str:
    return source.describe() if isinstance(source, Runs | SettingR) else _key_text(source)


def _with(text: str, *notes: str) -> str:
    extra = "; ".join(n for n in notes if n)
    return f"{text} [{extra}]" if extra else text


# ============================================================================================ criteria
class Criterion:
    """One check of our summary against a claim: :meth:`describe` says it in words (threshold and baseline),
    :meth:`check` evaluates it to ``(outcome, ours)`` with outcome one of :data:`CRITERION_OUTCOMES` and ``ours``
    the values it read (a missing key raises ``KeyError``). ``basis`` (every criterion has it) says whose threshold
    it is and what the baseline is, in words."""

    basis: str = ""

    def describe(self) -> str:
        raise NotImplementedError

    def check(self, summary: Mapping[str, Any]) -> tuple[str, str]:
        raise NotImplementedError

    def _said(self, text: str) -> str:
        return f"{text} ({self.basis})" if self.basis else text


@dataclass(frozen=True)
class Sign(Criterion):
    """``summary[key]`` has the sign ``sign`` (+1 or -1): a correlation's direction, or a change's. With ``spread``
    and a :class:`Runs` key, a mean within one standard deviation over seeds of 0 (``|mean| <= sd``) is
    ``inconclusive``, and fewer than 3 converged runs too; with a :class:`SettingR` key, an r within its sd over
    seeds of 0 (``|r| <= sd``) is ``inconclusive``, and so is an r without a recorded spread. With ``full``, a
    value of the right sign (outside the spread) but smaller in size than ``full`` is a partial pass (e.g. a fall
    of less than one decade where the band asks for one); with ``partly_min`` too, one smaller than ``partly_min``
    is a fail (a move too small to count as part of the claim, e.g. a fall of 0.016 decade against "approach").

    >>> band = Sign("decades", +1, full=1.0, partly_min=0.1)
    >>> [band.check({"decades": v})[0] for v in (1.5, 0.5, 0.016, -0.2)]
    ['pass', 'partial', 'fail', 'fail']
    """

    key: Source
    sign: int
    spread: bool = False
    basis: str = ""
    full: float | None = None
    partly_min: float | None = None

    def describe(self) -> str:
        extra = "; |mean| <= sd over >= 3 seeds is inconclusive" if self.spread else ""
        if self.spread and isinstance(self.key, SettingR):
            extra = "; |r| <= its sd over seeds is inconclusive"
        if self.full is not None:
            extra += f"; pass at |value| >= {_num(self.full)}, partly below"
            if self.partly_min is not None:
                extra += f" down to {_num(self.partly_min)}, fail under it"
        return self._said(f"{_src_text(self.key)} {'> 0' if self.sign > 0 else '< 0'}{extra}")

    def check(self, summary: Mapping[str, Any]) -> tuple[str, str]:
        v, text, note = _read(summary, self.key)
        if v is None:
            return _INCONCLUSIVE, _with(text, note)
        if self.spread and isinstance(self.key, SettingR):
            sd = self.key.spread(summary)
            if sd is None or not math.isfinite(sd):
                why = "one seed" if self.key.against == "mlog" else "the summary has no per-seed r for it"
                return _INCONCLUSIVE, _with(f"{text}: no spread over seeds recorded ({why})", note)
            text = f"{text}, sd over seeds {_num(sd)}"
            if abs(v) <= sd:
                return _INCONCLUSIVE, _with(f"{text}: inside the seeds' spread", note)
        if self.spread and isinstance(self.key, Runs):
            vals, _ = self.key.values(summary)
            if len(vals) < 3:
                return _INCONCLUSIVE, _with(f"{text}: fewer than 3 converged runs", note)
            if abs(v) <= _mean_sd([float(x) for x in vals])[1]:
                return _INCONCLUSIVE, _with(f"{text}: inside the seeds' spread", note)
        if self.partly_min is not None and 0 < v * self.sign < self.partly_min:
            return _FAIL, _with(f"{text}: smaller than the partly minimum {_num(self.partly_min)}", note)
        if self.full is not None and 0 < v * self.sign < self.full:
            return _PARTIAL, _with(text, note)
        return (_PASS if v * self.sign > 0 else _FAIL), _with(text, note)


@dataclass(frozen=True)
class Converged(Criterion):
    """Every run listed under ``summary[key]`` (a list of run labels) reached its target (its ``"{run}:
    converged"`` key, :func:`convergence_keys`): pass; otherwise ``inconclusive``, naming the runs that did not and
    why. For claims computed over all of an experiment's runs (e.g. a correlation over settings), where a run that
    did not converge cannot be left out of the statistic.

    With ``dropped_ok`` the claim's other criteria read values the experiment computed from its converged runs only
    (e.g. ``resnet-depth``'s networks at zero training error): the criterion passes when at least one run converged
    and names the dropped runs and why, so that the row says what was left out."""

    key: Key = "run_labels"
    basis: str = ""
    dropped_ok: bool = False

    def describe(self) -> str:
        if self.dropped_ok:
            return self._said(
                f"the values read come from the runs of {_key_text(self.key)} that reached their target; the others "
                "are dropped and named (none converged: inconclusive)"
            )
        return self._said(f"every run of {_key_text(self.key)} reached its target (else inconclusive)")

    def check(self, summary: Mapping[str, Any]) -> tuple[str, str]:
        labels = lookup(summary, self.key)
        bad = [f"{r}: {summary.get(f'{r}: {CONVERGENCE}', 'did not converge')}" for r in labels
               if not lookup(summary, f"{r}: {CONVERGED}")]  # fmt: skip
        if not bad:
            return _PASS, f"all {len(labels)} runs reached their target"
        shown = "; ".join(bad[:4]) + (f"; and {len(bad) - 4} more" if len(bad) > 4 else "")
        if self.dropped_ok and len(bad) < len(labels):
            return _PASS, f"converged runs only: dropped {len(bad)} of {len(labels)} runs ({shown})"
        return _INCONCLUSIVE, f"{len(bad)} of {len(labels)} runs did not reach their target ({shown})"


@dataclass(frozen=True)
class Bound(Criterion):
    """``summary[key] <= bound`` (``below=True``) or ``>= bound``; with ``partly``, a value past ``bound`` but within
    ``partly`` is a partial pass."""

    key: Source
    bound: float
    below: bool = True
    partly: float | None = None
    basis: str = ""

    def describe(self) -> str:
        op = "<=" if self.below else ">="
        extra = f" (partly: {op} {_num(self.partly)})" if self.partly is not None else ""
        return self._said(f"{_src_text(self.key)} {op} {_num(self.bound)}{extra}")

    def check(self, summary: Mapping[str, Any]) -> tuple[str, str]:
        v, text, note = _read(summary, self.key)
        if v is None:
            return _INCONCLUSIVE, _with(text, note)
        side = 1.0 if self.below else -1.0
        if side * (v - self.bound) <= 0:
            out = _PASS
        elif self.partly is not None and side * (v - self.partly) <= 0:
            out = _PARTIAL
        else:
            out = _FAIL
        return out, _with(text, note)


@dataclass(frozen=True)
class Order(Criterion):
    """``summary[a] < summary[b]``: one measured quantity below another, ``b`` the baseline (e.g. the value at the
    first epoch after initialisation). For two settings over seeds use :class:`Compare`.

    When ``a`` or ``b`` is a :class:`Runs` (seeds), the spread rule of :class:`Compare` applies: the difference of
    the means inside the seeds' spread (``|a - b| <= sd_a + sd_b``, the sample sd over seeds of each side read over
    runs, 0 for a single key) is ``inconclusive``, and so are fewer than ``min_seeds`` converged runs on a side.

    >>> r = Runs(("mse seed0", "mse seed1", "mse seed2"), "d", converged_only=False)
    >>> Order(r, "b").check({"mse seed0: d": 0.1, "mse seed1: d": 0.2, "mse seed2: d": 0.3, "b": 1.0})[0]
    'pass'
    >>> Order(r, "b").check({"mse seed0: d": 0.1, "mse seed1: d": 0.9, "mse seed2: d": 1.7, "b": 1.0})[0]
    'inconclusive'
    """

    a: Source
    b: Source
    basis: str = ""
    min_seeds: int = 3

    def describe(self) -> str:
        rule = ""
        if isinstance(self.a, Runs) or isinstance(self.b, Runs):
            rule = (
                f": mean over >= {self.min_seeds} seeds; |difference| <= the seeds' spread (sum of sds) is inconclusive"
            )
        return self._said(f"{_src_text(self.a)} < {_src_text(self.b)}{rule}")

    def _sd(self, summary: Mapping[str, Any], source: Source) -> tuple[float, int]:
        if not isinstance(source, Runs):
            return 0.0, self.min_seeds
        vals, _ = source.values(summary)
        return _mean_sd([float(x) for x in vals])[1], len(vals)

    def check(self, summary: Mapping[str, Any]) -> tuple[str, str]:
        (a, ta, na), (b, tb, nb) = _read(summary, self.a), _read(summary, self.b)
        if a is None or b is None:
            return _INCONCLUSIVE, _with(f"{ta} vs {tb}", na, nb)
        text = f"{ta} vs {tb}"
        if isinstance(self.a, Runs) or isinstance(self.b, Runs):
            (sa, ka), (sb, kb) = self._sd(summary, self.a), self._sd(summary, self.b)
            if min(ka, kb) < self.min_seeds:
                return _INCONCLUSIVE, _with(f"{text}: fewer than {self.min_seeds} converged runs", na, nb)
            text = f"{text}: difference {_num(a - b)}, spread {_num(sa + sb)}"
            if abs(a - b) <= sa + sb:
                return _INCONCLUSIVE, _with(text, na, nb)
        return (_PASS if a < b else _FAIL), _with(text, na, nb)


@dataclass(frozen=True)
class Close(Criterion):
    """``|summary[key] - target| <= atol + rtol |target|``, the target a number or another summary key (a closed
    form computed beside ours); ``partly_rtol`` widens the relative tolerance for a partial pass. A boolean or
    integer target asks for equality."""

    key: Key
    target: float | int | bool | None = None
    target_key: Key | None = None
    atol: float = 0.0
    rtol: float = 0.0
    partly_rtol: float | None = None
    basis: str = ""

    def describe(self) -> str:
        t = _key_text(self.target_key) if self.target_key is not None else _num(self.target)
        if isinstance(self.target, bool | int) and self.target_key is None and not self.atol and not self.rtol:
            return self._said(f"{_key_text(self.key)} == {t}")
        tol = " + ".join(x for x in (self.atol and f"{_num(self.atol)}", self.rtol and f"{_num(self.rtol)} |t|") if x)
        extra = f" (partly: {_num(self.partly_rtol)} |t|)" if self.partly_rtol is not None else ""
        return self._said(f"|{_key_text(self.key)} - t| <= {tol or 0}, t = {t}{extra}")

    def check(self, summary: Mapping[str, Any]) -> tuple[str, str]:
        v = lookup(summary, self.key)
        t = lookup(summary, self.target_key) if self.target_key is not None else self.target
        ours = f"{_key_text(self.key)} = {_num(v)}" + (f" (t = {_num(t)})" if self.target_key is not None else "")
        if isinstance(t, bool) or isinstance(v, bool):
            return (_PASS if v == t else _FAIL), ours
        v, t = float(v), float(t)  # type: ignore[arg-type]
        err = abs(v - t)
        if err <= self.atol + self.rtol * abs(t):
            return _PASS, ours
        if self.partly_rtol is not None and err <= self.atol + self.partly_rtol * abs(t):
            return _PARTIAL, ours
        return _FAIL, ours


@dataclass(frozen=True)
class Monotone(Criterion):
    """The list ``summary[key]`` never rises (``direction=-1``) or never falls (``+1``) from one entry to the
    next; ties are allowed."""

    key: Key
    direction: int
    basis: str = ""

    def describe(self) -> str:
        return self._said(f"{_key_text(self.key)} {'non-increasing' if self.direction < 0 else 'non-decreasing'}")

    def check(self, summary: Mapping[str, Any]) -> tuple[str, str]:
        v = np.asarray(lookup(summary, self.key), dtype=np.float64)
        bad = int(np.count_nonzero(self.direction * np.diff(v) < 0))
        return (_PASS if bad == 0 else _FAIL), f"{_key_text(self.key)} = {_num(v.tolist())} ({bad} violations)"


@dataclass(frozen=True)
class MedianGain(Criterion):
    """The median over ``pairs`` of ``summary[before] - summary[after]`` is ``> 0`` (e.g. the test error at the
    zero-error epoch minus the final one: a median improvement); every key must be present."""

    pairs: tuple[tuple[Key, Key], ...]
    label: str = "median(before - after)"
    basis: str = ""

    @property
    def key(self) -> Key:  # the first key, for messages
        return self.pairs[0][0]

    def describe(self) -> str:
        return self._said(f"{self.label} > 0 over {len(self.pairs)} runs")

    def check(self, summary: Mapping[str, Any]) -> tuple[str, str]:
        gains = [float(lookup(summary, a)) - float(lookup(summary, b)) for a, b in self.pairs]
        med = float(np.median(gains))
        improved = sum(g > 0 for g in gains)
        return (_PASS if med > 0 else _FAIL), f"median {_num(med)}, {improved} of {len(gains)} improve"


@dataclass(frozen=True)
class Compare(Criterion):
    """Two settings over seeds (``a``, ``b``: :class:`Runs`, each >= ``min_seeds`` converged runs), compared by the
    difference of their means ``d = mean_a - mean_b`` against the seeds' spread ``s = sd_a + sd_b`` (sample
    standard deviations over seeds).

    ``relation="<"`` (the paper: a below b): ``|d| <= s`` -> ``inconclusive``; else ``d < 0`` -> pass, ``d > 0``
    -> fail. ``relation="~"`` (the paper: comparable, within ``tol``): ``|d| <= tol`` -> pass; else ``|d| <= s``
    -> ``inconclusive``; else fail. With ``favour`` (+1 or -1) a difference outside the spread whose sign is
    ``favour`` is ``favour`` instead of fail: ours beats the paper's direction (e.g. a = the CMF head's accuracy,
    ``favour=+1``: the CMF head better than the learned one where the paper says "comparable"). Fewer than
    ``min_seeds`` converged runs in either setting -> ``inconclusive``.

    >>> a = Runs(("mse seed0", "mse seed1", "mse seed2"), "nc1 last", converged_only=False)
    >>> b = Runs(("ce seed0", "ce seed1", "ce seed2"), "nc1 last", converged_only=False)
    >>> s = {f"{l} seed{i}: nc1 last": v for l, vs in (("mse", (1.0, 1.1, 0.9)), ("ce", (2.0, 2.1, 1.9)))
    ...      for i, v in enumerate(vs)}
    >>> Compare(a, b).check(s)[0]
    'pass'
    >>> s["ce seed0: nc1 last"] = 0.5   # ce now spans 0.5 ... 2.1: the difference is inside the spread
    >>> Compare(a, b).check(s)[0]
    'inconclusive'
    """

    a: Runs
    b: Runs
    relation: str = "<"
    tol: float = 0.0
    favour: int = 0
    min_seeds: int = 3
    basis: str = ""

    def __post_init__(self) -> None:
        if self.relation not in ("<", "~"):
            raise ValueError(f"Compare relation must be '<' or '~', not {self.relation!r}")

    def describe(self) -> str:
        rel = "<" if self.relation == "<" else f"within {_num(self.tol)} of"
        rule = (
            f"mean over >= {self.min_seeds} seeds each; |difference of means| <= sd_a + sd_b (the seeds' spread) "
            "is inconclusive"
        )
        fav = " (a significant difference the other way is in our favour)" if self.favour else ""
        return self._said(f"{_src_text(self.a)} {rel} {_src_text(self.b)}: {rule}{fav}")

    def check(self, summary: Mapping[str, Any]) -> tuple[str, str]:
        va, na = self.a.values(summary)
        vb, nb = self.b.values(summary)
        if len(va) < self.min_seeds or len(vb) < self.min_seeds:
            counts = f"{self.a.title()}: {len(va)}, {self.b.title()}: {len(vb)} converged runs (< {self.min_seeds})"
            return _INCONCLUSIVE, _with(counts, na, nb)
        (ma, sa), (mb, sb) = _mean_sd([float(x) for x in va]), _mean_sd([float(x) for x in vb])
        d, spread = ma - mb, sa + sb
        text = _with(
            f"{self.a.title()} {_stat_text(ma, sa, len(va))} vs {self.b.title()} {_stat_text(mb, sb, len(vb))}: "
            f"difference {_num(d)}, spread {_num(spread)}",
            na,
            nb,
        )
        if self.relation == "~" and abs(d) <= self.tol:
            return _PASS, text
        if abs(d) <= spread:
            return _INCONCLUSIVE, text
        if self.relation == "<" and d < 0:
            return _PASS, text
        if self.favour and d * self.favour > 0:
            return _FAVOUR, text
        return _FAIL, text


@dataclass(frozen=True)
class Flip(Criterion):
    """A correlation whose sign flips between two groups as the paper's: ``summary[a]`` has the sign ``signs[0]``
    and ``summary[b]`` the sign ``signs[1]`` (opposite signs). Both as the paper's -> pass; a flip the other way
    round -> partial; the same sign in both groups (no flip) -> fail. Judged as one flip, not two signs. With
    :class:`SettingR` correlations, either r within its sd over seeds of 0 (or too few settings) is ``inconclusive``:
    no sign, so no flip, is established."""

    a: Key | SettingR
    b: Key | SettingR
    signs: tuple[int, int]
    basis: str = ""

    def __post_init__(self) -> None:
        if self.signs[0] * self.signs[1] >= 0:
            raise ValueError(f"Flip needs opposite signs, not {self.signs}")

    def describe(self) -> str:
        s = ["> 0" if x > 0 else "< 0" for x in self.signs]
        spread = "; either |r| <= its sd over seeds is inconclusive" if isinstance(self.a, SettingR) else ""
        return self._said(f"sign flips: {_src_text(self.a)} {s[0]} and {_src_text(self.b)} {s[1]}{spread}")

    def check(self, summary: Mapping[str, Any]) -> tuple[str, str]:
        if isinstance(self.a, SettingR) and isinstance(self.b, SettingR):
            (ra, ta, na), (rb, tb, nb) = self.a.read(summary), self.b.read(summary)
            if ra is None or rb is None:
                return _INCONCLUSIVE, _with(f"{ta}; {tb}", na, nb)
            sds = [x.spread(summary) for x in (self.a, self.b)]
            said = [f"{t} (sd over seeds {_num(sd) if sd is not None else 'not recorded'})" for t, sd in zip(
                (ta, tb), sds, strict=True)]  # fmt: skip
            text = _with(", ".join(said), na, nb)
            if any(sd is None or not math.isfinite(sd) or abs(r) <= sd for r, sd in zip((ra, rb), sds, strict=True)):
                return _INCONCLUSIVE, text + " (a sign inside its spread over seeds: no flip established)"
            a, b = ra, rb
        else:
            a, b = float(lookup(summary, self.a)), float(lookup(summary, self.b))  # type: ignore[arg-type]
            text = f"{_key_text(self.a)} = {_num(a)}, {_key_text(self.b)} = {_num(b)}"  # type: ignore[arg-type]
        if a * self.signs[0] > 0 and b * self.signs[1] > 0:
            return _PASS, text + " (flips as the paper's)"
        if a * b < 0:
            return _PARTIAL, text + " (flips the other way)"
        return _FAIL, text + " (no flip)"


@dataclass(frozen=True)
class Trend(Criterion):
    """A per-epoch series keeps falling (``direction=-1``) or rising (``+1``) after the first epoch: the baseline is
    the first measured epoch after the initialisation (``skip_init``: epoch 0 is dropped), not the initialisation.

    The series is ``summary[key]`` as ``[[epoch, value], ...]`` pairs (or the mean over the converged runs of a
    :class:`Runs` of such series, at their common epochs). Let ``start`` be its first value after epoch 0, ``ext``
    its extreme after that (the smallest for -1, the largest for +1) and ``last`` its last value. Pass: ``last``
    moved from ``start`` in ``direction`` and lies within ``tol`` (relative) of ``ext`` (the trend holds to the
    end); partial: it moved from ``start`` in ``direction`` but turned back by more than ``tol`` from ``ext`` (the
    extreme's epoch is said); fail: it did not move from ``start`` in ``direction``.

    ``from_peak`` judges the trend after the early transient: ``start`` is the series' opposite extreme after the
    initialisation (its peak for a fall, its trough for a rise), and a peak later than the first third of the
    epochs is no early transient (at most partial). ``per_run`` (a :class:`Runs` key) judges each converged run
    on its own series and reports the relative change ``last / start - 1`` as mean and sd over the runs: fewer than
    3 runs, or ``|mean| <= sd``, is ``inconclusive``; every run passing -> pass; no run moving in ``direction`` ->
    fail; otherwise partial.

    >>> up_down = [[0, 0.1], [1, 7.6], [2, 8.0], [4, 5.9], [12, 3.5], [27, 1.8], [80, 1.6]]
    >>> Trend("v", -1).check({"v": up_down})[0], Trend("v", -1, from_peak=True).check({"v": up_down})[1]
    ('pass', 'v (epochs 2 -> 80, from its peak): 8 -> 1.6; minimum 1.6 at epoch 80')
    """

    key: Key | Runs
    direction: int
    tol: float = 0.05
    skip_init: bool = True
    basis: str = ""
    from_peak: bool = False
    per_run: bool = False

    def describe(self) -> str:
        word = "keeps falling" if self.direction < 0 else "keeps rising"
        ext = "minimum" if self.direction < 0 else "maximum"
        start = "the first epoch after initialisation" if self.skip_init else "the first measured epoch"
        if self.from_peak:
            peak = "peak" if self.direction < 0 else "trough"
            start = (
                f"its {peak} after initialisation (the early transient skipped; a {peak} after the first third of the "
                "epochs: partly at most)"
            )
        per = ""
        if self.per_run:
            per = (
                "; judged per run: pass when every run passes, and a relative change (last / start - 1, mean ± sd "
                "over >= 3 runs) inside its spread is inconclusive"
            )
        return self._said(
            f"{_src_text(self.key)} {word}: last vs {start} in that direction, and within {_num(self.tol)} "
            f"(relative) of its {ext} after it (partly: moved in that direction but turned back){per}"
        )

    def _series(self, summary: Mapping[str, Any]) -> tuple[dict[int, float] | None, str, int]:
        if isinstance(self.key, Runs):
            runs, note = self.key.values(summary)
            if len(runs) < max(self.key.min_runs, 1):
                return None, note, len(runs)
            dicts = [{int(e): float(v) for e, v in r} for r in runs]
            common = set.intersection(*(set(d) for d in dicts))
            return {e: float(np.mean([d[e] for d in dicts])) for e in sorted(common)}, note, len(runs)
        return {int(e): float(v) for e, v in lookup(summary, self.key)}, "", 1

    def _judge(self, name: str, series: dict[int, float], mean: str = "") -> tuple[str, str, float]:
        """``(outcome, text, relative change last / start - 1)`` of one series."""
        epochs = [e for e in sorted(series) if e > 0 or not self.skip_init]
        if len(epochs) < 2:
            raise _Missing(f"{name}: fewer than 2 measured epochs after the initialisation")
        peak_late = False
        if self.from_peak:
            e_start = (max if self.direction < 0 else min)(epochs, key=lambda e: series[e])
            peak_late = e_start > epochs[-1] / 3
            epochs = [e for e in epochs if e >= e_start]
        start, last = series[epochs[0]], series[epochs[-1]]
        pick = min if self.direction < 0 else max
        e_ext = pick(epochs, key=lambda e: series[e])
        ext = series[e_ext]
        frm = (", from its peak" if self.direction < 0 else ", from its trough") if self.from_peak else ""
        text = (
            f"{name} ({mean}epochs {epochs[0]} -> {epochs[-1]}{frm}): {_num(start)} -> {_num(last)}; "
            f"{'minimum' if self.direction < 0 else 'maximum'} {_num(ext)} at epoch {e_ext}"
        )
        change = last / start - 1 if start != 0 else float("nan")
        if len(epochs) < 2 or self.direction * (last - start) <= 0:
            return _FAIL, text, change
        if abs(last - ext) <= self.tol * abs(ext) and not peak_late:
            return _PASS, text, change
        return _PARTIAL, text + (" (the turn comes after the first third of the epochs)" if peak_late else ""), change

    def check(self, summary: Mapping[str, Any]) -> tuple[str, str]:
        if self.per_run and isinstance(self.key, Runs):
            runs, note = self.key.values(summary)
            name = self.key.title()
            if len(runs) < 3:
                return _INCONCLUSIVE, _with(f"{name}: {len(runs)} converged runs (< 3)", note)
            judged = [self._judge(name, {int(e): float(v) for e, v in r}) for r in runs]
            outs = [o for o, _, _ in judged]
            m, sd = _mean_sd([c for _, _, c in judged])
            per = "; ".join(f"run {i + 1} {t[len(name) + 1 :]}" for i, (_, t, _) in enumerate(judged))
            text = _with(
                f"{name}: {outs.count(_PASS)} of {len(outs)} runs pass; relative change {_stat_text(m, sd, len(outs))}"
                f" ({per})",
                note,
            )
            if not math.isfinite(m) or abs(m) <= sd:
                return _INCONCLUSIVE, text + ": inside the runs' spread"
            if all(o == _PASS for o in outs):
                return _PASS, text
            if all(o == _FAIL for o in outs):
                return _FAIL, text
            return _PARTIAL, text
        series, note, n = self._series(summary)
        name = self.key.title() if isinstance(self.key, Runs) else _key_text(self.key)
        if series is None:
            return _INCONCLUSIVE, _with(f"{name}: {n} converged runs", note)
        out, text, _ = self._judge(name, series, f"mean of {n} runs, " if n > 1 else "")
        return out, _with(text, note)


# ============================================================================================ claims and outcomes
@dataclass(frozen=True)
class Quote:
    """What the paper says, verbatim: ``text`` at ``line`` (1-based) of ``file`` in the papers' text files."""

    file: str
    line: int
    text: str

    def cite(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Claim:
    """One headline claim of a paper (or a check of ours, ``kind="check"``), what the paper says and how our
    measurement is judged against it.

    ``quantity`` says the claim in words; ``quote`` is the paper's sentence (file and line); ``paper_value`` the
    value the paper reports, and ``paper_value_ours`` marks a value the paper does not print (read off a figure or
    recomputed by us: the page labels it ours). ``experiment`` names the registered experiment whose summary holds
    ours (``None``: no experiment measures it); ``compute`` instead computes ours on the spot (a closed form, the
    arithmetic of a table) and returns a summary-like mapping for ``checks``. ``reason`` says in one sentence why
    ours may differ (model, data, scale, recipe). ``erratum`` (non-empty: the paper's statement as printed is
    wrong, and says how) turns "not reproduced" into "paper erratum confirmed". ``protocol`` says, for a claim we
    measure only at paper scale or not at all, what its measurement takes. ``all_required`` marks a conjunctive
    claim (the paper says "all", "every", "both"): a criterion that fails makes it "not reproduced", not "partly".
    """

    id: str
    paper: str  #: citation key, docs/references.md
    where: str  #: figure / table and section of the paper
    quantity: str
    paper_value: str  #: table cells exactly; values read off a figure with their uncertainty
    checks: tuple[Criterion, ...]
    experiment: str | None
    reason: str = ""
    compute: Callable[[], Mapping[str, Any]] | None = field(default=None, compare=False)
    quote: Quote | None = None
    paper_value_ours: bool = False
    kind: str = "reproduction"  #: ``"reproduction"`` or ``"check"``
    erratum: str = ""
    protocol: str = ""
    all_required: bool = False  #: a conjunction ("all", "every", "both"): one failing criterion fails the claim

    def __post_init__(self) -> None:
        if self.kind not in ("reproduction", "check"):
            raise ValueError(f"claim {self.id}: kind must be 'reproduction' or 'check', not {self.kind!r}")

    def criterion(self) -> str:
        if not self.checks:
            return "no measurement exists"
        said = "; ".join(c.describe() for c in self.checks)
        if self.all_required and len(self.checks) > 1:
            said = f"every criterion required (the paper's statement is a conjunction; one that fails fails it): {said}"
        return said

    def paper_says(self) -> str:
        """The paper's value with its quote and source, e.g. ``"..." (000_x.txt:117); value``; a value the paper
        does not print is marked ``ours:``."""
        value = f"ours: {self.paper_value}" if self.paper_value_ours else self.paper_value
        if self.quote is None:
            return value
        return f'"{self.quote.text}" ({self.quote.cite()}); {value}'


@dataclass(frozen=True)
class Verdict:
    """The outcome of one claim on one summary: ``status`` one of :data:`OUTCOMES` (:data:`CHECK_OUTCOMES` for a
    check), ``ours`` the values read."""

    claim: Claim
    status: str
    ours: str
    tally: str = ""  #: ``"k of n criteria pass"`` for a claim judged on more than one criterion

    def to_dict(self) -> dict[str, str]:
        c = self.claim
        return {
            "claim": c.id,
            "kind": c.kind,
            "paper": c.paper,
            "where": c.where,
            "quantity": c.quantity,
            "paper_value": c.paper_says(),
            "ours": self.ours,
            "criterion": c.criterion(),
            "verdict": self.status,
            "reason": c.reason,
        }


_AS_CHECK = {REPRODUCED: HOLDS, PARTLY: PARTLY_HOLDS, NOT: FAILS, FAVOUR: HOLDS, ERRATUM: FAILS}


def combine(outcomes: Sequence[str], *, erratum: bool = False, all_required: bool = False) -> str:
    """The outcome of a reproduction claim from its criteria's outcomes (the module's rules); ``all_required``
    (a conjunctive claim): any failing criterion makes it ``not reproduced``.

    >>> combine(["pass", "pass"]), combine(["pass", "favour"]), combine(["pass", "inconclusive"])
    ('reproduced', 'differs in our favour', 'inconclusive')
    >>> combine(["fail", "inconclusive"]), combine(["fail"], erratum=True), combine(["pass", "fail"])
    ('not reproduced', 'paper erratum confirmed', 'partly')
    >>> combine(["pass", "fail", "fail", "fail"], all_required=True)
    'not reproduced'
    """
    bad = set(outcomes) - set(CRITERION_OUTCOMES)
    if bad:
        raise ValueError(f"unknown criterion outcomes {sorted(bad)}")
    if not outcomes:
        return UNMEASURED
    kinds = set(outcomes)
    if kinds == {_PASS}:
        return REPRODUCED
    if kinds <= {_PASS, _FAVOUR}:
        return FAVOUR
    if kinds <= {_PASS, _INCONCLUSIVE}:
        return INCONCLUSIVE
    if kinds <= {_FAIL, _INCONCLUSIVE} or (all_required and _FAIL in kinds):
        return ERRATUM if erratum else NOT
    return PARTLY


def tally(outcomes: Sequence[str]) -> str:
    """``"k of n criteria pass"`` (favours count as passes) for more than one criterion of which some do not
    pass; ``""`` otherwise (one criterion, or all pass: the outcome says it).

    >>> tally(["pass", "fail", "fail", "inconclusive"]), tally(["pass"]), tally(["pass", "favour"])
    ('1 of 4 criteria pass', '', '')
    """
    k = sum(o in (_PASS, _FAVOUR) for o in outcomes)
    if len(outcomes) < 2 or k == len(outcomes):
        return ""
    return f"{k} of {len(outcomes)} criteria pass"


def verdict(claim: Claim, summary: Mapping[str, Any] | None) -> Verdict:
    """Judge ``claim`` on ``summary`` (the experiment's summary; ``None``: it was not run): see the module's rules.

    >>> c = Claim("x", "[Xu & Liu 2023]", "Fig. 7", "r(VCI, MLOG)", "+0.995", (Sign("r", +1),), "vci-transfer")
    >>> verdict(c, {"r": 0.9}).status, verdict(c, {"r": -0.9}).status, verdict(c, {}).status
    ('reproduced', 'not reproduced', 'not measured')
    """
    if claim.compute is not None:
        summary = claim.compute()
    if summary is None or not claim.checks:
        if claim.protocol:
            why = f"not measured here; it takes: {claim.protocol}"
        else:
            why = "no experiment measures it" if claim.experiment is None and claim.compute is None else "not run"
        return Verdict(claim, UNMEASURED, why)
    outcomes, ours = [], []
    for check in claim.checks:
        try:
            out, text = check.check(summary)
        except _Missing as missing:
            said = missing.args[0]
            if said.endswith("absent"):
                said += " (a result file older than this measurement, or a scale that does not measure it)"
            return Verdict(claim, UNMEASURED, said)
        outcomes.append(out)
        ours.append(text)
    # a converged-runs-only note (Converged with dropped_ok) that passes says which runs were read; it is no
    # judgement of the paper's claim and does not lift the others' outcome
    judged = [o for c, o in zip(claim.checks, outcomes, strict=True)
              if not (isinstance(c, Converged) and c.dropped_ok and o == _PASS)] or outcomes  # fmt: skip
    status = combine(judged, erratum=bool(claim.erratum), all_required=claim.all_required)
    # a claim whose required runs did not all reach their target is inconclusive as a whole: a fail computed from
    # them does not outrank it
    if any(isinstance(c, Converged) and not c.dropped_ok and o == _INCONCLUSIVE for c, o in zip(
            claim.checks, outcomes, strict=True)):  # fmt: skip
        status = INCONCLUSIVE
    if claim.kind == "check":
        status = _AS_CHECK.get(status, status)
    return Verdict(claim, status, "; ".join(ours), tally(judged))


def outcome_counts(found: Sequence[Verdict]) -> dict[str, dict[str, int]]:
    """``{"reproduction": {outcome: n}, "check": {outcome: n}}`` over ``found``, every outcome listed (zeros too):
    the counts add up to the number of claims of each kind."""
    out = {"reproduction": dict.fromkeys(OUTCOMES, 0), "check": dict.fromkeys(CHECK_OUTCOMES, 0)}
    for v in found:
        out[v.claim.kind][v.status] += 1
    return out


def attach(claims: Sequence[Claim], out: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """Add the verdicts of ``claims`` (an experiment's, :attr:`nclab.experiments.catalog.Experiment.claims`) to its
    ``summary`` (key ``paper_claims``: a list of
    :meth:`Verdict.to_dict` rows), write it to ``out/summary.json`` and add the "Paper vs ours" section to
    ``out/report.html`` when the experiment wrote one. Returns the summary."""
    from nclab.io.atomic import atomic_write_text
    from nclab.io.rundir import RunDir
    from nclab.report.html import add_section

    found = verdicts(claims, summary)
    summary = {**summary, "paper_claims": [v.to_dict() for v in found]}
    atomic_write_text(out / RunDir.SUMMARY, json.dumps(summary, indent=2, default=_jsonable) + "\n")
    if (out / RunDir.REPORT).is_file():
        add_section(out / RunDir.REPORT, "Paper vs ours", claims_table_html(found))
    return summary


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)


def verdicts(claims: Sequence[Claim], summary: Mapping[str, Any] | None) -> list[Verdict]:
    """:func:`verdict` of each of ``claims`` on one experiment's ``summary``."""
    return [verdict(c, summary) for c in claims]


def check_ids(claims: Sequence[Claim]) -> None:
    """Refuse (``ValueError``) claim ids that repeat, or that do not start with their paper's :data:`ID_PREFIX`."""
    ids = [c.id for c in claims]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise ValueError(f"claim ids must be unique, repeated: {sorted(dup)}")
    bad = [c.id for c in claims if not c.id.startswith(ID_PREFIX.get(c.paper, "?") + "-")]
    if bad:
        raise ValueError(f"claim ids must start with their paper's prefix (ID_PREFIX) and '-': {bad}")


def quote(paper: str, line: int, text: str) -> Quote:
    """:class:`Quote` of ``text`` at ``line`` of ``paper``'s text file (:data:`PAPER_FILES`, by citation key)."""
    return Quote(PAPER_FILES[paper], line, text)


# ============================================================================================ protocol values
class Value(NamedTuple):
    """A protocol value and where it comes from (``"[Han et al. 2022, App. A.3]"``, or ``"ours: <reason>"``): what
    a paper states, in its package's ``paper.py``."""

    value: Any
    source: str


def ours(value: Any, reason: str) -> Value:
    """A value the paper leaves out: ours, with the reason."""
    return Value(value, f"ours: {reason}")


_OUTCOME_NOTE = (
    "Outcomes, from each claim's criteria (pass, partly, fail, inconclusive, favour), in this order: not measured = "
    "a value a criterion reads is absent; reproduced = every criterion passes; differs in our favour = every "
    "criterion passes or favours ours (ours beats the paper's direction), at least one favours; inconclusive = "
    "every criterion passes or is inconclusive, at least one inconclusive (the difference is inside the seeds' "
    "spread: |difference of means| <= the sum of the two settings' standard deviations over seeds, or too few runs "
    "reached their target); not reproduced = none passes, favours or partly passes (at least one fails), and also "
    "a conjunctive claim (the paper says all, every, both) with a failing criterion; paper erratum confirmed = "
    "not reproduced for a statement the paper prints wrongly, where its corrected form holds; partly = any other "
    "mix (some criteria pass or partly pass, others fail or are inconclusive). A claim with several criteria says "
    "how many pass beside its outcome when not all do. Checks (derived analyses, the papers' table arithmetic) "
    "hold or do not hold and are no reproductions. Thresholds the paper does not state are ours. The spread rule is "
    "a heuristic, not a significance test: at n = 3 seeds a sample sd is itself uncertain (the true sd lies between "
    "about 0.5 and 6.3 times it, 95 %), and a difference outside the sum of the two sds corresponds, for equal sds, "
    "to Welch's t > 2.45 (two-sided p about 0.07 at 4 degrees of freedom), for very unequal sds to p up to about "
    "0.23 (one sd near 0); outside means the difference is larger than the seeds' usual scatter, inside means our "
    "seeds cannot order the two settings, not that they are equal."
)


def claims_table_html(found: Sequence[Verdict]) -> str:
    """The "paper vs ours" section of a report: one row per claim (an empty list says there is none)."""
    if not found:
        return "<p>No headline claim of the papers is measured by this experiment.</p>"
    cols = ("claim", "where", "quantity", "paper_value", "ours", "criterion", "verdict")
    head = "".join(f"<th>{html.escape(c.replace('_', ' '))}</th>" for c in cols)
    rows = []
    for v in found:
        d = v.to_dict()
        d["where"] = f"{d['paper']}, {d['where']}"
        rows.append("<tr>" + "".join(f"<td>{html.escape(d[c])}</td>" for c in cols) + "</tr>")
    note = f"<p>{html.escape(_OUTCOME_NOTE)} (docs/reproductions.md)</p>"
    return f"{note}<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


# ============================================================================================ the page
#: Raw summary keys as the page's tables say them in words (the raw keys stay in each paper's collapsible details),
#: longest first where one contains another.
_OURS_WORDS: tuple[tuple[str, str], ...] = (
    ('fig1-thm3.1-bias-free["levels"]["H"]["nc1"]', "bias-free NC1"),
    ('fig1-thm3.1-bias-free["levels"]["H"]["orthogonal_frame_error"]', "bias-free OF error"),
    ('fig2-thm3.2-free-bias["levels"]["H"]["nc1"]', "free-bias NC1"),
    ('fig2-thm3.2-free-bias["levels"]["H"]["etf_gram_error"]', "free-bias ETF error"),
    ('fig2-thm3.2-free-bias["levels"]["H"]["orthogonal_frame_error"]', "free-bias OF error"),
    ('fig4-thm4.2-extended-relu["optimum_levels"]["H2"]["orthogonal_frame_error"]', "ReLU model H2 OF error"),
    ('fig4-thm4.2-extended-relu["optimum_levels"]["H1"]["orthogonal_frame_error"]', "ReLU model H1 OF error"),
    ('fig3-thm4.1-extended-linear["levels"]["H1"]["orthogonal_frame_error"]', "linear model H1 OF error"),
    ('fig4-thm4.2-extended-relu["optimum_loss"]', "objective at the optimum reached"),
    ('fig1-thm3.1-bias-free["loss"]', "GD objective"),
    ('fig2-thm3.2-free-bias["loss"]', "GD objective"),
    ('fig3-thm4.1-extended-linear["loss"]', "GD objective"),
    ("(t = ", "(closed form "),
    ('sweep[*]["pfc1"]', "MUFM PFC1, lambda 0.1 -> 4"),
    ('sweep[*]["pfc2"]', "MUFM PFC2, lambda 0.1 -> 4"),
    ('sweep[*]["alignment"]', "MUFM alignment distance, lambda 0.1 -> 4"),
    ('sweep[-1]["pfc1"]', "MUFM PFC1 at the largest lambda"),
    ('sweep[0]["pfc1"]', "MUFM PFC1 at the smallest lambda"),
    ('data["pfc1"]', "the data's PFC1"),
    ('ufm["pfc1"]', "UFM optimum's PFC1"),
    ("errors = [", "relative error per n (growing) = ["),
    ("thm3_min_over_printed", "minimum over the layers / ||H - X||^2"),
    ('predicted_monotone_violations["pfc1"]', "predicted PFC1 breaks"),
    ('predicted_monotone_violations["pfc2"]', "predicted PFC2 breaks"),
    ('predicted_monotone_violations["pfc3"]', "predicted PFC3 breaks"),
    ("pfc1_depth_violations", "PFC1 depth breaks"),
    ("pfc2_depth_violations", "PFC2 depth breaks"),
    ("pfc3_depth_violations", "PFC3 depth breaks"),
    ("max_abs_mlo_error", "largest |MLO - Table 1's|"),
    ("max_abs_mlog_error", "largest |MLOG - Table 2's|"),
    ("thm51_max_abs_error", "largest |least-squares loss - Thm 5.1's|"),
    ("thm52_min_slack", "smallest rank - Tr"),
    ("thm52_collapsed_gap", "|rank - Tr| when collapsed"),
    ("cor54_max_abs_change", "largest VCI change"),
    ("obs42_block_max_rel_change", "largest Fuzziness change, block maps"),
    ("obs42_general_min_rel_change", "smallest Fuzziness change, general maps"),
    ("max_abs_gap", "largest |L* - numerical|"),
    ("nc1_decreasing_in_depth", "NC1 decreasing with depth"),
    ("of_error_last_block", "OF error, deepest block"),
    ("train_error", "training error"),
    ("gnc2_ratio", "GNC2 / Softmax Code's"),
    ("bounds_hold", "bounds hold"),
    ("checked_numerical", "d searched numerically"),
    ("square_assignments", "square assignments"),
    ("hexagon_antipodal_pairings", "hexagon antipodal pairings"),
    ("hexagon_assignments", "hexagon distance structures"),
    ("fig5_max_gap", "largest CMF lag"),
    ("final_rel_gap_to_hardmax", "relative gap to HardMax"),
    ("K30_SC_gap_cv", "SC spacing CV"),
    ("K30_SC_rho", "SC margin"),
    ("K30_WD_gap_cv", "WD spacing CV"),
    ("max_identity_residual", "identity residual"),
    ("final_proximity_ratio", "L_perp / L_LS at the end"),
    ("lperp_over_lnc1", "L_perp / L_NC1"),
    ("orders of magnitude after TPT", "NC1 decades after TPT"),
    ("max_angle", "max-equiangularity"),
    ("self_duality", "self-duality"),
    ("ncc_mismatch", "NCC mismatch"),
    ("trace_ratio", "SqDist (trace ratio)"),
    ("within_class_cosine", "CosSim"),
    ("oblique_max_rel_error_vs_own_closed_form", "oblique flow vs its closed form (relative)"),
    ("oblique_max_rel_error_vs_other_closed_form", "oblique flow vs Prop. 2's closed form (relative)"),
    ("oblique_final_ratio", "max / min omega at the end"),
)


def worded(text: str) -> str:
    """``text`` (a verdict's ours) with the raw summary keys of :data:`_OURS_WORDS` said in words.

    >>> worded("pfc1_depth_violations = 0; fig5_max_gap = -0.036")
    'PFC1 depth breaks = 0; largest CMF lag = -0.036'
    """
    for raw, words in _OURS_WORDS:
        text = text.replace(raw, words)
    return text


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _sentence(text: str) -> str:
    text = text.strip().rstrip(".")
    return (text[:1].upper() + text[1:] + ".") if text else ""


def counts_sentence(counts: Mapping[str, Mapping[str, int]]) -> str:
    """The page's tally: reproduction claims per outcome, then checks per outcome (zeros left out)."""
    rep, chk = counts["reproduction"], counts["check"]
    plural = {  # the outcomes said of more than one
        HOLDS: "hold",
        PARTLY_HOLDS: "partly hold",
        FAILS: "do not hold",
        FAVOUR: "differ in our favour",
        ERRATUM: "paper errata confirmed",
    }

    def said(c: Mapping[str, int]) -> str:
        return ", ".join(f"{n} {o if n == 1 else plural.get(o, o)}" for o, n in c.items() if n) or "none"

    def many(n: int, noun: str) -> str:
        return f"{n} {noun}" if n == 1 else f"{n} {noun}s"

    return (
        f"{many(sum(rep.values()), 'claim')} of the papers: {said(rep)}. "
        f"{many(sum(chk.values()), 'check')} (derived analyses and consistency checks, not reproductions): "
        f"{said(chk)}."
    )


def page_markdown(
    found: Sequence[Verdict],
    papers: Sequence[tuple[str, str]],
    *,
    sources: Mapping[str, str] | None = None,
    extra: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """The per-paper part of ``docs/reproductions.md`` (markdown lines) from the verdicts ``found``.

    Parameters
    ----------
    found : sequence of Verdict
        One per claim, in page order (the papers' ``CLAIMS``).
    papers : sequence of (str, str)
        ``(citation key, title)`` in page order; the anchor of each section is its :data:`ID_PREFIX`.
    sources : mapping of str to str, optional
        Per claim id, where ours comes from (an experiment's name, "computed by the generator").
    extra : mapping of str to list of str, optional
        Per citation key, markdown lines put after that paper's tables (e.g. a table of correlations).

    Returns
    -------
    list of str
        Lines: the tally, then per paper a table of its claims (claim, the paper, ours, outcome, why), its checks
        in their own table, and the criteria and raw values in a collapsible ``<details>``.
    """
    sources = sources or {}
    extra = extra or {}
    lines = [counts_sentence(outcome_counts(found)), "", _OUTCOME_NOTE, ""]
    head = ("claim", "the paper", "ours", "outcome", "why")
    for key, title in papers:
        mine = [v for v in found if v.claim.paper == key]
        prefix = ID_PREFIX.get(key, key)
        lines += [f"(reproductions-{prefix})=", f"### {key}: {title}", ""]
        for kind, label in (("reproduction", None), ("check", "Checks (not reproductions)")):
            rows = [v for v in mine if v.claim.kind == kind]
            if not rows:
                continue
            if label:
                lines += [f"{label}:", ""]
            lines += [_row(head), _row(["---"] * len(head))]
            for v in rows:
                c = v.claim
                claim = f"**{c.id}** ({c.where}): {c.quantity}"
                outcome = f"**{v.status}** ({v.tally})" if v.tally else f"**{v.status}**"
                lines.append(_row([claim, c.paper_says(), worded(v.ours), outcome, _sentence(c.reason)]))
            lines.append("")
        if mine:
            lines += ["<details><summary>Criteria, thresholds and baselines</summary>", ""]
            for v in mine:
                src = sources.get(v.claim.id, v.claim.experiment or "none")
                raw = f" Raw: {_cell(v.ours)}." if worded(v.ours) != v.ours else ""
                lines.append(f"- **{v.claim.id}** (ours: `{src}`): {_cell(v.claim.criterion())}.{raw}")
            lines += ["", "</details>", ""]
        lines += list(extra.get(key, ()))
    return lines
