"""What [Han et al. 2022] states: its headline claims and its training protocols.

:data:`CLAIMS`: each claim with the paper's quoted sentence, its value and the criteria that judge ours.
:data:`PROTOCOLS`: per experiment and run label, ``{field path: Value}`` with each value's source.

Written apart from the code that builds the runs (:mod:`nclab.experiments.han2022.experiments`): nothing here
imports it, and ``tests/test_reproduction_protocols.py`` compares the two texts field by field.
"""

from __future__ import annotations

from nclab.experiments.claims import (
    Bound,
    Claim,
    Compare,
    MedianGain,
    Order,
    Runs,
    Sign,
    Value,
    ours,
    quote,
)

_q = quote  # the quotes below cite the papers' text files by line

__all__ = ["CLAIMS", "PROTOCOLS"]

_HAN = "[Han et al. 2022]"
_FMNIST_REASON = (
    "ours: a small CNN on 1,000 Fashion-MNIST images for 80 epochs, 3 seeds per loss, the paper's recipe with the "
    "MSE lr 0.18045 from its grid, not VGG / ResNet / DenseNet on five full datasets for 350 epochs at swept lrs"
)


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


_NC_BAND = (
    "one band for NC1-NC4 (Figs. 3-8), ours: the captions say only that the measures approach their limit "
    "(004_5b143c3eb2980993.txt:424-434: 'approach equinormness', '... equiangularity', '... maximal-equiangularity', "
    "'... self-duality', 'undergo variability collapse', 'converge to those of the nearest class center decision "
    "rule') and give no size; reproduced = a fall of >= 1 decade (a factor 10, our reading of 'approach') from the "
    "zero-error epoch to the last, mean over seeds; partly = a fall outside the seeds' spread of at least 0.1 "
    "decade (a fall by at least about 20 %, ours) short of a decade; inconclusive = inside the spread; not "
    "reproduced = a rise outside it, or a fall under 0.1 decade"
)


def _nc_band(metric: str) -> Sign:
    """The one band by which every NC measure of [Han et al. 2022, Figs. 3-8] is judged: decades after TPT."""
    return Sign(_fm("mse", metric), +1, spread=True, full=1.0, partly_min=0.1, basis=_NC_BAND)


#: The runs of each loss of ``fashion-mnist-cnn`` at the tiny and cpu scales (seed 0 keeps the plain label).
_FM_LABELS = {loss: (loss, f"{loss} seed1", f"{loss} seed2") for loss in ("mse", "ce")}


def fashion_mnist_runs(loss: str, metric: str) -> Runs:
    """The converged runs of ``loss`` in ``fashion-mnist-cnn``'s summary, one metric."""
    return Runs(_FM_LABELS[loss], metric, name=f"{loss.upper()} {metric}")


_fm = fashion_mnist_runs


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

#: [Han et al. 2022]'s headline claims we judge, and our checks, in paper order.
CLAIMS: tuple[Claim, ...] = (
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
        "NC1 keeps falling after zero training error (MSE), judged by the NC family's one band (decades)",
        "NC1 falls by 1-3 decades during the terminal phase on a log axis (read off the figure)",
        (_nc_band("orders of magnitude after TPT"),),
        "fashion-mnist-cnn", _FMNIST_REASON, paper_value_ours=True,
        quote=_q(_HAN, 432, "Results demonstrate that last-layer features undergo variability collapse."),
    ),
    Claim(
        "han2022-figs3-5-nc2", _HAN, "Figs. 3-5, Sec. 4",
        "NC2 progresses after zero training error (MSE): equinorm, equiangularity and max-equiangularity of the "
        "class means keep falling (the paper's figures show the classifiers' too; our summary records the class "
        "means' only)",
        "all three measures fall during the terminal phase (read off the figures)",
        tuple(_nc_band(f"{m} decades after TPT") for m in ("equinorm", "equiangularity", "max_angle")),
        "fashion-mnist-cnn", _FMNIST_REASON, paper_value_ours=True,
        quote=_q(_HAN, 426, "Results demonstrate that last-layer features and classifiers approach equiangularity."),
    ),
    Claim(
        "han2022-fig6-nc3", _HAN, "Fig. 6, Sec. 4",
        "NC3 progresses after zero training error (MSE): the classifiers and the class means approach self-duality",
        "the self-duality distance falls during the terminal phase (read off the figure)",
        (_nc_band("self_duality decades after TPT"),),
        "fashion-mnist-cnn", _FMNIST_REASON, paper_value_ours=True,
        quote=_q(_HAN, 430, "Results demonstrate that last-layer features and classifiers approach self-duality."),
    ),
    Claim(
        "han2022-fig8-nc4", _HAN, "Fig. 8, Sec. 4",
        "NC4 (MSE): the network's decisions converge to the nearest-class-centre rule's: the NCC mismatch keeps "
        "falling after zero training error",
        "the NCC mismatch falls to ~0 (read off the figure)",
        (_nc_band("ncc_mismatch decades after TPT"),),
        "fashion-mnist-cnn",
        _FMNIST_REASON + "; a mismatch of exactly 0 at the end leaves its decades undefined (read: not measured)",
        paper_value_ours=True,
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


# ------------------------------------------------------------------------- 004 [Han et al. 2022]
_HAN_A3 = "[Han et al. 2022, App. A.3] (= Papyan et al. 2020; values confirmed by the paper's Colab)"


_HAN_GRID = [
    0.0001, 0.00013854180248814739, 0.00019193831036664843, 0.0002659147948472494, 0.00036840314986403866,
    0.0005103923642447501, 0.0007071067811865475, 0.0009796384801717632, 0.0013572088082974532,
    0.0018803015465431966, 0.0026050036547934563, 0.0036090190182329713, 0.005, 0.006927090124407369,
    0.009596915518332421, 0.01329573974236247, 0.01842015749320193, 0.0255196182122375, 0.03535533905932737,
    0.048981924008588154, 0.06786044041487264, 0.09401507732715982, 0.1302501827396728, 0.18045095091164853, 0.25,
]  # fmt: skip


def _han_common(dataset: str, loss: str) -> dict[str, Value]:
    lr = 0.0184 if loss == "mse" else 0.0679
    side = {"mnist": 32, "fashion-mnist": 32, "svhn": 32, "cifar10": 32, "stl10": 96}[dataset]
    per_class = {"mnist": 5000, "fashion-mnist": 5000, "svhn": 4600, "cifar10": 5000, "stl10": None}[dataset]
    return {
        "data.name": Value(dataset, "[Han et al. 2022, App. A.1]"),
        "data.input_size": Value(side, "[Han et al. 2022, App. A.7]: 32x32 after padding; STL10 96x96"),
        "data.per_class": (
            Value(None, "[Han et al. 2022, fn. 15]: STL10's 500 labelled images per class, all used")
            if per_class is None
            else ours(
                per_class,
                "balanced subsets as in Papyan et al. 2020, whose N is not in this paper; "
                "5000 is below every class count (SVHN: 4600 below its smallest class, 4659)",
            )
        ),
        "augmentation": ours(None, "Papyan et al. 2020 (the paper's App. A.1 pre-processing) use no augmentation"),
        "loss": Value(loss, "[Han et al. 2022, Sec. 2, App. A.3] MSE; CE for Figs. 10-12 as Papyan et al. 2020"),
        **(
            {"loss_options.reduction": Value("mean", "[Han et al. 2022] Colab: nn.MSELoss() (mean over batch x C)")}
            if loss == "mse"
            else {"loss_options.tau": Value(1.0, "[Han et al. 2022, Fig. 10]: plain CE, as Papyan et al. 2020")}
        ),
        "optimiser.name": Value("sgd", _HAN_A3),
        "optimiser.momentum": Value(0.9, _HAN_A3),
        "lr": Value(
            lr,
            f"{_HAN_A3}: the Colab's tuned lr for MNIST-ResNet18 ({loss}), on the grid; the paper's per-pair "
            "picks are not given, so every pair starts there and the sweep is listed",
        ),
        "lr_sweep": Value(_HAN_GRID, f"{_HAN_A3}: 25 values, np.logspace(-4, log10(0.25), 25)"),
        "schedule.name": Value("multistep", _HAN_A3),
        "schedule.milestones": Value([116, 233], f"{_HAN_A3}: /10 at 350 // 3 and 2 * 350 // 3"),
        "schedule.gamma": Value(0.1, _HAN_A3),
        "batch": Value(128, _HAN_A3),
        "epochs": Value(350, _HAN_A3),
        "weight_decay": Value(5e-4, _HAN_A3),
        "seeds": ours([0], "the paper reports one run per pair"),
        "measure.splits": Value(["train", "test"], "[Han et al. 2022, Figs. 3-8 train, Fig. 12 test]"),
        "measure.layers": Value("penultimate", "[Han et al. 2022, Sec. 1.1]: last-layer features"),
        "measure.epochs": ours("log", "the paper's measurement epochs are not given; 30 log-spaced + zero-error"),
    }


_HAN_NETS = {  # [Han et al. 2022, App. A.2 table] as build_model names
    "mnist": ("vgg11_bn", "resnet18", ("densenet", 40)),
    "fashion-mnist": ("vgg11_bn", "resnet18", ("densenet", 250)),
    "svhn": ("vgg13_bn", "resnet34", ("densenet", 40)),
    "cifar10": ("vgg11_bn", "resnet50", ("densenet", 100)),
    "stl10": ("vgg11_bn", "resnet18", ("densenet121", None)),
}


def _han(datasets: tuple[str, ...]) -> dict[str, dict[str, Value]]:
    out = {}
    for ds in datasets:
        vgg, resnet, (dense, depth) = _HAN_NETS[ds]
        for loss in ("mse", "ce"):
            common = _han_common(ds, loss)
            src = "[Han et al. 2022, App. A.2]"
            out[f"{ds}/{vgg}/{loss}"] = {**common, "model": Value(vgg, f"{src}: {vgg[:5].upper()}, with batch norm "
                                                                   "(Papyan et al. 2020)")}  # fmt: skip
            out[f"{ds}/{resnet}/{loss}"] = {**common, "model": Value(resnet, src)}
            if depth is None:
                dn = {"model": ours("densenet121", "the paper's DenseNet201 is not built by nclab; torchvision's "
                                    "DenseNet121 (same growth 32, fewer layers) stands in")}  # fmt: skip
            else:
                dn = {
                    "model": Value("densenet", f"{src}: DenseNet{depth} (CIFAR-style DenseNet-BC)"),
                    "model_options.depth": Value(depth, src),
                    "model_options.growth": ours(12, "the growth rate is not given; DenseNet-BC's k = 12"),
                }
            out[f"{ds}/{dense}/{loss}"] = {**common, **dn}
    return out


#: Per experiment, per run label: ``{field path: Value}`` of the paper's protocol.
PROTOCOLS: dict[str, dict[str, dict[str, Value]]] = {
    "mse-nc-benchmarks": _han(("mnist", "fashion-mnist", "svhn", "cifar10", "stl10")),
    "fashion-mnist-cnn": _han(("fashion-mnist",)),
}
