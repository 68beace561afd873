"""The papers' training protocols as the papers state them: :data:`PAPER_PROTOCOLS`, written once and apart from
the code that builds the runs (:mod:`nclab.experiments.reproductions`).

Each value is a :class:`Value` with its source: the section, table or figure of the paper (keys of
docs/references.md); a value the paper leaves out is ours, its source starting with ``"ours:"`` and giving the
reason. ``tests/test_reproduction_protocols.py`` compares every
experiment's resolved paper-scale :class:`~nclab.experiments.protocols.Protocol` with this table, field by field
(the keys are paths into :meth:`~nclab.experiments.protocols.Protocol.to_dict`: ``"schedule.milestones"``).
Nothing here is imported by the code that runs.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["PAPER_PROTOCOLS", "Value", "ours"]


class Value(NamedTuple):
    """A protocol value and where it comes from (``"[Han et al. 2022, App. A.3]"``, or ``"ours: <reason>"``)."""

    value: Any
    source: str


def ours(value: Any, reason: str) -> Value:
    """A value the paper leaves out: ours, with the reason."""
    return Value(value, f"ours: {reason}")


# ------------------------------------------------------------------------- 004 [Han et al. 2022]
_HAN = "[Han et al. 2022, App. A.3] (= Papyan et al. 2020; values confirmed by the paper's Colab)"
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
        "optimiser.name": Value("sgd", _HAN),
        "optimiser.momentum": Value(0.9, _HAN),
        "lr": Value(
            lr,
            f"{_HAN}: the Colab's tuned lr for MNIST-ResNet18 ({loss}), on the grid; the paper's per-pair "
            "picks are not given, so every pair starts there and the sweep is listed",
        ),
        "lr_sweep": Value(_HAN_GRID, f"{_HAN}: 25 values, np.logspace(-4, log10(0.25), 25)"),
        "schedule.name": Value("multistep", _HAN),
        "schedule.milestones": Value([116, 233], f"{_HAN}: /10 at 350 // 3 and 2 * 350 // 3"),
        "schedule.gamma": Value(0.1, _HAN),
        "batch": Value(128, _HAN),
        "epochs": Value(350, _HAN),
        "weight_decay": Value(5e-4, _HAN),
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


# ------------------------------------------------------------------------- 003 [Jiang et al. 2024]
def _gnc() -> dict[str, dict[str, Value]]:
    b3 = "[Jiang et al. 2024, App. B.3]"
    common = {
        "loss": Value("ce", "[Jiang et al. 2024, Sec. 2]"),
        "optimiser.name": Value("sgd", b3),
        "optimiser.momentum": Value(0.9, b3),
        "lr": Value(0.1, b3),
        "schedule.name": Value("cosine", b3),
        "epochs": Value(200, b3),
        "batch": ours(128, "the batch size is not given"),
        "weight_decay": ours(
            5e-4,
            "not given (the paper constrains W and H to the sphere instead); the usual CIFAR value for the backbone",
        ),
        "augmentation": Value("cifar_rot15", f"{b3}: crop 32 pad 4, flip 0.5, rotation 15"),
        "head.kind": Value("cosine", "[Jiang et al. 2024, Sec. 2]: normalised features and classifier"),
        "seeds": ours([0], "one run per setting is shown"),
    }
    out = {}
    for tau in (0.02, 0.05, 0.1, 0.2, 0.5, 1.0):
        out[f"fig2/cifar100/resnet18/tau{tau:g}"] = {
            **common,
            "model": Value("resnet18", "[Jiang et al. 2024, Fig. 2]"),
            "model_options.d": Value(
                10,
                "[Jiang et al. 2024, Fig. 2]: d = 10 (by an inserted linear "
                "layer, as App. B.3; Fig. 2's text narrows a convolution)",
            ),
            "data.name": Value("cifar100", "[Jiang et al. 2024, Fig. 2]"),
            "head.tau": ours(tau, "Fig. 2 sweeps tau without giving the grid; ours brackets App. B.3's 0.1"),
        }
    for ds in ("cifar100", "tiny-imagenet"):
        for model in ("resnet18", "densenet121", "resnext50_32x4d"):
            out[f"figB3/{ds}/{model}"] = {
                **common,
                "model": Value(model, b3),
                "model_options.d": Value(10, f"{b3} table: d = 10"),
                "data.name": Value(ds, b3),
                "data.input_size": Value(32, b3)
                if ds == "cifar100"
                else ours(
                    64,
                    "B.3's crop 32 of a 64-pixel image would train on parts while the test transform "
                    "sees whole images; the CIFAR crop at the images' own size instead",
                ),
                "head.tau": Value(0.1, f"{b3} table"),
            }
    for model in ("resnet18", "densenet121", "resnext50_32x4d"):
        out[f"fig5/cifar100/{model}/cmf"] = {
            **common,
            "model": Value(model, "[Jiang et al. 2024, Sec. 5, Fig. 5]"),
            "model_options.d": Value(20, "[Jiang et al. 2024, App. B] d = 20 (Fig. 5's caption says 10)"),
            "head.kind": Value("cmf", "[Jiang et al. 2024, Sec. 5]: class-mean-feature classifier"),
            "head.beta": Value(0.9, "[Jiang et al. 2024, App. B]"),
            "head.tau": Value(0.1, "[Jiang et al. 2024, App. B]"),
        }
    for fig, classes, tau, epochs, ms in (("fig4", [1, 3, 5, 9], 0.05, 800, [200, 400, 600]),
                                          ("figB6", [1, 3, 4, 5, 7, 9], 0.2, 600, [200, 400])):  # fmt: skip
        src = "[Jiang et al. 2024, Sec. 4, Fig. 4]" if fig == "fig4" else "[Jiang et al. 2024, App. B.5, Fig. B.6]"
        out[f"{fig}/cifar10/resnet18/d2"] = {
            **common,
            "model": Value("resnet18", src),
            "model_options.d": Value(2, src),
            "data.name": Value("cifar10", src),
            "data.classes": Value(classes, f"{src}: automobile, cat, (deer,) dog, (horse,) truck"),
            "head.tau": Value(tau, src),
            "epochs": Value(epochs, src),
            "schedule.name": Value("multistep", f"{src}: lr / 10 every 200 epochs"),
            "schedule.milestones": Value(ms, src),
            "augmentation": ours("cifar", "'standard augmentation' of CIFAR (crop 32 pad 4, flip)"),
            "seeds": Value([0, 1, 2, 3, 4], f"{src}: 5 trials"),
        }
    fixed = "[Jiang et al. 2024, Sec. 4, Fig. 4 (b-d)]: 'the classifier fixed to be one of the three arrangements'"
    for assignment in ([0, 1, 2, 3], [0, 1, 3, 2], [0, 2, 1, 3]):  # the square's 3 assignments up to symmetry
        out[f"fig4/cifar10/resnet18/d2-fixed-{''.join(map(str, assignment))}"] = {
            **out["fig4/cifar10/resnet18/d2"],
            "head.kind": Value("fixed", fixed),
            "head.assignment": Value(assignment, fixed),
        }
    return out


# ------------------------------------------------------------------------- 000 [Xu & Liu 2023]
def _vci() -> dict[str, dict[str, Value]]:
    s61, s63 = "[Xu & Liu 2023, Sec. 6.1]", "[Xu & Liu 2023, Sec. 6.3]"
    common = {
        "model": Value("resnet50", s63),
        "data.name": Value("imagenet", s63),
        "data.input_size": Value(224, "[Xu & Liu 2023, Sec. 6.1] (test: resize 256, centre crop)"),
        "augmentation": Value("imagenet_autoaugment", f"{s61}: trained with AutoAugment"),
        "optimiser.name": Value("sgd", s61),
        "optimiser.nesterov": Value(True, s61),
        "optimiser.momentum": ours(0.9, "Nesterov momentum's value is not given; the usual 0.9"),
        "lr": Value(0.4, f"{s61}: 0.1 x batch / 256 at the global batch 1024"),
        "batch": Value(1024, f"{s61}: 4 GPUs x 256"),
        "epochs": Value(300, s61),
        "weight_decay": Value(8e-5, s61),
        "schedule.name": ours("cosine", "Sec. 6.3 does not say which of Sec. 6.1's two schedules; cosine"),
        "schedule.warmup_epochs": Value(10, s61),
        "schedule.warmup_start_lr": Value(1e-5, s61),
        "seeds": ours([0], "one run per setting (no seeds reported)"),
        "measure.epochs": Value(list(range(0, 301, 20)), f"{s61}: metrics every 20 epochs"),
        "measure.layers": Value("penultimate", f"{s61}: the feature layer"),
        "probes.lams": Value({"start": 1e-6, "stop": 1e6, "num": 97}, f"{s63}: 97 values in [1e-6, 1e6]"),
        "probes.downstream": Value(
            [
                {"name": n, "dataset": n}
                for n in (
                    "oxford-pets",
                    "flowers102",
                    "fgvc-aircraft",
                    "stanford-cars",
                    "dtd",
                    "food101",
                    "cifar10",
                    "cifar100",
                    "caltech101",
                    "sun397",
                )
            ],
            f"{s63}: the 10 datasets of Kornblith et al. 2019",
        ),
    }
    out = {}
    for tau in (0.1, 0.2, 0.4, 0.6, 0.8, 1.0):
        out[f"tau={tau:g}"] = {**common, "loss": Value("ce", s63), "loss_options.tau": Value(tau, f"{s63}, group 1")}
    for lam in (2.5, 3.75, 5.0, 7.5, 10.0):
        out[f"lambda={lam:g}"] = {
            **common,
            "loss": Value("ce_cosreg", f"{s63}, group 2: CE + lambda x within-class cosine regulariser"),
            "loss_options.cosreg_weight": Value(lam, f"{s63}, group 2"),
            "loss_options.tau": ours(1.0, "the base tau of group 2 is not given; 1 (plain CE)"),
        }
    return out


# ------------------------------------------------------------------------- 001 [Tirer & Bruna 2022]
def _resnet_depth() -> dict[str, dict[str, Value]]:
    f5, f10 = "[Tirer & Bruna 2022, Fig. 5]", "[Tirer & Bruna 2022, Fig. 10]"
    out = {}
    for ds, loss, bias, src in (("mnist", "mse", False, f5), ("mnist", "ce", True, f5), ("cifar10", "mse", False, f10)):
        out[f"{ds}/resnet18/{loss}-{'bias' if bias else 'nobias'}"] = {
            "model": Value("resnet18", src),
            "head.bias": Value(bias, f"{src}: MSE without the classifier's bias, CE with it"),
            "data.name": Value(ds, src),
            "data.input_size": (
                ours(32, "how MNIST is fed to ResNet18 is not given; padded to 32 as [Han et al. 2022]")
                if ds == "mnist"
                else Value(32, src)
            ),
            "loss": Value(loss, src),
            "optimiser.name": Value("sgd", src),
            "optimiser.momentum": ours(0.9, "not given; the Papyan et al. 2020 / Zhu et al. 2021 baseline"),
            "lr": Value(0.05, src),
            "schedule.name": Value("multistep", f"{src}: lr / 10 every 40 epochs"),
            "schedule.milestones": Value([40, 80], f"{src}: every 40 epochs (over ours 120)"),
            "epochs": ours(120, "the number of epochs is not given; three 40-epoch phases of its schedule"),
            "batch": ours(128, "not given; the batch of the Papyan et al. 2020 baseline"),
            "weight_decay": Value(5e-4, src),
            "measure.layers": Value("all", f"{src}: every ResBlock and the penultimate layer"),
            "seeds": ours([0], "one run per figure"),
        }
    return out


#: Per experiment, per run label: ``{field path: Value}`` of the paper's protocol.
PAPER_PROTOCOLS: dict[str, dict[str, dict[str, Value]]] = {
    "mse-nc-benchmarks": _han(("mnist", "fashion-mnist", "svhn", "cifar10", "stl10")),
    "fashion-mnist-cnn": _han(("fashion-mnist",)),
    "pfc-table1": _pfc(),
    "gnc-trained": _gnc(),
    "vci-transfer": _vci(),
    "resnet-depth": _resnet_depth(),
}
