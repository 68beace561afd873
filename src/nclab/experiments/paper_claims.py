"""The five papers' headline claims, what each paper says (quoted), and the outcome of our measurement on each.

A :class:`Claim` holds what a paper says (the quoted sentence with its file and line in the papers' text files,
:class:`Quote`, and the value the paper reports), the experiment whose summary measures it with ours, and the
criteria (:class:`Criterion`) that turn our numbers into an outcome. :data:`CLAIMS` lists them all, written once
here, apart from the code that runs the experiments; :func:`verdicts` evaluates the claims of one experiment on its
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
* otherwise -> ``partly``.

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
from typing import Any

import numpy as np

from nclab.experiments.convergence import CONVERGED, CONVERGENCE, FINAL_LOSS, convergence_keys

__all__ = [
    "CHECK_OUTCOMES",
    "CLAIMS",
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
    "Sign",
    "Trend",
    "Verdict",
    "attach",
    "claims_for",
    "claims_table_html",
    "convergence_keys",
    "lookup",
    "outcome_counts",
    "page_markdown",
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


Source = Key | Runs


def _read(summary: Mapping[str, Any], source: Source) -> tuple[float | None, str, str]:
    """``(value, text, note)`` of one key or of the mean of a :class:`Runs` (``None``: too few runs converged)."""
    if isinstance(source, Runs):
        vals, note = source.values(summary)
        if len(vals) < max(source.min_runs, 1):
            return None, f"{source.title()}: {len(vals)} converged runs (< {max(source.min_runs, 1)})", note
        m, sd = _mean_sd([float(x) for x in vals])
        return m, f"{source.title()} = {_stat_text(m, sd, len(vals))}", note
    v = float(lookup(summary, source))
    return v, f"{_key_text(source)} = {_num(v)}", ""


def _src_text(source: Source) -> str:
    return source.describe() if isinstance(source, Runs) else _key_text(source)


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
    ``inconclusive``, and fewer than 3 converged runs too."""

    key: Source
    sign: int
    spread: bool = False
    basis: str = ""

    def describe(self) -> str:
        extra = "; |mean| <= sd over >= 3 seeds is inconclusive" if self.spread else ""
        return self._said(f"{_src_text(self.key)} {'> 0' if self.sign > 0 else '< 0'}{extra}")

    def check(self, summary: Mapping[str, Any]) -> tuple[str, str]:
        v, text, note = _read(summary, self.key)
        if v is None:
            return _INCONCLUSIVE, _with(text, note)
        if self.spread and isinstance(self.key, Runs):
            vals, _ = self.key.values(summary)
            if len(vals) < 3:
                return _INCONCLUSIVE, _with(f"{text}: fewer than 3 converged runs", note)
            if abs(v) <= _mean_sd([float(x) for x in vals])[1]:
                return _INCONCLUSIVE, _with(f"{text}: inside the seeds' spread", note)
        return (_PASS if v * self.sign > 0 else _FAIL), _with(text, note)


@dataclass(frozen=True)
class Converged(Criterion):
    """Every run listed under ``summary[key]`` (a list of run labels) reached its target (its ``"{run}:
    converged"`` key, :func:`convergence_keys`): pass; otherwise ``inconclusive``, naming the runs that did not and
    why. For claims computed over all of an experiment's runs (e.g. a correlation over settings), where a run that
    did not converge cannot be left out of the statistic."""

    key: Key = "run_labels"
    basis: str = ""

    def describe(self) -> str:
        return self._said(f"every run of {_key_text(self.key)} reached its target (else inconclusive)")

    def check(self, summary: Mapping[str, Any]) -> tuple[str, str]:
        labels = lookup(summary, self.key)
        bad = [f"{r}: {summary.get(f'{r}: {CONVERGENCE}', 'did not converge')}" for r in labels
               if not lookup(summary, f"{r}: {CONVERGED}")]  # fmt: skip
        if not bad:
            return _PASS, f"all {len(labels)} runs reached their target"
        shown = "; ".join(bad[:4]) + (f"; and {len(bad) - 4} more" if len(bad) > 4 else "")
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
    first epoch after initialisation). For two settings over seeds use :class:`Compare`."""

    a: Source
    b: Source
    basis: str = ""

    def describe(self) -> str:
        return self._said(f"{_src_text(self.a)} < {_src_text(self.b)}")

    def check(self, summary: Mapping[str, Any]) -> tuple[str, str]:
        (a, ta, na), (b, tb, nb) = _read(summary, self.a), _read(summary, self.b)
        if a is None or b is None:
            return _INCONCLUSIVE, _with(f"{ta} vs {tb}", na, nb)
        text = f"{_num(a)} vs {_num(b)}" if not (na or nb or isinstance(self.a, Runs)) else f"{ta} vs {tb}"
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
        return (_PASS if bad == 0 else _FAIL), f"{_num(v.tolist())} ({bad} violations)"


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
    round -> partial; the same sign in both groups (no flip) -> fail. Judged as one flip, not two signs."""

    a: Key
    b: Key
    signs: tuple[int, int]
    basis: str = ""

    def __post_init__(self) -> None:
        if self.signs[0] * self.signs[1] >= 0:
            raise ValueError(f"Flip needs opposite signs, not {self.signs}")

    def describe(self) -> str:
        s = ["> 0" if x > 0 else "< 0" for x in self.signs]
        return self._said(f"sign flips: {_key_text(self.a)} {s[0]} and {_key_text(self.b)} {s[1]}")

    def check(self, summary: Mapping[str, Any]) -> tuple[str, str]:
        a, b = float(lookup(summary, self.a)), float(lookup(summary, self.b))
        text = f"{_key_text(self.a)} = {_num(a)}, {_key_text(self.b)} = {_num(b)}"
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
    """

    key: Source
    direction: int
    tol: float = 0.05
    skip_init: bool = True
    basis: str = ""

    def describe(self) -> str:
        word = "keeps falling" if self.direction < 0 else "keeps rising"
        ext = "minimum" if self.direction < 0 else "maximum"
        start = "the first epoch after initialisation" if self.skip_init else "the first measured epoch"
        return self._said(
            f"{_src_text(self.key)} {word}: last vs {start} in that direction, and within {_num(self.tol)} "
            f"(relative) of its {ext} after it (partly: moved in that direction but turned back)"
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

    def check(self, summary: Mapping[str, Any]) -> tuple[str, str]:
        series, note, n = self._series(summary)
        name = self.key.title() if isinstance(self.key, Runs) else _key_text(self.key)
        if series is None:
            return _INCONCLUSIVE, _with(f"{name}: {n} converged runs", note)
        epochs = [e for e in sorted(series) if e > 0 or not self.skip_init]
        if len(epochs) < 2:
            raise _Missing(f"{name}: fewer than 2 measured epochs after the initialisation")
        start, last = series[epochs[0]], series[epochs[-1]]
        pick = min if self.direction < 0 else max
        e_ext = pick(epochs, key=lambda e: series[e])
        ext = series[e_ext]
        mean = f"mean of {n} runs, " if n > 1 else ""
        text = _with(
            f"{name} ({mean}epochs {epochs[0]} -> {epochs[-1]}): {_num(start)} -> {_num(last)}; "
            f"{'minimum' if self.direction < 0 else 'maximum'} {_num(ext)} at epoch {e_ext}",
            note,
        )
        if self.direction * (last - start) <= 0:
            return _FAIL, text
        if abs(last - ext) <= self.tol * abs(ext):
            return _PASS, text
        return _PARTIAL, text


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
    measure only at paper scale or not at all, what its measurement takes.
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

    def __post_init__(self) -> None:
        if self.kind not in ("reproduction", "check"):
            raise ValueError(f"claim {self.id}: kind must be 'reproduction' or 'check', not {self.kind!r}")

    def criterion(self) -> str:
        return "; ".join(c.describe() for c in self.checks) if self.checks else "no measurement exists"

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


def combine(outcomes: Sequence[str], *, erratum: bool = False) -> str:
    """The outcome of a reproduction claim from its criteria's outcomes (the module's rules).

    >>> combine(["pass", "pass"]), combine(["pass", "favour"]), combine(["pass", "inconclusive"])
    ('reproduced', 'differs in our favour', 'inconclusive')
    >>> combine(["fail", "inconclusive"]), combine(["fail"], erratum=True), combine(["pass", "fail"])
    ('not reproduced', 'paper erratum confirmed', 'partly')
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
    if kinds <= {_FAIL, _INCONCLUSIVE}:
        return ERRATUM if erratum else NOT
    return PARTLY


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
    status = combine(outcomes, erratum=bool(claim.erratum))
    if claim.kind == "check":
        status = _AS_CHECK.get(status, status)
    return Verdict(claim, status, "; ".join(ours))


def outcome_counts(found: Sequence[Verdict]) -> dict[str, dict[str, int]]:
    """``{"reproduction": {outcome: n}, "check": {outcome: n}}`` over ``found``, every outcome listed (zeros too):
    the counts add up to the number of claims of each kind."""
    out = {"reproduction": dict.fromkeys(OUTCOMES, 0), "check": dict.fromkeys(CHECK_OUTCOMES, 0)}
    for v in found:
        out[v.claim.kind][v.status] += 1
    return out


def attach(experiment: str, out: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """Add the verdicts of ``experiment``'s claims to its ``summary`` (key ``paper_claims``: a list of
    :meth:`Verdict.to_dict` rows), write it to ``out/summary.json`` and add the "Paper vs ours" section to
    ``out/report.html`` when the experiment wrote one. Returns the summary."""
    from nclab.io.atomic import atomic_write_text
    from nclab.io.rundir import RunDir
    from nclab.report.html import add_section

    found = verdicts(experiment, summary)
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


def claims_for(experiment: str) -> tuple[Claim, ...]:
    """The claims whose measurement is experiment ``experiment``'s (an unknown name has none)."""
    return tuple(c for c in CLAIMS if c.experiment == experiment)


def verdicts(experiment: str, summary: Mapping[str, Any] | None) -> list[Verdict]:
    """:func:`verdict` of each claim of ``experiment`` on its ``summary``."""
    return [verdict(c, summary) for c in claims_for(experiment)]


_OUTCOME_NOTE = (
    "Outcomes: reproduced = every criterion passes; partly = some do; not reproduced = none does; inconclusive = "
    "the difference is inside the seeds' spread (|difference of means| <= the sum of the two settings' standard "
    "deviations over seeds) or too few runs reached their target; differs in our favour = ours beats the paper's "
    "direction; paper erratum confirmed = the paper's statement as printed fails where its corrected form holds; "
    "not measured = a value the criterion reads is absent. Checks (derived analyses, the papers' table arithmetic) "
    "hold or do not hold and are no reproductions. Thresholds the paper does not state are ours."
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

    def said(c: Mapping[str, int]) -> str:
        return ", ".join(f"{n} {o}" for o, n in c.items() if n) or "none"

    return (
        f"{sum(rep.values())} claims of the papers: {said(rep)}. "
        f"{sum(chk.values())} checks (derived analyses and consistency checks, not reproductions): {said(chk)}."
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
        One per claim, in :data:`CLAIMS` order.
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
                lines.append(_row([claim, c.paper_says(), v.ours, f"**{v.status}**", _sentence(c.reason)]))
            lines.append("")
        if mine:
            lines += ["<details><summary>Criteria, thresholds and baselines</summary>", ""]
            for v in mine:
                src = sources.get(v.claim.id, v.claim.experiment or "none")
                lines.append(f"- **{v.claim.id}** (ours: `{src}`): {_cell(v.claim.criterion())}.")
            lines += ["", "</details>", ""]
        lines += list(extra.get(key, ()))
    return lines


# ============================================================================================ the papers' values
#: [Xu & Liu 2023, Table 2] cells: Fuzziness, Sqr Dist, Cos Sim, VCI, Accuracy (%), MLOG per pretraining run.
XU2023_TABLE2: dict[str, dict[str, tuple[float, ...]]] = {
    "tau": {
        "setting": (0.1, 0.2, 0.4, 0.6, 0.8, 1.0),
        "nc1": (15.93, 15.64, 13.45, 12.62, 11.83, 11.46),
        "trace_ratio": (2.829, 2.534, 2.141, 1.923, 1.742, 1.625),
        "within_class_cosine": (0.4634, 0.4856, 0.512, 0.5371, 0.5589, 0.5767),
        "vci": (0.796, 0.7849, 0.7552, 0.7406, 0.728, 0.7201),
        "accuracy": (75.4, 76.64, 77.53, 77.72, 77.83, 77.88),
        "mlog": (0.3250, 0.2704, 0.2029, 0.1711, 0.1343, 0.1161),
    },
    "lambda": {
        "setting": (2.5, 3.75, 5.0, 7.5, 10.0),
        "nc1": (13.15, 14.31, 14.51, 15.22, 13.92),
        "trace_ratio": (2.78, 3.803, 4.783, 7.287, 9.964),
        "within_class_cosine": (0.4097, 0.3556, 0.3551, 0.2794, 0.172),
        "vci": (0.7216, 0.719, 0.7099, 0.6936, 0.6652),
        "accuracy": (77.52, 77.31, 77.29, 77.46, 77.65),
        "mlog": (0.0440, -0.0063, -0.0507, -0.1539, -0.2375),
    },
}
#: [Xu & Liu 2023, Table 1] cells: downstream accuracies (%) on Pets, Flowers, Aircraft, Cars, DTD, Cifar10,
#: Food101, Cifar100, Caltech, SUN397, then MLO, per pretraining run (same order as Table 2).
XU2023_TABLE1: dict[str, tuple[tuple[float, ...], ...]] = {
    "tau": (
        (90.8, 95.03, 58.85, 64.73, 74.47, 93.1, 75.45, 77.14, 84.9, 62.44, 1.445),
        (91.52, 95.25, 57.5, 64.1, 74.41, 92.89, 75.41, 77.65, 85.58, 63.28, 1.459),
        (91.64, 94.66, 57.67, 64.42, 74.63, 92.58, 74.97, 77.1, 85.59, 63.3, 1.441),
        (91.74, 94.14, 57.54, 61.56, 76.22, 92.42, 74.86, 76.6, 85.2, 63.51, 1.421),
        (92.35, 93.52, 55.64, 61.6, 75.37, 92.37, 74.2, 76.07, 84.49, 62.74, 1.39),
        (91.7, 93.68, 55.37, 60.14, 73.99, 91.9, 74.42, 75.96, 85.82, 62.98, 1.375),
    ),
    "lambda": (
        (90.86, 92.01, 51.07, 55.14, 74.36, 91.79, 72.9, 75.44, 85.19, 62.01, 1.282),
        (90.87, 90.79, 47.81, 50.44, 76.01, 91.89, 72.19, 75.31, 82.97, 60.98, 1.22),
        (90.51, 90.03, 45.12, 50.52, 74.41, 91.63, 71.84, 74.64, 82.63, 60.38, 1.174),
        (89.33, 86.54, 44.52, 46.87, 73.14, 91.64, 71.19, 74.13, 81.23, 58.55, 1.08),
        (89.92, 83.6, 43.39, 43.55, 72.5, 91.43, 70.29, 73.76, 78.25, 56.9, 1.008),
    ),
}


def _pearson(x: Sequence[float], y: Sequence[float]) -> float:
    return float(np.corrcoef(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))[0, 1])


def xu2023_paper_r(group: str, metric: str, against: str = "mlog") -> float:
    """Pearson r over the runs of ``group`` of Table 2's ``metric`` with MLOG (``against="mlog"``), with Table 1's
    MLO (``"mlo"``), or with MLOG controlling for logit(p_0) (``"partial"``) [Xu & Liu 2023, Tables 1-2].

    >>> round(xu2023_paper_r("tau", "vci"), 3), round(xu2023_paper_r("lambda", "vci"), 3)
    (0.995, 0.975)
    """
    t = XU2023_TABLE2[group]
    x = t[metric]
    if against == "mlog":
        return _pearson(x, t["mlog"])
    if against == "mlo":
        return _pearson(x, [row[-1] for row in XU2023_TABLE1[group]])
    from nclab.experiments.transfer import partial_pearson  # the one definition, also behind our partial_r_p0

    p = np.asarray(t["accuracy"]) / 100
    return partial_pearson(x, t["mlog"], np.log(p / (1 - p)))


def _xu2023_arithmetic() -> dict[str, float]:
    """The largest |MLO - Table 1's MLO| and |MLOG - Table 2's MLOG| over the 11 runs, recomputed from the
    tables' accuracies by :mod:`nclab.transfer.scores`."""
    from nclab.transfer.scores import mean_log_odds, mlog

    d_mlo = d_mlog = 0.0
    for group, rows in XU2023_TABLE1.items():
        for row, p0, paper_mlog in zip(
            rows, XU2023_TABLE2[group]["accuracy"], XU2023_TABLE2[group]["mlog"], strict=True
        ):
            d_mlo = max(d_mlo, abs(mean_log_odds(row[:-1], percent=True) - row[-1]))
            d_mlog = max(d_mlog, abs(mlog(row[:-1], p0, percent=True) - paper_mlog))
    return {"max_abs_mlo_error": d_mlo, "max_abs_mlog_error": d_mlog}


def _r(group: str, metric: str, against: str = "mlog") -> str:
    return f"{xu2023_paper_r(group, metric, against):+.3f}"


_XU = "[Xu & Liu 2023]"
_TB = "[Tirer & Bruna 2022]"
_WANG = "[Wang et al. 2024]"
_JIANG = "[Jiang et al. 2024]"
_HAN = "[Han et al. 2022]"

_TRANSFER_REASON = (
    "ours: a 5-class Fashion-MNIST CNN with an 8-dimensional feature layer ((K - 1) / d = 0.5, the paper's ratio), "
    "30 epochs on 100 images per class, 3 seeds, probed on held-out Fashion-MNIST classes, digits and rotated "
    "Fashion-MNIST; the paper: ImageNet ResNet50s (d = 2048, K = 1000), 10 probe datasets"
)
_XU_FIG7_REASON = (
    "ours: each r is over 4 setting means (tau 0.1 / 0.25 / 0.5 / 1, lambda 2.5 / 5 / 7.5 / 10; the paper has 6 "
    "and 5) of a 5-class Fashion-MNIST CNN with d = 8 ((K - 1) / d = 0.5 as the paper's), 30 epochs on 100 images "
    "per class, 3 seeds, probed on held-out classes, digits and rotated images, and tau = 0.1 plateaus at 7-11 % "
    "training error, against ImageNet ResNet50s probed on 10 datasets"
)
_FMNIST_REASON = (
    "ours: a small CNN on 1,000 Fashion-MNIST images for 80 epochs, 3 seeds per loss, the paper's recipe with the "
    "MSE lr 0.18045 from its grid, not VGG / ResNet / DenseNet on five full datasets for 350 epochs at swept lrs"
)
_XU_STANDIN_REASON = (
    "ours: a small CNN (d = 128, K = 10: p/K = 12.8) on 1,000 Fashion-MNIST images, 80 epochs with the "
    "[Han et al. 2022] recipe, MSE and CE, 3 seeds each, against ResNet50 on ImageNet-1K (p/K = 2.048)"
)
_XU_FIG3_REASON = (
    "ours: a small CNN (d = 128, K = 10: p/K = 12.8) on 1,000 Fashion-MNIST images, 80 epochs, 2 recipes (MSE "
    "and CE with the [Han et al. 2022] recipe, 3 seeds each) against ResNet18 on CIFAR-10 (p/K = 51.2) in 3 CE "
    "recipes; Fuzziness is read as NC1 = Fuzziness / K (the same trend), and SqDist and CosSim, for which the paper "
    "claims no consistent trend, are not judged"
)
_VCI_TARGET = (
    "target ours: at most 5 % training error at the end (paper scale: a pretraining accuracy of at least the paper's "
    "lowest, 75.4 %)"
)
_TREND_BASIS = "baseline: the first epoch after initialisation; tolerance 5 % (ours)"
_ROBUST_BASIS = (
    "baseline: the robustness at the zero-error epoch; improvement = last / at zero error - 1, > 0 as the paper's "
    "median and mean"
)
_ROBUST_REASON = (
    "; robustness as [Papyan et al. 2020, Fig. 8]: DeepFool [Moosavi-Dezfooli et al. 2016] (overshoot 0.02, at "
    "most 50 steps, L2) on 200 fixed test images (20 per class), relative to the standardised input's norm, inputs "
    "DeepFool cannot flip left out and counted (the summary's robustness unflipped keys)"
)
_DECOMP_BASIS = "decades each term falls from the first epoch after initialisation to the last (mean over seeds)"
_NEGLIGIBLE = "threshold ours: 'negligible' read as < 0.1"
_TPT_BASIS = "baseline: the value at the zero-error epoch; decades = log10(at zero error / last)"
#: The runs of each loss of ``fashion-mnist-cnn`` at the tiny and cpu scales (seed 0 keeps the plain label).
_FM_LABELS = {loss: (loss, f"{loss} seed1", f"{loss} seed2") for loss in ("mse", "ce")}


def _fm(loss: str, metric: str) -> Runs:
    """The converged runs of ``loss`` in ``fashion-mnist-cnn``'s summary, one metric."""
    return Runs(_FM_LABELS[loss], metric, name=f"{loss.upper()} {metric}")


def _q(paper: str, line: int, text: str) -> Quote:
    return Quote(PAPER_FILES[paper], line, text)


#: The 15 MSE runs of ``mse-nc-benchmarks`` ([Han et al. 2022, App. A.2]: DATASET/NET/mse, NET as ``build_model``
#: names; the experiment's labels).
_HAN2022_MSE_RUNS: tuple[str, ...] = tuple(
    f"{ds}/{net}/mse"
    for ds, nets in (
        ("mnist", ("vgg11_bn", "resnet18", "densenet")),
        ("fashion-mnist", ("vgg11_bn", "resnet18", "densenet")),
        ("svhn", ("vgg13_bn", "resnet34", "densenet")),
        ("cifar10", ("vgg11_bn", "resnet50", "densenet")),
        ("stl10", ("vgg11_bn", "resnet18", "densenet121")),
    )
    for net in nets
)

#: The cpu stand-in's runs of [Jiang et al. 2024] by figure, role and seed, as ``gnc-trained`` names them
#: (:func:`nclab.experiments.reproductions.gnc_of_runs`, ``assignment_of_runs``, ``cmf_of_runs``).
_FIG2_SMALL = tuple(f"fig2 tau0.05 seed{i}" for i in range(3))
_FIG2_LARGE = tuple(f"fig2 tau0.5 seed{i}" for i in range(3))


def _fig4(role: str, seeds: int = 3) -> tuple[str, ...]:
    return tuple(f"fig4 {role} seed{i}" for i in range(seeds))


def _fig5(head: str) -> tuple[str, ...]:
    return tuple(f"fig5 {head} seed{i}" for i in range(3))


#: The five papers' headline claims we judge, and our checks, in paper order.
CLAIMS: tuple[Claim, ...] = (
    # ------------------------------------------------------------------------------ [Xu & Liu 2023]
    Claim(
        "xu2023-fig1-vb-split", _XU, "Fig. 1, Sec. 4.1",
        "during training the within-class variation in V_B (the span of the class means) falls while the part in "
        "V_B-perp keeps rising: (1/KN) sum ||Proj(h_ki - mu_k)||^2 per epoch",
        "V_B part falls, V_B-perp part keeps rising (ResNet50, ImageNet; read off the figure)",
        tuple(
            Trend(_fm(loss, f"within-class {part} part per epoch"), d, basis=_TREND_BASIS)
            for loss in ("mse", "ce")
            for part, d in (("V_B", -1), ("V_B-perp", +1))
        ),
        "fashion-mnist-cnn",
        _XU_STANDIN_REASON + "; the larger p/K leaves V_B-perp more room, and the paper trains with CE only",
        quote=_q(_XU, 117, "although the ... part steadily decreases, the ... part keeps increasing in the training "
                 "process"),
    ),
    Claim(
        "xu2023-fig3-trends", _XU, "Fig. 3, Sec. 6.1",
        "Fuzziness and VCI fall during training in every recipe",
        "Fuzziness and VCI decrease in all 3 recipes (ResNet18, CIFAR-10; read off the figure)",
        tuple(Trend(_fm(loss, f"{m} per epoch"), -1, basis=_TREND_BASIS) for m in ("nc1", "vci")
              for loss in ("mse", "ce")),
        "fashion-mnist-cnn", _XU_FIG3_REASON,
        quote=_q(_XU, 265, "On the other hand, Fuzziness and VCI show a decreasing trend across these settings."),
    ),
    Claim(
        "xu2023-fig4-mse-vs-ce", _XU, "Fig. 4, Sec. 6.1",
        "MSE-trained networks end more collapsed than CE-trained ones by all four metrics (Fuzziness, SqDist, "
        "CosSim, VCI)",
        "MSE more collapsed than CE by all four metrics (ResNet50, ImageNet; read off the figure)",
        (
            *(Compare(_fm("mse", f"{m} last"), _fm("ce", f"{m} last"), basis="lower is more collapsed")
              for m in ("nc1", "trace_ratio", "vci")),
            Compare(_fm("ce", "within_class_cosine last"), _fm("mse", "within_class_cosine last"),
                    basis="a higher within-class cosine is more collapsed"),
        ),
        "fashion-mnist-cnn",
        _XU_STANDIN_REASON + "; each loss at its own lr (MSE 0.18045, CE 0.0679)",
        quote=_q(_XU, 267, "Additionally, it is observed that neural networks trained with MSE loss exhibit a higher "
                 "level of collapse compared to those trained with CE loss"),
    ),
    Claim(
        "xu2023-fig6-test-collapse", _XU, "Fig. 6, Sec. 6.2",
        "VCI falls on the test split as on the train split (test collapse)",
        "train and test VCI both decrease during training (ResNet18 / CIFAR-10, ResNet50 and DeiT-S / ImageNet-1K; "
        "read off the figure)",
        tuple(Trend(_fm(loss, f"{split}vci per epoch"), -1, basis=_TREND_BASIS) for split in ("", "test ")
              for loss in ("mse", "ce")),
        "fashion-mnist-cnn",
        _XU_STANDIN_REASON + "; test VCI on 1,000 test images",
        quote=_q(_XU, 237, "Figure 6: Train Collapse and Test Collapse both happen for VCI."),
    ),
    Claim(
        "xu2023-fig4-small-pk", _XU, "Fig. 4, Sec. 6.1",
        "at small p/K (ResNet50 on ImageNet, p/K = 2.048) all four metrics fall during training",
        "all four metrics decrease (read off the figure)", (), None,
        "paper scale only: our stand-ins have p/K >= 12.8",
        quote=_q(_XU, 267, "all evaluated metrics consistently demonstrate a decreasing curve"),
        protocol="ResNet50s trained on ImageNet-1K (p/K = 2.048) with the paper's 3 recipes, the four metrics per "
        "epoch on a 50,000-image training subset; no experiment here",
    ),
    Claim(
        "xu2023-fig5-deit", _XU, "Fig. 5, Sec. 6.1",
        "vision transformers (DeiT-S, DeiT-T on ImageNet-1K) show variability collapse by all four metrics",
        "all four metrics decrease (read off the figure)", (), None,
        "paper scale only: no transformer is trained here",
        quote=_q(_XU, 233, "All of the four metrics indicate variability collapse happens for this setting."),
        protocol="DeiT-S and DeiT-T trained on ImageNet-1K, the four metrics per epoch; no experiment here",
    ),
    Claim(
        "xu2023-fig7-vci", _XU, "Fig. 7 / Table 2, Sec. 6.3",
        "VCI correlates positively with transfer (MLOG) in both groups of pretraining runs (tau and lambda)",
        f"r(VCI, MLOG): tau {_r('tau', 'vci')}, lambda {_r('lambda', 'vci')} (recomputed from Table 2; Fig. 7 legends)",
        (Sign(("pearson_r", "tau/vci"), +1), Sign(("pearson_r", "lambda/vci"), +1),
         Converged(basis=_VCI_TARGET)),
        "vci-transfer", _XU_FIG7_REASON,
        quote=_q(_XU, 289, "However, a strong positive correlation consistently holds between VCI and "
                 "transferability."),
    ),
    Claim(
        "xu2023-fig7-others-flip", _XU, "Fig. 7 / Table 2, Sec. 6.3",
        "the correlation of Fuzziness, SqDist and CosSim with transfer flips sign between the tau and the lambda "
        "group (only VCI keeps its sign)",
        f"r(metric, MLOG), tau / lambda: Fuzziness {_r('tau', 'nc1')} / {_r('lambda', 'nc1')}; SqDist "
        f"{_r('tau', 'trace_ratio')} / {_r('lambda', 'trace_ratio')}; CosSim {_r('tau', 'within_class_cosine')} / "
        f"{_r('lambda', 'within_class_cosine')} (recomputed from Table 2)",
        (
            Flip(("pearson_r", "tau/nc1"), ("pearson_r", "lambda/nc1"), (+1, -1)),
            Flip(("pearson_r", "tau/trace_ratio"), ("pearson_r", "lambda/trace_ratio"), (+1, -1)),
            Flip(("pearson_r", "tau/within_class_cosine"), ("pearson_r", "lambda/within_class_cosine"), (-1, +1)),
            Converged(basis=_VCI_TARGET),
        ),
        "vci-transfer", _XU_FIG7_REASON,
        quote=_q(_XU, 289, "The bottom row of Figure 7 shows that for the three previous metrics, the correlation "
                 "changes from positive to negative, or vice versa."),
    ),
    Claim(
        "xu2023-tables-vci-mlo", _XU, "Tables 1-2, Sec. 6.3",
        "derived analysis (ours, not a claim of the paper): r(VCI, MLO), raw transfer without MLOG's -logit p_0, "
        "per group, on the same runs as xu2023-fig7-vci",
        f"tau {_r('tau', 'vci', 'mlo')}, lambda {_r('lambda', 'vci', 'mlo')} (recomputed from Tables 1-2)",
        (Sign(("pearson_r_mlo", "tau/vci"), +1), Sign(("pearson_r_mlo", "lambda/vci"), +1)), "vci-transfer",
        "the same 24 runs as xu2023-fig7-vci, 4 setting means per r", paper_value_ours=True, kind="check",
    ),
    Claim(
        "xu2023-tables-vci-partial", _XU, "Tables 1-2, Sec. 6.3",
        "derived analysis (ours, not a claim of the paper): partial r(VCI, MLOG | logit p_0) per group",
        f"tau {_r('tau', 'vci', 'partial')}, lambda {_r('lambda', 'vci', 'partial')} (recomputed from Tables 1-2)",
        (Sign(("partial_r_p0", "tau/vci"), +1), Sign(("partial_r_p0", "lambda/vci"), +1)), "vci-transfer",
        "a partial r over 4 setting means with one covariate has 1 residual degree of freedom: it carries almost no "
        "information", paper_value_ours=True, kind="check",
    ),
    Claim(
        "xu2023-tables-arithmetic", _XU, "Tables 1-2, Eq. (6)",
        "consistency of the paper's tables: MLO and MLOG recomputed from their accuracies (closed form)",
        "MLO and MLOG columns to the tables' rounding (5e-4)",
        (Bound("max_abs_mlo_error", 5e-4), Bound("max_abs_mlog_error", 5e-4)), None,
        "computed here from the table cells by nclab.transfer.scores", compute=_xu2023_arithmetic, kind="check",
        quote=_q(_XU, 513, "Table 1: Raw data of downstream classification experiments in Section 6.3."),
    ),
    # ------------------------------------------------------------------------------ [Tirer & Bruna 2022]
    *(
        Claim(
            f"tirer2022-fig{i}-gd-optimum", _TB, f"Fig. {i}, Sec. 6 ({thm})",
            f"GD objective at the end vs the closed-form optimum L*, {model}",
            "GD reaches the closed-form global minimiser (NC1-NC3 -> 0 read off the figure, log scale)",
            (Close((fig, key), target_key=(fig, "L_star"), rtol=1e-8, partly_rtol=0.05),), "ufm-figures",
            "K = 4, d = 20, n = 50, lambda = 5e-3 (the paper's sizes are lost from its text); GD lr 0.1, 1e5 steps"
            + extra,
            quote=Quote(PAPER_FILES[_TB], 112, "For each setting that is considered in the theorems of Sections 3 "
                        "and 4 we tune a gradient descent scheme to reach a global minimizer."),
        )
        for i, fig, thm, model, key, extra in (
            (1, "fig1-thm3.1-bias-free", "Thm 3.1", "bias-free UFM", "loss", ""),
            (2, "fig2-thm3.2-free-bias", "Thm 3.2", "UFM with free bias", "loss", ""),
            (3, "fig3-thm4.1-extended-linear", "Thm 4.1", "3-factor linear UFM", "loss", ""),
            (
                4, "fig4-thm4.2-extended-relu", "Thm 4.2", "3-factor ReLU UFM", "optimum_loss",
                "; plain GD stops above L* when one sample's ReLU pre-activations all die (dead_samples: its h1 "
                "gets no gradient, only weight decay); moving that sample's h1 to its class mean and continuing GD "
                "reaches L* (revived_gap), our tuning of the scheme, which the paper tunes too; optimum_loss is "
                "that point's objective (GD's own when no sample died)",
            ),
        )
    ),
    Claim(
        "tirer2022-thm31-32-structure", _TB, "Thms 3.1, 3.2, Figs. 1-2, Sec. 3",
        "NC1 and the structure of the class means at the GD optimum: an orthogonal frame without bias (OF error, "
        "eq. (27)), a simplex ETF, and no OF, with a free bias",
        "bias-free: features collapse to an orthogonal frame; free bias: to a simplex ETF (theorem)",
        (
            Bound(("fig1-thm3.1-bias-free", "levels", "H", "nc1"), 1e-8, basis="ours: 1e-8; the theorem says 0"),
            Bound(("fig1-thm3.1-bias-free", "levels", "H", "orthogonal_frame_error"), 1e-6, basis="ours: 1e-6"),
            Bound(("fig2-thm3.2-free-bias", "levels", "H", "nc1"), 1e-8, basis="ours: 1e-8"),
            Bound(("fig2-thm3.2-free-bias", "levels", "H", "etf_gram_error"), 1e-6, basis="ours: 1e-6"),
            Bound(("fig2-thm3.2-free-bias", "levels", "H", "orthogonal_frame_error"), 0.1, below=False,
                  basis="an ETF, not an OF: an exact K = 4 ETF has OF error 0.52"),
        ),
        "ufm-figures", "the figures' runs (K = 4, d = 20, n = 50, lambda = 5e-3), at the end of GD",
        quote=Quote(PAPER_FILES[_TB], 51, "while in the unregularized-bias case the features and weights of any "
                    "global minimizer are aligned in a simplex ETF structure"),
    ),
    Claim(
        "tirer2022-thm42-relu-two-levels", _TB, "Thm 4.2, Fig. 5 (ReLU model), Sec. 6",
        "NC2 to an orthogonal frame (OF error, eq. (27)) of the two feature levels at the optimum: with the ReLU "
        "the deep level H2 collapses to an OF and the shallow H1 does not; without it (Thm 4.1) both do",
        "ReLU model: H2 collapses to an OF (Thm 4.2), H1 keeps its own structure; linear model: H1 and H2 both "
        "collapse to OFs (Thm 4.1)",
        (
            Bound(("fig4-thm4.2-extended-relu", "optimum_levels", "H2", "orthogonal_frame_error"), 1e-3, partly=0.1,
                  basis="ours: 1e-3, partly 0.1; the theorem says 0"),
            Bound(("fig4-thm4.2-extended-relu", "optimum_levels", "H1", "orthogonal_frame_error"), 0.1, below=False,
                  basis="ours: H1 at least 0.1 from an OF, where H2 is within 1e-3"),
            Bound(("fig3-thm4.1-extended-linear", "levels", "H1", "orthogonal_frame_error"), 1e-3, partly=0.1,
                  basis="the contrast: the linear model's H1 collapses to an OF as Thm 4.1 says; ours: 1e-3"),
        ),
        "ufm-figures",
        "the structure half only, at L* (the ReLU model's revived point); the rate half (how fast each level's NC1 "
        "falls) is in the figures' csv files, not judged; same sizes as the figure claims",
        quote=Quote(PAPER_FILES[_TB], 127, "adding the ReLU nonlinearity to the model better distinguishes between "
                    "the behavior of the features in the two levels, both in the rate of the collapse and in its "
                    "structure."),
    ),
    Claim(
        "tirer2022-thm3-thresholds", _TB, "Thms 3.1, 3.2, 4.1, Secs. 3-4",
        "closed-form optimum L* across the lambda threshold vs numerical L-BFGS",
        "zero optimum exactly above the threshold (theorem)",
        (Bound("max_abs_gap", 1e-8),), "ufm-threshold-sweep", "K = 4, n = 3, d = 8, 25 lambdas per model",
        quote=_q(_TB, 219, "Summarizing our finding, we have that if then the minimizer is (because the singular "
                 "values of the matrices are zero)"),
    ),
    Claim(
        "tirer2022-thm51-attenuation", _TB, "Thm 5.1, Sec. 5, App. F",
        "||W_hat - f W*|| / ||W*|| against n: it shrinks as n grows (the theorem's limit) and its log-log slope",
        "a limit, n -> infinity (App. F); slope -1/2 (derived: the CLT rate of the sample covariances the limits "
        "rest on; the paper prints no rate)",
        (
            Monotone("errors", -1, basis="the paper's limit: the error shrinks as n grows"),
            Close("slope", -0.5, atol=0.05, partly_rtol=0.5, basis="ours: the CLT rate, +-0.05 (partly +-50 %)"),
        ),
        "ufm-thm51", "K = 4, d = 20, sigma = 0.3, 10 draws per n",
        quote=Quote(PAPER_FILES[_TB], 350, "Based on the law of large numbers, as well as the convergence of "
                    "sample covariance matrices of random variables with finite fourth moment (Vershynin, 2012), "
                    "we have the following limits"),
        paper_value_ours=True,
    ),
    Claim(
        "tirer2022-fig5-10-resnet-depth", _TB, "Figs. 5 / 10, Sec. 6",
        "NC1 per ResNet stage (MSE, no bias) and the deepest features' structure, networks at zero training error",
        "NC1 decreases monotonically with depth; the deepest features approach an orthogonal frame (read off the "
        "figures: NC2 to OF -> ~0)",
        (
            Close("nc1_decreasing_in_depth", True),
            Bound("of_error_last_block", 0.1, partly=0.5, basis="ours: 0.1, partly 0.5; a simplex ETF has 0.32"),
        ),
        "resnet-depth",
        "cpu scale: only the 8x8 digits (1,300 training images), torchvision-layout ResNet18 and ResNet34 at width "
        "8, 45 epochs; the claims read the networks that reached zero training error (the summary's 'converged'; "
        "the others are named in 'dropped' with their training error), the OF check the deepest of them; the "
        "paper: ResNet18 (width 64) on MNIST and CIFAR-10",
        quote=Quote(PAPER_FILES[_TB], 93, "(1) structured collapse appears only in the deepest features; (2) "
                    "decrease in within-class variability is obtained monotonically along the depth of the network"),
    ),
    # ------------------------------------------------------------------------------ [Wang et al. 2024]
    Claim(
        "wang2024-fig2-3-depth-order", _WANG, "Figs. 2-3, Sec. IV-A (Conjecture 1)",
        "depth order of PFC1, PFC2, PFC3 at the end of training",
        "PFC1 and PFC2 decrease, PFC3 increases towards 1 with depth (read off the figures, 5 datasets)",
        (Bound("pfc1_depth_violations", 0), Bound("pfc2_depth_violations", 0), Bound("pfc3_depth_violations", 0)),
        "geodesic-digits",
        "ours: a fully connected ResNet as the paper's MNIST net (l. 323), but 64 wide with 6 blocks on the 8x8 "
        "digits, full-batch SGD for 1,500 steps (the paper: 1000 wide on MNIST, 350 epochs); our net is not in the "
        "terminal phase the conjecture presupposes (last layer: NCC accuracy 0.983 < 1, PFC2 0.899, up from 0.796 "
        "at the input)",
        quote=Quote(PAPER_FILES[_WANG], 347, "features of each layer tend to collapse to their class means "
                    "progressively, (centered) class means of each layer tend to collapse to the simplex ETF "
                    "progressively, and NCC accuracy rates of each layer tend to collapse to 1 progressively."),
    ),
    Claim(
        "wang2024-fig3-geodesic", _WANG, "Fig. 3, Sec. IV-A",
        "measured PFC1-3 per layer (at its relative depth) and predicted along the straight line from the input "
        "to the last layer's features: breaks of monotonicity (PFC1, PFC2 must not rise, PFC3 must not fall)",
        "both the observed and the predicted curves are monotonic (all five datasets)",
        (
            Bound("pfc1_depth_violations", 0), Bound("pfc2_depth_violations", 0), Bound("pfc3_depth_violations", 0),
            Bound(("predicted_monotone_violations", "pfc1"), 0),
            Bound(("predicted_monotone_violations", "pfc2"), 0),
            Bound(("predicted_monotone_violations", "pfc3"), 0),
        ),
        "geodesic-digits",
        "same net as the depth order (not in the terminal phase: its last layer's PFC2 is above the input's, so "
        "a straight line to it rises too); the prediction on 101 points of the line, the curves in the summary "
        "('measured', 'predicted')",
        quote=Quote(PAPER_FILES[_WANG], 352, "Both observations and predictions are monotonic on various datasets"),
    ),
    Claim(
        "wang2024-fig4-mufm-between", _WANG, "Fig. 4, Thm 4, Sec. IV-B",
        "PFC1 of the MUFM optimum vs the data's and the UFM optimum's",
        "between the data (red line) and NC (UFM: 0); read off the figure",
        (
            Monotone(("sweep", "*", "pfc1"), +1),
            Order(("sweep", -1, "pfc1"), ("data", "pfc1")),
            Order(("ufm", "pfc1"), ("sweep", 0, "pfc1")),
        ),
        "mufm-tradeoff", "the paper's sizes (K = 5, n = 100, d = 20); exact alternating solver instead of GD",
        quote=Quote(PAPER_FILES[_WANG], 367, "The solution of UFM exhibits NC but MUFM doesn’t."),
    ),
    Claim(
        "wang2024-fig5-tradeoff", _WANG, "Fig. 5, Sec. IV-B",
        "PFC1, PFC2 and the alignment ||H/||H|| - X/||X|||| as lambda/lambda_W grows from 0.1 to 4",
        "PFC1 and PFC2 rise (away from NC), the alignment distance falls (read off the figure)",
        (
            Monotone(("sweep", "*", "pfc1"), +1),
            Monotone(("sweep", "*", "pfc2"), +1),
            Monotone(("sweep", "*", "alignment"), -1),
        ),
        "mufm-tradeoff", "the paper's sizes; exact alternating solver instead of GD",
        quote=Quote(PAPER_FILES[_WANG], 369, "The first two figures show that increasing ... makes the solution of "
                    "MUFM away from the NC solution"),
    ),
    Claim(
        "wang2024-table1-fmnist", _WANG, "Table I (Fashion-MNIST row) with Figs. 2-3",
        "PFC depth order of the Table I Fashion-MNIST network (conv ResNet, its last blocks of equal width) at the "
        "end of training",
        "as Conjecture 1: PFC1 and PFC2 decrease, PFC3 increases with depth (read off Figs. 2-3 (b))",
        tuple(Bound(("pfc_by_run", "fashion-mnist-pfc_resnet seed0", f"pfc{j}_depth_violations"), 0)
              for j in (1, 2, 3)),
        "pfc-table1",
        "paper scale only (pfc-table1, GPU); a registered run of this row cut to 10 epochs (1.07 % training error, "
        "not the terminal phase; docs/reproductions/gpu/pfc-table1-fashion-mnist-e10.summary.json) had PFC2 and "
        "PFC3 monotone and PFC1 rising with depth (4 violations)",
        quote=Quote(PAPER_FILES[_WANG], 347, "Empirical evidence supports the PFC conjecture when training ResNets."),
        protocol="the Table I Fashion-MNIST ResNet, CE, SGD momentum 0.9, wd 5e-4, batch 128, 350 epochs, lr 0.01 / "
        "10 at epochs 117 and 233 (nclab experiment run pfc-table1 --scale paper --runs fashion-mnist/pfc_resnet)",
    ),
    # ------------------------------------------------------------------------------ [Jiang et al. 2024]
    Claim(
        "jiang2024-fig2-trained-gnc", _JIANG, "Figs. 2, B.3, Sec. 2",
        "GNC1, GNC2 (rho of W over the Softmax Code optimum), GNC3 and training error at small tau, and GNC2 at a "
        "larger tau (ResNet18, CIFAR-100, d = 10), mean over seeds",
        "GNC1, GNC3 -> 0 and rho(W) -> the Softmax Code's at small tau (read off the figure)",
        (
            Bound(Runs(_FIG2_SMALL, "train_error"), 0.0, basis="zero training error, the terminal phase"),
            Bound(Runs(_FIG2_SMALL, "gnc1"), 0.05, partly=0.2, basis="ours: 0.05, partly 0.2"),
            Bound(Runs(_FIG2_SMALL, "gnc3"), 0.05, partly=0.2, basis="ours: 0.05, partly 0.2"),
            Bound(Runs(_FIG2_SMALL, "gnc2_ratio"), 0.9, below=False, partly=0.5,
                  basis="ours: within 10 % of the best known Softmax Code's margin, partly 50 %"),
            Compare(Runs(_FIG2_LARGE, "gnc2_ratio"), Runs(_FIG2_SMALL, "gnc2_ratio"),
                    basis="the paper's trend: the small tau nearer the optimum than tau = 0.5"),
        ),
        "gnc-trained",
        "ours (cpu): Fashion-MNIST (K = 10, 100 images per class, no augmentation), a small CNN with a linear "
        "d = 3 bottleneck and the paper's cosine head, CE at tau = 0.05 and 0.5, AdamW 60 epochs (SGD did not reach "
        "zero training error on CPU), 3 seeds each; the paper: ResNet18 on CIFAR-100 (K = 100, d = 10), SGD 200 "
        "epochs. In the first cpu run (one seed each) the tau = 0.05 run ended at training error 0.001 (one image), "
        "and the tau = 0.5 run was the closer to the optimum (gnc2_ratio 0.443 vs 0.267), against the paper's trend",
        quote=Quote(PAPER_FILES[_JIANG], 117, "we can observe that both ... converge to ... converges towards the "
                    "spherical code with relatively small temperature"),
    ),
    Claim(
        "jiang2024-fig3-bounds", _JIANG, "Fig. 3, Thm 3.9, Sec. 3",
        "optimal rho_one-vs-rest vs d (K = 1000) between the Thm 3.9 bounds", "bounds hold (theorem)",
        (Close("bounds_hold", True), Bound("checked_numerical", 4, below=False)), "gnc-bounds-vs-d",
        "theory half only (the empirical half is the next claim): at K = 1000 the cpu scale searches d = 3, 4, 8, "
        "16 (one start, 600 steps; paper scale adds 32, 64), d = 2 and d >= K - 1 are closed forms; a searched "
        "margin is a lower bound on the optimum",
        quote=_q(_JIANG, 237, "and its upper/lower bounds (in Theorem 3.9)"),
    ),
    Claim(
        "jiang2024-fig3-accuracy-tracks-rho", _JIANG, "Fig. 3, Sec. 3",
        "test accuracy of ResNet-50 on ImageNet against the feature dimension d, beside the optimal rho(d)",
        "the optimal distance's curve is closely aligned with the test accuracy's; both fall slowly as d decreases",
        (), None, "paper scale only: ImageNet-sized training per d; no cpu stand-in (a 1000-class dataset)",
        quote=Quote(PAPER_FILES[_JIANG], 241, "the curve of the optimal distance is closely aligned with the curve "
                    "of testing performance"),
        protocol="ResNet-50 on ImageNet (K = 1000) with a d-dimensional feature layer and the cosine head at small "
        "tau, one run per d of Fig. 3's grid, test accuracy against the Softmax Code margin of gnc-bounds-vs-d",
    ),
    Claim(
        "jiang2024-fig4-assignment-counts", _JIANG, "Fig. 4, App. B.5, Sec. 4",
        "class assignments of the optimal codes: the square's (Thm 3.3) and the hexagon's, counted as antipodal "
        "pairings (which classes sit opposite)",
        "square: three distinct class assignments (l. 245); hexagon: fifteen distinct class assignments up to "
        "permutation (l. 497)",
        (Close("square_assignments", 3), Close("hexagon_antipodal_pairings", 15)),
        "gnc-assignment",
        "combinatorics (exact, brute force); the paper's fifteen equals the number of antipodal pairings; counted "
        "as distance structures up to the hexagon's 12 symmetries there are 60 (the check below)",
        quote=Quote(PAPER_FILES[_JIANG], 497, "there are fifteen distinct class assignments up to permutation."),
    ),
    Claim(
        "jiang2024-hexagon-distance-structures", _JIANG, "App. B.5, Thm 3.3",
        "hexagon: class-to-vertex assignments up to the code's symmetries (distinct distance structures)",
        "60 = 15 antipodal pairings x 4 (ours: the paper counts the 15 pairings only)",
        (Close("hexagon_assignments", 60),), "gnc-assignment", "brute force over the 720 assignments",
        kind="check", paper_value_ours=True,
    ),
    Claim(
        "jiang2024-fig4-assignment-accuracy", _JIANG, "Fig. 4, Sec. 4",
        "test accuracy (d = 2, 4 classes in two similar pairs) of the fixed square with the similar pairs antipodal "
        "vs the other two assignments, the learned head vs those two, and whether the learned code keeps the "
        "similar pairs adjacent (converged runs, mean over seeds)",
        "learned 91.45 %; fixed A1 91.90 %, A2 92.13 %, A3 89.95 % (A3: Cat and Dog far apart, the lowest); the "
        "learned code keeps Cat and Dog close in 5 of 5 trials",
        (
            *(Compare(Runs(_fig4("similar antipodal"), "test accuracy"), Runs(_fig4(other), "test accuracy"),
                      basis="the paper: the similar-antipodal assignment below the others")
              for other in ("fixed other 1", "fixed other 2")),
            *(Compare(Runs(_fig4("learned", 4), "test accuracy"), Runs(_fig4(other), "test accuracy"), "~", 0.01,
                      basis="ours: within 1 point (the paper's learned head is 0.45 / 0.68 points below them)")
              for other in ("fixed other 1", "fixed other 2")),
            Bound(Runs(_fig4("learned", 4), "similar antipodal"), 0.0,
                  basis="the paper: no learned run puts a similar pair opposite (the fraction of converged runs)"),
        ),
        "gnc-trained",
        "ours (cpu): 4 Fashion-MNIST classes in two similar pairs (T-shirt/Shirt, Sneaker/Ankle boot, as the "
        "paper's Cat/Dog, Automobile/Truck), the Fig. 2 stand-in's CNN with a d = 2 bottleneck, tau = 0.05, 500 "
        "images per class, AdamW 30 epochs, 4000 test images, 3 seeds per fixed head and 4 for the learned one "
        "(a d = 2 learned head can stall with two classes on one arc: in the first cpu run seed 0 ended at 27.5 % "
        "training error); runs above 5 % training error at the end are dropped and named (the fixed similar-antipodal "
        "runs end at 2.8-3.2 %, the others at <= 0.45 %); the paper: ResNet18 on CIFAR-10, "
        "SGD 800 epochs, 5 trials",
        quote=Quote(PAPER_FILES[_JIANG], 249, "we observe that the case where Cat and Dog are far apart achieves a "
                    "testing accuracy of"),
    ),
    Claim(
        "jiang2024-figB6-six-class-assignment", _JIANG, "Fig. B.6, App. B.5",
        "test accuracy (d = 2, six classes in three similar pairs) of the fixed hexagon with the similar pairs "
        "antipodal vs two other assignments, and the learned head",
        "similar pairs antipodal 86.37 % vs 91.60 / 91.95 %; learned 91.82 %; the gap between assignments grows "
        "from 2.18 (four classes) to 5.58 points",
        (), None,
        "not measured at cpu scale: one six-class d = 2 Fashion-MNIST run (T-shirt/Shirt, Sneaker/Ankle boot, "
        "Pullover/Coat, as the paper's pairs) took 20-24 s on the 2-core machine and ended at 2-4 % training error "
        "(100-200 images per class, 30 epochs); the 12 runs (4 heads x 3 seeds) exceed the experiment's 2-minute "
        "allowance",
        quote=Quote(PAPER_FILES[_JIANG], 501, "the case where Cat-Dog, Automobile-Truck and Deer-Horse pairs are "
                    "far apart achieves a testing accuracy of"),
        protocol="ResNet18 with d = 2 on CIFAR-10's {automobile, cat, deer, dog, horse, truck}, the learned cosine "
        "head and the hexagon fixed in three of its 15 pairings (the similar pairs antipodal, and two others), "
        "5 trials each, test accuracy (the paper-scale learned run: gnc-trained figB6/cifar10/resnet18/d2)",
    ),
    Claim(
        "jiang2024-fig5-cmf", _JIANG, "Fig. 5, Sec. 5",
        "CMF classifier vs learned, trained from scratch: final test accuracy (mean over converged seeds) and the "
        "furthest the CMF curve falls behind the learned one",
        "comparable performance (no numbers given)",
        (
            Compare(Runs(_fig5("cmf"), "test accuracy"), Runs(_fig5("learned"), "test accuracy"), "~", 0.01,
                    favour=+1, basis="ours: within 1 point; CMF better outside the seeds' spread is in our favour"),
            Bound("fig5_max_gap", 0.03, partly=0.05,
                  basis="ours: the CMF curve never more than 3 points behind (partly 5)"),
        ),
        "gnc-trained",
        "from-scratch half only (the fine-tuning half is the next claim). Ours (cpu): the Fig. 2 stand-in "
        "(Fashion-MNIST, 100 images per class, 1000 test images, the small CNN with a d = 3 bottleneck: K > d + 1 "
        "as the paper's K = 100, d = 20) at the paper's tau = 0.1 and beta = 0.9, AdamW 60 epochs, measured every "
        "5, with the CMF head and with the learned cosine head, 3 seeds each; the paper: ResNet18 / DenseNet121 / "
        "ResNeXt50 on CIFAR-100, SGD",
        quote=Quote(PAPER_FILES[_JIANG], 267, "the approach with CMF classifier achieves comparable performance to "
                    "the classical training protocols."),
    ),
    Claim(
        "jiang2024-fig5-cmf-finetune", _JIANG, "Sec. 5",
        "fine-tuning a pretrained network with the CMF head vs the standard fine-tuning: ID (CIFAR-10) and OOD "
        "(STL-10) test accuracy",
        "CMF 98.00 / 90.67 % vs standard 97.00 / 87.42 % (ID / OOD)",
        (), None, "paper scale only: it needs a MoCo-pretrained ResNet50 and CIFAR-10 / STL-10",
        quote=Quote(PAPER_FILES[_JIANG], 278, "Our experiments show that the approach with CMF classifier achieves "
                    "slightly better ID accuracy"),
        protocol="the setting of Kumar et al. (2022): a MoCo v2 ResNet50 fine-tuned on CIFAR-10 with the CMF head "
        "and with a randomly initialised linear head (standard), ID test accuracy on CIFAR-10 and OOD on STL-10",
    ),
    Claim(
        "jiang2024-figC1-tau-limit", _JIANG, "Fig. C.1, Lemma 3.1, App. C",
        "max cosine of the CE-UFM optimum at the smallest tau vs the HardMax (Softmax Code) optimum, (d, K) = (3, 7)",
        "approaches the HardMax value as tau -> 0 (read off the figure)",
        (Bound("final_rel_gap_to_hardmax", 2e-3, partly=0.05, basis="ours: 0.2 %, partly 5 %"),), "gnc-tau-maxcos",
        "tau grid down to 5e-4 (the paper's grid is unstated)",
        quote=Quote(PAPER_FILES[_JIANG], 611, "The figure demonstrates that as the temperature parameter ... the "
                    "blue line converges to the black line"),
    ),
    Claim(
        "jiang2024-figB1-d2-codes", _JIANG, "Figs. B.1 c/d, B.2, App. B",
        "d = 2, K = 30 UFM codes: spacing of the spherical-constraint (SC) code, its margin, and weight decay's (WD)",
        "SC: a regular 30-gon (uniform, rho = 1 - cos(2 pi / 30)); WD: not uniform (read off the figure)",
        (
            Bound("K30_SC_gap_cv", 1e-4),
            Close("K30_SC_rho", target_key="K30_SC_optimum", rtol=1e-4),
            Bound("K30_WD_gap_cv", 0.1, below=False),
        ),
        "gnc-d2-codes", "UFM with n = 1; WD lambda = 5e-3 (unstated in the paper)",
        quote=Quote(PAPER_FILES[_JIANG], 433, "using spherical constraint produces equal-length and uniformly "
                    "distributed features"),
    ),
    Claim(
        "jiang2024-figB1-trained-wd-vs-sc", _JIANG, "Fig. B.1 a/b, App. B.2",
        "a trained network with d = 2, K = 30: class means' lengths and spacing, and the classifier-to-mean length "
        "ratios, with weight decay (WD) vs the spherical constraint (SC)",
        "WD: class means of unequal length, not equally spaced, ratios ||w_k|| / ||h_k|| vary; SC: equal length, "
        "uniform spacing (read off the figure)",
        (), None,
        "not measured at cpu scale: a 30-class dataset is not at hand, and a 10-class d = 2 Fashion-MNIST stand-in "
        "did not fit (10.7 % training error after 60 epochs, the Fig. 2 stand-in's note)",
        quote=Quote(PAPER_FILES[_JIANG], 429, "The vectors of class-mean features"),
        protocol="ResNet18 with d = 2 on the first 30 classes of CIFAR-100, once with weight decay and a linear "
        "head, once with the spherical constraint (cosine head); class means and classifier rows at the end",
    ),
    # ------------------------------------------------------------------------------ [Han et al. 2022]
    Claim(
        "han2022-fig2-ufm-decomposition", _HAN, "Fig. 2, Thms 1-2, Sec. 2",
        "the MSE loss splits exactly into L_NC1 + L_NC2/3 + L_perp, and L_perp becomes negligible against "
        "L_LS = L_NC1 + L_NC2/3 (joint GD on the unconstrained-features model)",
        "identity exact (theorem); L_perp negligible in the terminal phase (read off the figure)",
        (Bound("max_identity_residual", 1e-10), Bound("final_proximity_ratio", 0.1, partly=1.0,
                                                       basis="threshold ours: 'negligible' read as < 0.1")),
        "mse-decomposition-ufm", "ours: unconstrained features, where the paper measures trained networks",
        quote=_q(_HAN, 166, "Starting from an early epoch in training, ... becomes negligible compared to the "
                 "dominant term"),
    ),
    Claim(
        "han2022-fig2-net-lperp", _HAN, "Fig. 2, Sec. 2",
        "in a trained network L_perp / L_NC1 is negligible from zero training error on",
        "L_perp negligible against L_NC1 from an early epoch (read off the figure, log scale: < ~0.1)",
        (Bound(_fm("mse", "lperp_over_lnc1 at zero-error epoch"), 0.1, basis=_NEGLIGIBLE),
         Bound(_fm("mse", "lperp_over_lnc1 last"), 0.1, basis=_NEGLIGIBLE)),
        "fashion-mnist-cnn", _FMNIST_REASON, paper_value_ours=True,
        quote=_q(_HAN, 166, "Starting from an early epoch in training, ... becomes negligible compared to the "
                 "dominant term"),
    ),
    Claim(
        "han2022-fig2-nc23-fastest", _HAN, "Fig. 2, Sec. 2",
        "of the three terms of the MSE decomposition, L_NC2/3 falls fastest during training (trained network)",
        "L_NC2/3 diminishes the fastest among all the terms (read off the figure)",
        (Order(_fm("mse", "L_NC1 decades"), _fm("mse", "L_NC23 decades"), basis=_DECOMP_BASIS),
         Order(_fm("mse", "L_perp decades"), _fm("mse", "L_NC23 decades"), basis=_DECOMP_BASIS)),
        "fashion-mnist-cnn", _FMNIST_REASON,
        quote=_q(_HAN, 166, "Note that ... diminishes the fastest among all the terms"),
    ),
    Claim(
        "han2022-fig7-nc1-tpt", _HAN, "Fig. 7, Sec. 4",
        "NC1 keeps falling after zero training error, by orders of magnitude (MSE)",
        "NC1 falls by 1-3 decades during the terminal phase on a log axis (read off the figure)",
        (Bound(_fm("mse", "orders of magnitude after TPT"), 1.0, below=False, partly=0.5,
               basis="threshold ours: 'orders of magnitude' as >= 1 decade, partly >= 0.5 (a factor 3.2); "
               "baseline: NC1 at the zero-error epoch"),),
        "fashion-mnist-cnn", _FMNIST_REASON, paper_value_ours=True,
        quote=_q(_HAN, 432, "Results demonstrate that last-layer features undergo variability collapse."),
    ),
    Claim(
        "han2022-figs3-5-nc2", _HAN, "Figs. 3-5, Sec. 4",
        "NC2 progresses after zero training error (MSE): equinorm, equiangularity and max-equiangularity of the "
        "class means and classifiers keep falling",
        "all three measures fall during the terminal phase (read off the figures)",
        tuple(Sign(_fm("mse", f"{m} decades after TPT"), +1, spread=True, basis=_TPT_BASIS)
              for m in ("equinorm", "equiangularity", "max_angle")),
        "fashion-mnist-cnn", _FMNIST_REASON, paper_value_ours=True,
        quote=_q(_HAN, 426, "Results demonstrate that last-layer features and classifiers approach equiangularity."),
    ),
    Claim(
        "han2022-fig6-nc3", _HAN, "Fig. 6, Sec. 4",
        "NC3 progresses after zero training error (MSE): the classifiers and the class means approach self-duality",
        "the self-duality distance falls during the terminal phase (read off the figure)",
        (Sign(_fm("mse", "self_duality decades after TPT"), +1, spread=True, basis=_TPT_BASIS),),
        "fashion-mnist-cnn", _FMNIST_REASON, paper_value_ours=True,
        quote=_q(_HAN, 430, "Results demonstrate that last-layer features and classifiers approach self-duality."),
    ),
    Claim(
        "han2022-fig8-nc4", _HAN, "Fig. 8, Sec. 4",
        "NC4 (MSE): the network's decisions converge to the nearest-class-centre rule's",
        "the NCC mismatch falls to ~0 (read off the figure)",
        (Bound(_fm("mse", "ncc_mismatch last"), 0.01, partly=0.05,
               basis="threshold ours: <= 1 % of training images disagree at the end (partly 5 %)"),),
        "fashion-mnist-cnn", _FMNIST_REASON, paper_value_ours=True,
        quote=_q(_HAN, 434, "Results demonstrate that classifier decisions converge to those of the nearest class "
                 "center decision rule."),
    ),
    Claim(
        "han2022-table1-test-accuracy", _HAN, "Table 1, App. A.6",
        "training past zero error improves test accuracy (MSE, our stand-in)",
        "median +0.962, mean +1.833 points over 15 nets; Fashion ResNet 93.55 -> 93.76 %",
        (Sign(_fm("mse", "test accuracy gain after zero error"), +1, spread=True,
              basis="baseline: the test accuracy at the zero-error epoch; points"),),
        "fashion-mnist-cnn",
        _FMNIST_REASON + "; 1,000 test images resolve 0.1 point against the paper's Fashion gains of 0.19-2.39 "
        "points, and zero error comes near the first lr drop (1/3 of the epochs), after which little changes",
        quote=_q(_HAN, 405, "The median improvement is 0.962 percentage points; the mean is 1.833 percentage points."),
    ),
    Claim(
        "han2022-table1-paper-protocol", _HAN, "Table 1, App. A.6",
        "training past zero error improves test accuracy, 15 MSE nets (5 datasets x VGG / ResNet / DenseNet)",
        "median +0.962, mean +1.833 points; Acc. 0-Error / Final (%): MNIST VGG 99.23 / 99.59, ResNet 99.16 / "
        "99.70, DenseNet 99.62 / 99.70; Fashion VGG 92.76 / 92.95, ResNet 93.55 / 93.76, DenseNet 90.56 / 92.95; "
        "SVHN VGG 89.35 / 93.91, ResNet 85.18 / 92.65, DenseNet 95.61 / 95.23; CIFAR10 VGG 83.13 / 84.54, ResNet "
        "75.43 / 76.39, DenseNet 91.77 / 91.78; STL10 VGG 60.43 / 67.24, ResNet 59.35 / 60.56, DenseNet 58.74 / "
        "60.41",
        (
            MedianGain(
                tuple(
                    (f"{run} seed0: test error at zero-error epoch", f"{run} seed0: test error last")
                    for run in _HAN2022_MSE_RUNS
                ),
                "median(test error at zero error - test error last)",
            ),
        ),
        "mse-nc-benchmarks", "paper scale only (GPU); STL10's DenseNet201 is run as DenseNet121",
        quote=_q(_HAN, 405, "The median improvement is 0.962 percentage points; the mean is 1.833 percentage points."),
        protocol="mse-nc-benchmarks --scale paper: the 15 MSE nets for 350 epochs each on a GPU",
    ),
    Claim(
        "han2022-fig10-mse-vs-ce", _HAN, "Fig. 10, Sec. 4",
        "MSE-trained networks collapse faster than CE-trained ones: NC1 falls by more decades over the run",
        "MSE tends to achieve faster activation collapse than CE (read off the figure)",
        (Compare(_fm("ce", "train nc1 decades"), _fm("mse", "train nc1 decades"),
                 basis="decades NC1 falls over the whole run, first measured epoch (the same initialisation for "
                 "both losses) to the last"),),
        "fashion-mnist-cnn", _FMNIST_REASON + "; each loss at its own lr", paper_value_ours=True,
        quote=_q(_HAN, 438, "Networks trained with MSE loss tend to achieve faster activation collapse than those "
                 "trained with CE."),
    ),
    Claim(
        "han2022-fig9-robustness-tpt", _HAN, "Fig. 9, App. A.6",
        "training past zero error makes the network more robust (MSE): DeepFool's mean relative perturbation "
        "||r(x)|| / ||x|| on test images, last epoch over the zero-error epoch, is > 1",
        "median improvement 0.1762, mean 0.9278 (last epoch over the first zero-error epoch, over its "
        "dataset-network pairs; the paper does not define \"improvement\": read here as the ratio minus 1)",
        (Sign(_fm("mse", "robustness improvement after zero error"), +1, spread=True, basis=_ROBUST_BASIS),),
        "fashion-mnist-cnn", _FMNIST_REASON + _ROBUST_REASON,
        quote=_q(_HAN, 436, "The median improvement in the robustness measure in the last epoch over the first epoch "
                 "achieving zero training error is 0.1762; the mean improvement is 0.9278."),
    ),
    Claim(
        "han2022-fig11-mse-vs-ce-robustness", _HAN, "Fig. 11, App. A.6",
        "MSE-trained networks are more robust than CE-trained ones: DeepFool's mean relative perturbation "
        "||r(x)|| / ||x|| on test images at the last epoch, MSE above CE",
        "better under MSE, sometimes by several orders of magnitude (read off the figure; no number printed)",
        (Compare(_fm("ce", "robustness last"), _fm("mse", "robustness last"),
                 basis="DeepFool's mean relative perturbation at the last epoch, the same 200 test images for every "
                 "run"),),
        "fashion-mnist-cnn",
        _FMNIST_REASON + "; each loss at its own lr, the two losses from the same initialisation (the paper "
        "compares its MSE networks with [Papyan et al. 2020]'s CE ones)" + _ROBUST_REASON,
        paper_value_ours=True,
        quote=_q(_HAN, 440, "Robustness tends to be better—sometimes several magnitudes better—when the networks are "
                 "trained with MSE loss than with CE loss."),
    ),
    Claim(
        "han2022-fig12-test-collapse", _HAN, "Fig. 12, App. A.8",
        "NC1 falls on test data too, more slowly than on train data, and ends above it",
        "still visible on test data, much slower than on train, and larger at the last epoch (read off the figure)",
        tuple(
            check
            for loss in ("mse", "ce")
            for check in (
                Order(_fm(loss, "test nc1 last"), _fm(loss, "test nc1 first measured"),
                      basis="baseline: the initialisation, where test NC1 is its largest"),
                Order(_fm(loss, "test nc1 decades"), _fm(loss, "train nc1 decades")),
                Order(_fm(loss, "nc1 last"), _fm(loss, "test nc1 last")),
            )
        ),
        "fashion-mnist-cnn", _FMNIST_REASON + "; test NC1 on 1,000 test images with their own class means",
        quote=_q(_HAN, 442, "On the test data, activation collapse still visibly occurs on multiple dataset-network "
                 "combinations"),
    ),
    Claim(
        "han2022-fig12-difficulty", _HAN, "Fig. 12, App. A.8",
        "the test NC1 at the last epoch is roughly monotonic with the difficulty of the dataset",
        "read off the figure (5 datasets)", (), None, "paper scale only: needs the five datasets",
        quote=_q(_HAN, 442, "Also interesting is that the value at the last epoch is roughly monotonic"),
        protocol="mse-nc-benchmarks --scale paper: test NC1 of the 15 MSE nets at their last epoch, ordered by the "
        "datasets' test error",
    ),
    Claim(
        "han2022-thm3-central-path", _HAN, "Thm 3, Cor. 1-2, Sec. 3",
        "on the central path the renormalised gradient flow drives every SNR singular value omega_j to infinity at "
        "equal rates (Neural Collapse)",
        "all omega_j -> infinity at equal rates (theorem)",
        (
            Bound("oblique_max_rel_error_vs_own_closed_form", 1e-6),
            Bound("oblique_final_ratio", 1.01, basis="threshold ours: max / min omega within 1 %"),
        ),
        "central-path-flow", "ours: the closed form of the paper's (oblique) flow as corrected in docs/theory.md",
        quote=_q(_HAN, 178, "Then, Neural Collapse emerges on the renormalized features with explicit dynamics of the "
                 "flow given in Proposition 2"),
    ),
    Claim(
        "han2022-prop2-as-printed", _HAN, "Prop. 2, Lemma 5, Sec. 3",
        "the paper's flow (oblique projection) follows Prop. 2's closed form c1 log w + c2 w^2 + c3 w^4 = a + t",
        "the flow follows Prop. 2 (as printed)",
        (Bound("oblique_max_rel_error_vs_other_closed_form", 1e-3),), "central-path-flow",
        "a paper error (docs/theory.md): Prop. 2 holds for the orthogonal projection only; the oblique flow runs "
        "faster than Lemma 5 says",
        quote=_q(_HAN, 256, "Continually renormalized gradient flow on the central path (Equation 5) induces the "
                 "following closed-form dynamics"),
        erratum="Prop. 2's closed form is that of the orthogonal projection's flow, not of the paper's oblique one",
    ),
)  # fmt: skip


def _check_claims() -> None:
    ids = [c.id for c in CLAIMS]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise ValueError(f"claim ids must be unique, repeated: {sorted(dup)}")


_check_claims()
