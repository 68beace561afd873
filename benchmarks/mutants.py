"""Mutation testing of the core numerical modules: does the suite fail when the math is wrong?

Each mutant changes one operator or constant of one source file (``+`` -> ``-``, ``<`` -> ``<=``, ``0`` -> ``1``,
``min`` -> ``max``, ...). The mutated file is written into a temporary copy of ``src`` (the worktree is never
touched), and the test files mapped to that module (``TESTS`` below) run against the copy with ``pytest -x`` under a
per-mutant timeout. A mutant is *killed* when the tests fail, *timeout* when they run past the limit (counted as
killed: the change broke something), *survived* when they pass. Mutants listed in ``mutants_equivalent.txt`` (with
the reason they cannot change any result) are left out of the score.

    python benchmarks/mutants.py                          # every mutant of every module (hours)
    python benchmarks/mutants.py --max-mutants 40 --seed 0 # a reproducible sample of 40 per module
    python benchmarks/mutants.py --per-package 15 --seed 0 # 15 per package, drawn from all its modules
    python benchmarks/mutants.py --module stats/class_stats.py --list   # show the mutants, run nothing

Not part of ``make test``; ``make mutants`` runs the sampled form.
"""

from __future__ import annotations

import argparse
import ast
import copy
import dataclasses
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PKG = SRC / "nclab"
EQUIVALENT_FILE = Path(__file__).resolve().parent / "mutants_equivalent.txt"

# module (relative to src/nclab) -> the test files that exercise it. The files are the ones whose failures a bug in
# the module should cause; running the whole suite per mutant would take minutes each.
TESTS: dict[str, list[str]] = {
    "stats/accumulator.py": ["tests/test_accumulators.py", "tests/test_stats.py"],
    "stats/class_stats.py": [
        "tests/test_stats.py",
        "tests/test_accumulators.py",
        "tests/test_stats_lanes.py",
        "tests/test_stats_float32_compute.py",
    ],
    "stats/_lanes.py": ["tests/test_stats_lanes.py", "tests/test_stats_float32_compute.py", "tests/test_stats.py"],
    "stats/ncc.py": ["tests/test_stats_ncc_ann.py", "tests/test_metrics_gnc_ncc.py"],
    "stats/geodesic_ncc.py": ["tests/test_theory_geodesic.py"],
    "stats/paired.py": ["tests/test_stats_paired.py"],
    "stats/path.py": ["tests/test_theory_geodesic.py", "tests/test_accumulators.py"],
    "metrics/_linalg.py": ["tests/test_metrics_variability.py", "tests/test_metrics_means_geometry.py"],
    "metrics/cdnv.py": ["tests/test_metrics_cosine_probe_cdnv.py"],
    "metrics/collapse_report.py": [
        "tests/test_metrics_means_geometry.py",
        "tests/test_metrics_near_collapse.py",
        "tests/test_cli.py::test_collapse_report_warns_on_imbalance_and_empirical_is_silent",
    ],
    "metrics/common.py": ["tests/test_metrics_means_geometry.py", "tests/test_metrics_variability.py"],
    "metrics/cosine.py": ["tests/test_metrics_cosine_probe_cdnv.py"],
    "metrics/duality.py": ["tests/test_metrics_uniformity_duality_ood.py"],
    "metrics/gnc.py": ["tests/test_metrics_gnc_ncc.py", "tests/test_geometry_assignment_gnc.py"],
    "metrics/means_geometry.py": ["tests/test_metrics_means_geometry.py"],
    "metrics/ncc.py": ["tests/test_metrics_gnc_ncc.py"],
    "metrics/ood.py": ["tests/test_metrics_uniformity_duality_ood.py"],
    "metrics/probe.py": ["tests/test_metrics_cosine_probe_cdnv.py"],
    "metrics/spectra.py": ["tests/test_metrics_means_geometry.py", "tests/test_metrics_cosine_probe_cdnv.py"],
    "metrics/uniformity.py": ["tests/test_metrics_uniformity_duality_ood.py"],
    "metrics/variability.py": ["tests/test_metrics_variability.py"],
    "theory/central_path.py": ["tests/test_theory_central_path.py"],
    "theory/geodesic.py": ["tests/test_theory_geodesic.py"],
    "theory/joint_gd.py": ["tests/test_theory_cli_experiments.py::test_experiment_mse_decomposition_ufm_tiny"],
    "theory/mse.py": ["tests/test_theory_mse.py"],
    "theory/snr.py": ["tests/test_theory_central_path.py", "tests/test_theory_mse.py"],
    "ufm/closed_forms.py": ["tests/test_ufm_closed_forms.py"],
    "geometry/hull.py": ["tests/test_geometry_hull.py"],
}

# the package each module is scored under in the summary
GROUPS = ("stats", "metrics", "theory", "ufm", "geometry")

_BINOP_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult}
_BINOP_SWAP[ast.Pow] = ast.Mult
_CMP_SWAP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_MINMAX = {"min": "max", "max": "min", "minimum": "maximum", "maximum": "minimum", "amin": "amax", "amax": "amin"}
_SYMBOL = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Pow: "**",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.And: "and",
    ast.Or: "or",
}


@dataclasses.dataclass(frozen=True)
class Mutant:
    module: str  # relative to src/nclab
    index: int  # position of the mutated node in the walk order of ``_sites``
    line: int
    col: int
    original: str
    mutated: str

    @property
    def key(self) -> str:
        """Stable identity used by the equivalent-mutants file: ``module:line:col original -> mutated``."""
        return f"{self.module}:{self.line}:{self.col} {self.original} -> {self.mutated}"


def _skipped_nodes(tree: ast.AST) -> set[int]:
    """Ids of nodes whose mutation can only change messages, typing or docs, not numbers: annotations,
    docstrings, ``raise`` statements, ``assert`` messages, ``__all__``."""
    skip: set[int] = set()

    def mark(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mark(node.returns)
            for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs:
                mark(a.annotation)
            mark(node.args.vararg and node.args.vararg.annotation)
            mark(node.args.kwarg and node.args.kwarg.annotation)
        elif isinstance(node, ast.AnnAssign):
            mark(node.annotation)
        elif isinstance(node, ast.Raise):
            mark(node)
        elif isinstance(node, ast.Assert):
            mark(node.msg)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            mark(node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            mark(node)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                mark(first)
    return skip


def _callee(node: ast.Call) -> tuple[ast.AST, str] | None:
    """(node holding the name, name) of a call to min/max/minimum/maximum/amin/amax, plain or as an attribute."""
    f = node.func
    if isinstance(f, ast.Name) and f.id in _MINMAX:
        return f, f.id
    if isinstance(f, ast.Attribute) and f.attr in _MINMAX:
        return f, f.attr
    return None


def _sites(tree: ast.AST) -> Iterator[tuple[ast.AST, str, str]]:
    """Every mutable site as (node, original, mutated), in a deterministic walk order."""
    skip = _skipped_nodes(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAP:
            yield node, _SYMBOL[type(node.op)], _SYMBOL[_BINOP_SWAP[type(node.op)]]
        elif isinstance(node, ast.AugAssign) and type(node.op) in _BINOP_SWAP:
            yield node, _SYMBOL[type(node.op)] + "=", _SYMBOL[_BINOP_SWAP[type(node.op)]] + "="
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP_SWAP:
            yield node, _SYMBOL[type(node.ops[0])], _SYMBOL[_CMP_SWAP[type(node.ops[0])]]
        elif isinstance(node, ast.BoolOp):
            yield node, _SYMBOL[type(node.op)], "or" if isinstance(node.op, ast.And) else "and"
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
            # the operator, not the whole expression: keys stay short and free of '|' (the equivalents separator)
            yield node, "-x" if isinstance(node.op, ast.USub) else "not x", "x"
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
            yield node, repr(node.value), repr(node.value + 1)
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            yield node, repr(node.value), repr(not node.value)
        elif isinstance(node, ast.Call) and (hit := _callee(node)) is not None:
            yield node, hit[1], _MINMAX[hit[1]]
        elif isinstance(node, ast.Return) and isinstance(node.value, (ast.BinOp, ast.UnaryOp)):
            # negating a tuple or a dict would fail at once; arithmetic return values are the ones worth flipping
            yield node, "return x", "return -x"


def _apply(node: ast.AST, mutated: str) -> None:
    """Mutate ``node`` in place (its tree is a private deep copy)."""
    if isinstance(node, ast.BinOp):
        node.op = _BINOP_SWAP[type(node.op)]()
    elif isinstance(node, ast.AugAssign):
        node.op = _BINOP_SWAP[type(node.op)]()
    elif isinstance(node, ast.Compare):
        node.ops = [_CMP_SWAP[type(node.ops[0])]()]
    elif isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif isinstance(node, ast.UnaryOp):
        # replace the operation by its operand: the parent's field is rewritten by _Replace
        raise _Replace(node.operand)
    elif isinstance(node, ast.Constant):
        node.value = (not node.value) if type(node.value) is bool else node.value + 1
    elif isinstance(node, ast.Call):
        f, name = _callee(node)
        if isinstance(f, ast.Name):
            f.id = _MINMAX[name]
        else:
            f.attr = _MINMAX[name]
    elif isinstance(node, ast.Return):
        node.value = ast.UnaryOp(op=ast.USub(), operand=node.value)
    else:  # pragma: no cover - _sites yields only the kinds above
        raise TypeError(type(node))


class _Replace(Exception):  # a control-flow signal, not an error
    def __init__(self, new: ast.AST) -> None:
        self.new = new


def _replace_child(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                        return
    raise LookupError("node not found")


def mutants_of(module: str) -> list[Mutant]:
    tree = ast.parse((PKG / module).read_text())
    return [
        Mutant(module, i, node.lineno, node.col_offset, original, mutated)
        for i, (node, original, mutated) in enumerate(_sites(tree))
    ]


def mutated_source(mutant: Mutant) -> str:
    tree = ast.parse((PKG / mutant.module).read_text())
    tree = copy.deepcopy(tree)
    for i, (node, _, mutated) in enumerate(_sites(tree)):
        if i == mutant.index:
            try:
                _apply(node, mutated)
            except _Replace as r:
                _replace_child(tree, node, r.new)
            break
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def load_equivalent(path: Path = EQUIVALENT_FILE) -> dict[str, str]:
    """``key | reason`` lines (``#`` starts a comment line) -> {key: reason}."""
    out: dict[str, str] = {}
    if not path.exists():
        return out
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, reason = line.partition("|")
        if not sep or not reason.strip():
            raise SystemExit(f"{path.name}: every equivalent mutant needs '| reason': {raw!r}")
        out[key.strip()] = reason.strip()
    return out


def _pytest(tests: list[str], src: Path, timeout: float, markers: str) -> tuple[str, float]:
    env = dict(os.environ, PYTHONPATH=str(src), PYTHONDONTWRITEBYTECODE="1")
    # -p no:cacheprovider: no .pytest_cache written into the worktree; no doctests: they would import the
    # worktree's src by path
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests]
    if markers:
        cmd += ["-m", markers]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - t0
    # pytest exit 1 = tests failed; 2-4 = interrupted/internal/usage errors (an import error counts as a kill)
    return ("survived" if proc.returncode == 0 else "killed"), time.perf_counter() - t0


def run(args: argparse.Namespace) -> int:
    selected = [m for m in TESTS if not args.module or any(m.startswith(p) for p in args.module)]
    if not selected:
        raise SystemExit(f"no module matches {args.module}; known: {', '.join(TESTS)}")
    # the sample is drawn over every module and then restricted to the selected ones, so that `--module X` runs
    # exactly X's part of the full command's sample (a long measurement can be run in parts)
    modules = list(TESTS)
    equivalent = load_equivalent()
    rng = random.Random(args.seed)
    plan: dict[str, list[Mutant]] = {}
    for m in modules:
        muts = [x for x in mutants_of(m) if x.key not in equivalent]
        if args.max_mutants and len(muts) > args.max_mutants:
            muts = sorted(rng.sample(muts, args.max_mutants), key=lambda x: x.index)
        plan[m] = muts
    if args.per_package:
        # one seeded sample from the union of a package's modules: a package's score then weighs its modules by
        # their size, and a package with many small modules still gets a sample large enough to mean something
        for g in GROUPS:
            pool = [x for m in modules if m.split("/")[0] == g for x in plan[m]]
            if len(pool) > args.per_package:
                chosen = set(rng.sample(pool, args.per_package))
                for m in modules:
                    if m.split("/")[0] == g:
                        plan[m] = [x for x in plan[m] if x in chosen]
    plan = {m: muts for m, muts in plan.items() if muts and m in selected}
    modules = selected
    if args.list:
        for muts in plan.values():
            for x in muts:
                print(x.key)
        return 0

    results: dict[str, dict[str, list[Mutant]]] = {}
    with tempfile.TemporaryDirectory(prefix="nclab-mutants-") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(SRC, src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        for m, muts in plan.items():
            tests = TESTS[m]
            status, base = _pytest(tests, src, timeout=args.baseline_timeout, markers=args.markers)
            if status != "survived":
                print(f"{m}: the unmutated tests do not pass ({status}); skipped", flush=True)
                continue
            limit = max(args.min_timeout, args.timeout_factor * base)
            target = src / "nclab" / m
            pristine = target.read_text()
            res: dict[str, list[Mutant]] = {"killed": [], "survived": [], "timeout": []}
            try:
                for x in muts:
                    target.write_text(mutated_source(x))
                    status, _ = _pytest(tests, src, timeout=limit, markers=args.markers)
                    res[status].append(x)
                    if args.verbose or status == "survived":
                        print(f"  {status:8s} {x.key}", flush=True)
            finally:
                target.write_text(pristine)
            results[m] = res
            n = len(muts)
            k = len(res["killed"]) + len(res["timeout"])
            print(
                f"{m}: {n} mutants, killed {len(res['killed'])}, timeout {len(res['timeout'])}, "
                f"survived {len(res['survived'])}, score {k / n:.0%} (tests {base:.1f} s, limit {limit:.0f} s)"
                if n
                else f"{m}: no mutants",
                flush=True,
            )
    _summary(results, equivalent, modules)
    return 0


def _summary(results: dict[str, dict[str, list[Mutant]]], equivalent: dict[str, str], modules: list[str]) -> None:
    print("\n| package | mutants run | killed | timeout | survived | equivalent (excluded) | score |")
    print("|---|---|---|---|---|---|---|")
    for g in GROUPS:
        ms = [m for m in results if m.split("/")[0] == g]
        if not ms:
            continue
        killed = sum(len(results[m]["killed"]) for m in ms)
        tout = sum(len(results[m]["timeout"]) for m in ms)
        surv = sum(len(results[m]["survived"]) for m in ms)
        eq = sum(1 for k in equivalent if k.split(":")[0] in ms)
        n = killed + tout + surv
        print(f"| {g} | {n} | {killed} | {tout} | {surv} | {eq} | {(killed + tout) / n:.0%} |" if n else "")
    survivors = [x for m in results for x in results[m]["survived"]]
    if survivors:
        print("\nsurviving mutants:")
        for x in survivors:
            print(f"  {x.key}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--module", action="append", help="module prefix under src/nclab, e.g. stats/ (repeatable)")
    p.add_argument("--max-mutants", type=int, default=0, help="sample at most this many mutants per module (0: all)")
    p.add_argument(
        "--per-package",
        type=int,
        default=0,
        help="then sample at most this many mutants per package (stats, metrics, ...) from its modules' union",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling")
    p.add_argument("--timeout-factor", type=float, default=3.0, help="per-mutant limit = factor x unmutated time")
    p.add_argument("--min-timeout", type=float, default=20.0, help="lower bound of the per-mutant limit (s)")
    p.add_argument("--baseline-timeout", type=float, default=600.0, help="limit of the unmutated run (s)")
    p.add_argument(
        "--markers",
        default="not slow and not distributed",
        help="pytest -m expression of the tests run per mutant ('' for all; the distributed tests spawn processes)",
    )
    p.add_argument("--list", action="store_true", help="print the (sampled) mutants and run nothing")
    p.add_argument("-v", "--verbose", action="store_true", help="print every mutant's outcome, not only survivors")
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
