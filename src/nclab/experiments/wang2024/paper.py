"""What [Wang et al. 2024] states: its headline claims and its training protocols.

:data:`CLAIMS`: each claim with the paper's quoted sentence, its value and the criteria that judge ours.
:data:`PROTOCOLS`: per experiment and run label, ``{field path: Value}`` with each value's source.

Written apart from the code that builds the runs (:mod:`nclab.experiments.wang2024.experiments`): nothing here
imports it, and ``tests/test_reproduction_protocols.py`` compares the two texts field by field.
"""

from __future__ import annotations

import numpy as np

from nclab.experiments.claims import (
    Bound,
    Claim,
    Close,
    Monotone,
    Order,
    Value,
    ours,
    quote,
)

_q = quote  # the quotes below cite the papers' text files by line

__all__ = ["CLAIMS", "PROTOCOLS"]

_WANG = "[Wang et al. 2024]"


def _wang2024_thm3(layers: int = 6) -> dict[str, float]:
    r"""Thm 3 of [Wang et al. 2024] on small random data (K = 3 classes of 4 in d = 5, seeded): the layered
    regulariser :math:`\sum_{l<L} \|h^{l+1} - h^l\|^2` minimised over the free intermediate layers (an exact
    least-squares solve in plain numpy), against :math:`\|H - X\|^2` (Thm 3 as printed: ratio 1) and
    :math:`\|H - X\|^2 / L` (the straight line of eq. (15): ratio 1/L), and the minimiser's largest distance from
    that line."""
    rng = np.random.default_rng(0)
    X, H = rng.normal(size=(12, 5)), rng.normal(size=(12, 5))
    diff = np.diff(np.eye(layers + 1), axis=0)  # (L, L + 1): h^{l+1} - h^l
    free, fixed = diff[:, 1:layers], diff[:, [0, layers]]
    rhs = -(fixed @ np.stack([X, H]).reshape(2, -1))
    Z = np.linalg.lstsq(free, rhs, rcond=None)[0]
    best = float(np.sum((free @ Z - rhs) ** 2))
    dist = float(np.sum((H - X) ** 2))
    t = np.arange(1, layers)[:, None] / layers
    line = (1 - t) * X.reshape(1, -1) + t * H.reshape(1, -1)
    return {
        "thm3_min_over_printed": best / dist,
        "thm3_min_over_corrected": best * layers / dist,
        "thm3_layers": float(layers),
        "thm3_line_max_dev": float(np.max(np.abs(Z - line), initial=0.0)),
    }


#: [Wang et al. 2024]'s headline claims we judge, and our checks, in paper order.
CLAIMS: tuple[Claim, ...] = (
    Claim(
        "wang2024-fig2-3-depth-order", _WANG, "Figs. 2-3, Sec. IV-A (Conjecture 1)",
        "depth order of PFC1, PFC2, PFC3 at the end of training",
        "PFC1 and PFC2 decrease, PFC3 increases towards 1 with depth (read off the figures, 5 datasets)",
        (Bound("pfc1_depth_violations", 0), Bound("pfc2_depth_violations", 0), Bound("pfc3_depth_violations", 0)),
        "geodesic-digits",
        "ours: a fully connected ResNet as the paper's MNIST net (l. 323), but 64 wide with 6 blocks on the 8x8 "
        "digits, full-batch SGD for 1,500 steps (the paper: 1000 wide on MNIST, 350 epochs); our net reaches zero "
        "training error but is not collapsed as the conjecture's terminal phase presupposes (last layer: NCC "
        "accuracy 0.983 < 1, PFC2 0.899, up from 0.796 at the input)",
        quote=_q(_WANG, 347, "features of each layer tend to collapse to their class means "
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
        "same net as the depth order (at zero training error but not collapsed: its last layer's PFC2 is above "
        "the input's, so a straight line to it rises too); judged as a conjunction (the paper's 'both'); the "
        "prediction on 101 points of the line, the curves in the summary ('measured', 'predicted')",
        quote=_q(_WANG, 352, "Both observations and predictions are monotonic on various datasets"),
        all_required=True,
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
        quote=_q(_WANG, 367, "The solution of UFM exhibits NC but MUFM doesn’t."),
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
        quote=_q(_WANG, 369, "The first two figures show that increasing ... makes the solution of "
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
        quote=_q(_WANG, 347, "Empirical evidence supports the PFC conjecture when training ResNets."),
        protocol="the Table I Fashion-MNIST ResNet, CE, SGD momentum 0.9, wd 5e-4, batch 128, 350 epochs, lr 0.01 / "
        "10 at epochs 117 and 233 (nclab experiment run pfc-table1 --scale paper --runs fashion-mnist/pfc_resnet)",
    ),
    Claim(
        "wang2024-table1-other-datasets", _WANG, "Table I, Figs. 2-3 (a), (c)-(e)",
        "PFC depth order at the end of training of the Table I networks on MNIST (FC ResNet), CIFAR10, STL10 and "
        "CIFAR100",
        "as Conjecture 1: PFC1 and PFC2 decrease, PFC3 increases with depth (read off Figs. 2-3)", (), None,
        "paper scale only (GPU): the Table I networks on the full datasets; the Fashion-MNIST row is "
        "wang2024-table1-fmnist",
        quote=_q(_WANG, 352, "Figure 3: PFC on various datasets at the final epoch."),
        protocol="nclab experiment run pfc-table1 --scale paper --runs 'mnist/*' (and 'cifar10/*', 'stl10/*', "
        "'cifar100/*'): CE, SGD momentum 0.9, wd 5e-4, batch 128, 350 epochs, lr 0.01 / 10 at epochs 117 and 233; "
        "PFC1-3 per layer at the last epoch, their depth violations",
    ),
    Claim(
        "wang2024-fig2-training-evolution", _WANG, "Fig. 2, Sec. IV-A",
        "during training the PFC metrics of every layer move from their random-initialisation values to the final "
        "depth order",
        "the metrics start at a random initialisation and gradually converge to the final order (read off the "
        "figure)", (), None,
        "not measured: no experiment here records the PFC metrics per layer at every epoch",
        quote=_q(_WANG, 196, "During the training process, the metrics at each layer start at a "
                    "random initialization and gradually converge to the final order."),
        protocol="the Table I runs (pfc-table1 --scale paper) with PFC1-3 measured per layer every epoch; the epoch "
        "from which the depth order holds to the end, per dataset",
    ),
    Claim(
        "wang2024-thm1-pfc1-line", _WANG, "Thm 1, Sec. III-B",
        "along the straight line (10) from the input features to the last layer's, PFC1 decreases monotonically "
        "to zero when the centred class means of the two ends have a non-negative inner product",
        "a theorem (PFC1 monotone on the line)", (), None,
        "not measured as a theorem: the cpu check of the predicted curves on a trained net is wang2024-fig3-geodesic",
        quote=_q(_WANG, 215, "along the line (10), PFC1 metric monotonically decreases to zero"),
        protocol="random start and collapsed end points meeting the assumption (and ones violating it), PFC1 on a "
        "fine grid of t along eq. (10) from nclab's PFC1, counting rises; no experiment here",
    ),
    Claim(
        "wang2024-thm2-pfc2-line", _WANG, "Thm 2, Sec. III-B",
        "along the line (11) PFC2 decreases monotonically to zero when the transport cost between the two ends is "
        "small enough",
        "a theorem (PFC2 monotone on the line)", (), None,
        "not measured as a theorem: the cpu check of the predicted curves on a trained net is wang2024-fig3-geodesic",
        quote=_q(_WANG, 227, "we have the PFC2 metric monotonically decreases to zero"),
        protocol="random start points and nearby simplex-ETF end points at shrinking transport cost, PFC2 on a fine "
        "grid of t along eq. (11), counting rises; no experiment here",
    ),
    Claim(
        "wang2024-thm3-as-printed", _WANG, "Thm 3, eqs. (12)-(15), Sec. III-C",
        "the layered regulariser of (12), minimised over the intermediate layers, equals Thm 3's lambda / (2Kn) "
        "||H - X||^2 (as printed): the ratio of the minimum to ||H - X||^2 (exact least squares, L = 6 layers, "
        "random data)",
        "the problems (12) and (13) are equivalent with the same lambda (as printed): ratio 1",
        (Close("thm3_min_over_printed", 1.0, rtol=1e-9),),
        None,
        "computed here on small random data; a paper error: the proof's equality case (15), steps of (h^L - h^0) / "
        "L, gives a minimum of ||h^L - h^0||^2 / L, so (13) holds with lambda / L in place of lambda; the minimiser "
        "lies on that straight line and the corrected ratio is 1 (tests/test_claims.py checks both)",
        compute=_wang2024_thm3,
        quote=_q(_WANG, 268, "The problem in (12) is equivalent to"),
        erratum="Thm 3's penalty lambda / (2Kn) ||H - X||^2 needs lambda / L: the minimum over the intermediate "
        "layers is ||H - X||^2 / L (eq. (15)'s equal steps)",
    ),
)  # fmt: skip


# ------------------------------------------------------------------------- 002 [Wang et al. 2024]
def _pfc() -> dict[str, dict[str, Value]]:
    rec = "[Wang et al. 2024, Sec. IV-A]"
    out = {}
    for ds in ("mnist", "fashion-mnist", "cifar10", "stl10", "cifar100"):
        model = ("fc_resnet", {"width": 1000, "num_blocks": 10}) if ds == "mnist" else ("pfc_resnet", {"table": ds})
        row = {
            "model": Value(model[0], f"[Wang et al. 2024, Table I] {ds} row ({'FC' if ds == 'mnist' else 'Conv'})"),
            **{f"model_options.{k}": Value(v, "[Wang et al. 2024, Table I]") for k, v in model[1].items()},
            "data.name": Value(ds, rec),
            "data.per_class": ours(None, "no subsampling is mentioned: the whole training split"),
            "data.input_size": Value(
                {"mnist": 28, "fashion-mnist": 28, "cifar10": 32, "stl10": 96, "cifar100": 32}[ds],
                "[Wang et al. 2024, Table I] data dim",
            ),
            "augmentation": ours(None, "not given; the setting follows Papyan et al. 2020 (no augmentation)"),
            "loss": Value("ce", rec),
            "optimiser.name": Value("sgd", rec),
            "optimiser.momentum": Value(0.9, rec),
            "lr": Value(0.005 if ds == "mnist" else 0.01, f"{rec}: 0.005 for MNIST, 0.01 for the others"),
            "schedule.name": Value("multistep", rec),
            "schedule.milestones": Value([117, 233], rec),
            "schedule.gamma": Value(0.1, rec),
            "batch": Value(128, rec),
            "epochs": Value(350, rec),
            "weight_decay": Value(5e-4, rec),
            "seeds": ours([0], "seeds and the number of runs are not given"),
            "measure.layers": Value(
                "all", "[Wang et al. 2024, Sec. IV-A]: every block of the last stage (the network's measured layers)"
            ),
            "measure.splits": Value(["train"], "[Wang et al. 2024, Figs. 2-3]: training features"),
        }
        out[f"{ds}/{model[0]}"] = row
    return out


#: Per experiment, per run label: ``{field path: Value}`` of the paper's protocol.
PROTOCOLS: dict[str, dict[str, dict[str, Value]]] = {"pfc-table1": _pfc()}
