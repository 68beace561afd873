"""The papers' training experiments at their own protocol (``nclab experiment run NAME --scale paper``).

Each builder returns the runs of one experiment as ``{label: RunConfig}``, built from the presets of
:mod:`nclab.train.presets` and the networks of :mod:`nclab.nets`; :func:`protocols_of` turns them into
:class:`~nclab.experiments.protocols.Protocol` values, which ``tests/test_reproduction_protocols.py`` compares with the
papers' table (:mod:`nclab.experiments.paper_protocols`, written apart from this module). Registered here:

* ``mse-nc-benchmarks`` -- [Han et al. 2022] Figs. 2-12 and Table 1: 5 datasets x (VGG, ResNet, DenseNet) of App.
  A.2, MSE (and CE for the Figs. 10-12 comparison), App. A.3's recipe;
* ``pfc-table1`` -- [Wang et al. 2024] Table I rows and Figs. 2-3: the Table I network of each dataset, Sec. IV-A's
  recipe, every block of the last stage measured;
* ``gnc-trained`` -- [Jiang et al. 2024] Fig. 2 (tau sweep, ResNet18 on CIFAR100 at d = 10), Fig. B.3 (three
  networks on CIFAR100 and Tiny-ImageNet), Figs. 4 / B.6 (class assignment, d = 2) and Fig. 5 (CMF head); its
  ``cpu`` scale is a stand-in for Figs. 2, 4 and 5 (from scratch) on Fashion-MNIST (:func:`gnc_cpu_configs`) and
  its summary the GNC metrics of the trained runs (:func:`gnc_of_runs`), the assignment comparison
  (:func:`assignment_of_runs`) and the CMF-vs-learned curves (:func:`cmf_of_runs`);

the paper-scale configs of ``fashion-mnist-cnn`` (the Fashion-MNIST column of [Han et al. 2022]) and
``vci-transfer`` ([Xu & Liu 2023] Sec. 6.3; :mod:`nclab.experiments.scale_protocols` declares both), and the
paper protocol of ``resnet-depth`` ([Tirer & Bruna 2022] Figs. 5 / 10; the experiment
itself is the CPU study's). Each of these experiments' ``tiny`` scale trains a few epochs on the embedded digits
through the same runner.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import numpy as np

from nclab.experiments.catalog import declare_protocols, register
from nclab.experiments.protocols import Protocol, RunSelection

__all__ = [
    "GNC_CPU_D",
    "GNC_CPU_TAUS",
    "GNC_FIG4_CLASSES",
    "GNC_FIG5_TAU",
    "GNC_TAUS",
    "GNC_TRAIN_ERROR_TARGET",
    "HAN2022_LR_GRID",
    "HAN2022_NETS",
    "VCI_LAMBDAS",
    "VCI_PROBE_SETS",
    "VCI_TAUS",
    "assignment_of_runs",
    "cmf_of_runs",
    "gnc_configs",
    "gnc_cpu_configs",
    "gnc_of_runs",
    "han2022_configs",
    "pfc_configs",
    "protocols_of",
    "resnet_depth_configs",
    "run_convergence",
    "train_runs",
    "vci_pretrain_base",
    "vci_transfer_configs",
    "vci_transfer_protocols",
]

#: [Han et al. 2022, App. A.3] (= Papyan et al. 2020): 25 learning rates, ``np.logspace(-4, log10(0.25), 25)``.
HAN2022_LR_GRID: tuple[float, ...] = tuple(float(x) for x in np.logspace(-4, np.log10(0.25), 25))

_DENSE = {"growth": 12}  # DenseNet-BC's growth rate; the depth is the paper's


def _densenet(depth: int) -> dict[str, Any]:
    return {"name": "densenet", "options": {"depth": depth, **_DENSE}}


#: [Han et al. 2022, App. A.2] per dataset: (VGG, ResNet, DenseNet) as ``build_model`` specs; VGGs with batch norm.
HAN2022_NETS: dict[str, dict[str, dict[str, Any]]] = {
    "mnist": {"vgg": {"name": "vgg11_bn"}, "resnet": {"name": "resnet18"}, "densenet": _densenet(40)},
    "fashion-mnist": {"vgg": {"name": "vgg11_bn"}, "resnet": {"name": "resnet18"}, "densenet": _densenet(250)},
    "svhn": {"vgg": {"name": "vgg13_bn"}, "resnet": {"name": "resnet34"}, "densenet": _densenet(40)},
    "cifar10": {"vgg": {"name": "vgg11_bn"}, "resnet": {"name": "resnet50"}, "densenet": _densenet(100)},
    # DenseNet201 is torchvision's (6, 12, 48, 32) ImageNet net, not built by nclab: densenet121 stands in
    "stl10": {"vgg": {"name": "vgg11_bn"}, "resnet": {"name": "resnet18"}, "densenet": {"name": "densenet121"}},
}
_HAN2022_PER_CLASS = {"mnist": 5000, "fashion-mnist": 5000, "svhn": 4600, "cifar10": 5000, "stl10": None}

#: Where every paper-scale run trains: one GPU (the cost estimates assume an H200) unless
#: :func:`nclab.experiments.run` is given ``device=`` (``nclab experiment run --device``), which sets this for the
#: experiment's duration (:func:`paper_device`).
PAPER_DEVICE: ContextVar[str] = ContextVar("nclab_paper_device", default="cuda")


@contextmanager
def paper_device(device: str) -> Iterator[None]:
    """Within the block, paper-scale runs train on ``device`` (a torch device string) instead of ``cuda``."""
    token = PAPER_DEVICE.set(device)
    try:
        yield
    finally:
        PAPER_DEVICE.reset(token)


def _gpu() -> dict[str, Any]:
    """The ``train`` settings of a paper-scale run: its device (:data:`PAPER_DEVICE`), threads as they are."""
    return {"train": {"device": PAPER_DEVICE.get(), "threads": None}}


def _resolve(raw: dict[str, Any]) -> Any:
    from nclab.train.config import deep_merge, resolve_config

    return resolve_config(deep_merge(raw, _gpu()))


def han2022_configs(datasets: tuple[str, ...] = tuple(HAN2022_NETS), losses: tuple[str, ...] = ("mse", "ce")) -> dict:
    """The [Han et al. 2022] runs ``{"dataset/net/loss": RunConfig}`` (App. A: MSE; CE as Papyan et al. 2020)."""
    out = {}
    for ds in datasets:
        for family, net in HAN2022_NETS[ds].items():
            for loss in losses:
                raw = {
                    "name": f"han2022-{ds}-{family}-{loss}",
                    "preset": f"han2022-{loss}",
                    "data": {"name": ds, "per_class": _HAN2022_PER_CLASS[ds], "pad_to": 32 if "mnist" in ds else None},
                    "model": {"name": net["name"], "options": dict(net.get("options", {}))},
                    "measure": {"epochs": "log", "num_log": 30, "splits": ["train", "test"], "layers": "penultimate"},
                    "checkpoint": {"every": 10},
                }
                out[f"{ds}/{net['name']}/{loss}"] = _resolve(raw)
    return out


def pfc_configs() -> dict:
    """The [Wang et al. 2024] Table I runs ``{"dataset/model": RunConfig}``."""
    out = {}
    for ds in ("mnist", "fashion-mnist", "cifar10", "stl10", "cifar100"):
        if ds == "mnist":
            model: dict[str, Any] = {"name": "fc_resnet", "options": {"width": 1000, "num_blocks": 10}}
        else:
            model = {"name": "pfc_resnet", "options": {"table": ds}}
        raw = {
            "name": f"wang2024-{ds}",
            "preset": "wang2024-pfc",
            "data": {"name": ds},
            "model": model,
            "optim": {"lr": 0.005 if ds == "mnist" else 0.01},
            # the geodesic model reads every measured layer's features of the split at once (Fashion-MNIST: 60,000
            # x 5 blocks x d = 3136, the flattened 64 x 7 x 7 maps, x 4 B = 3.8 GB); the default 256 MB skipped it
            "measure": {
                "epochs": "log",
                "num_log": 30,
                "splits": ["train"],
                "layers": "all",
                "geodesic": True,
                "cache_mb": 8192,
            },
            "checkpoint": {"every": 10},
        }
        out[f"{ds}/{model['name']}"] = _resolve(raw)
    return out


def _gnc(name: str, ds: str, net: str, d: int, tau: float, **over: Any) -> Any:
    from nclab.train.config import deep_merge

    image = {"image_size": 64, "workers": 8, "pin_memory": True} if ds == "tiny-imagenet" else {}
    raw = {
        "name": name,
        "preset": "jiang2023-gnc",
        "data": {"name": ds, "augment": "cifar_rot15", "normalize": True, **image},
        "model": {"name": net, "options": {"d": d}, "head": {"kind": "cosine", "tau": tau}},
        "measure": {"epochs": "log", "num_log": 20, "splits": ["train", "test"], "layers": "penultimate"},
        "checkpoint": {"every": 10},
    }
    return _resolve(deep_merge(raw, over))


#: [Jiang et al. 2024] Fig. 2's temperatures (its grid is not given; ours brackets the B.3 value 0.1).
GNC_TAUS: tuple[float, ...] = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def gnc_configs() -> dict:
    """The [Jiang et al. 2024] trained-network runs ``{"figure/dataset/model/...": RunConfig}``."""
    out = {}
    for tau in GNC_TAUS:
        out[f"fig2/cifar100/resnet18/tau{tau:g}"] = _gnc(f"jiang-fig2-tau{tau:g}", "cifar100", "resnet18", 10, tau)
    for ds in ("cifar100", "tiny-imagenet"):
        for model in ("resnet18", "densenet121", "resnext50_32x4d"):
            out[f"figB3/{ds}/{model}"] = _gnc(f"jiang-figB3-{ds}-{model}", ds, model, 10, 0.1)
    for model in ("resnet18", "densenet121", "resnext50_32x4d"):
        out[f"fig5/cifar100/{model}/cmf"] = _gnc(
            f"jiang-fig5-{model}-cmf", "cifar100", model, 20, 0.1, model={"head": {"kind": "cmf", "beta": 0.9}}
        )
    # Figs. 4 / B.6: the class-assignment runs, a step schedule and 5 trials each
    for fig, classes, tau, epochs in (("fig4", [1, 3, 5, 9], 0.05, 800), ("figB6", [1, 3, 4, 5, 7, 9], 0.2, 600)):
        # Fig. 4 compares the learned head with the square fixed in each assignment; Fig. B.6 the learned one only
        heads = {"": {}} if fig == "figB6" else {"" if h == "learned" else f"-{h}": {"head": head}
                                                  for h, head in _fig4_heads(tau).items()}  # fmt: skip
        for suffix, head_over in heads.items():
            out[f"{fig}/cifar10/resnet18/d2{suffix}"] = _gnc(
                f"jiang-{fig}{suffix}",
                "cifar10",
                "resnet18",
                2,
                tau,
                data={"augment": "cifar", "options": {"classes": classes}},
                schedule={"name": "multistep", "milestones": list(range(200, epochs, 200)), "gamma": 0.1},
                train={"epochs": epochs},
                **({"model": head_over} if head_over else {}),
            )
    return out


#: The cpu stand-in of [Jiang et al. 2024] Fig. 2: its temperatures (the paper's "relatively small" tau, which Fig. 4
#: uses at d = 2, and a large one for the contrast the figure shows), the bottleneck and the training set.
GNC_CPU_TAUS: tuple[float, ...] = (0.05, 0.5)
#: d = 3 < K = 10 (K > d + 1: no simplex ETF, the Softmax Code is the non-trivial one; rho* from the cached code
#: search). d = 2 did not fit: 10.7 % training error after 60 epochs and two classes on one arc (gnc2_ratio 0.04).
GNC_CPU_D = 3


def _gnc_cpu_raw(name: str, head: dict[str, Any], measure_epochs: list[int]) -> dict[str, Any]:
    """The raw config of the Fig. 2 stand-in's network, data and optimiser with classifier ``head``."""
    return {
        "name": name,
        "preset": "jiang2023-gnc@cpu",
        "data": {"name": "fashion-mnist", "per_class": 100, "test_per_class": 100},
        "model": {
            "name": "cnn",
            "options": {"channels": [16, 32], "hidden": 64, "d": GNC_CPU_D},
            "head": head,
        },
        "optim": {"name": "adamw", "lr": 1e-3, "weight_decay": 5e-4},
        # one thread: the numbers must not depend on the machine's core count (the sums' order changes with it)
        "train": {"epochs": 60, "batch_size": 128, "threads": 1},
        "measure": {"epochs": measure_epochs, "splits": ["train", "test"], "layers": "penultimate"},
    }


def gnc_cpu_configs() -> dict:
    """The cpu stand-in of [Jiang et al. 2024] Fig. 2 ``{"fig2/fashion-mnist/cnn-d3/tau...": RunConfig}``, with
    those of Fig. 4 (:func:`_fig4_cpu_configs`) and Fig. 5 (:func:`_fig5_cpu_configs`).

    A small CNN (:class:`~nclab.nets.SmallCNN`, channels 16-32, hidden 64, a linear ``d = 3`` bottleneck) with the
    paper's cosine head and CE at temperature tau, on 100 Fashion-MNIST images per class (K = 10), 60 epochs,
    no augmentation. AdamW (lr 1e-3, wd 5e-4, cosine schedule) instead of the paper's SGD 0.1: SGD at lr 0.1 /
    0.05 / 0.01 stayed at 13-16 % training error after 30-60 epochs, AdamW reaches zero by epoch ~40
    (measured 2026-11-26)."""
    from nclab.train.config import resolve_config

    out = {}
    for tau in GNC_CPU_TAUS:
        raw = _gnc_cpu_raw(f"jiang-fig2-cpu-tau{tau:g}", {"kind": "cosine", "tau": tau}, [20, 40, 60])
        out[f"fig2/fashion-mnist/cnn-d{GNC_CPU_D}/tau{tau:g}"] = resolve_config(raw)
    out.update(_fig4_cpu_configs())
    out.update(_fig5_cpu_configs())
    return out


#: The cpu stand-in of [Jiang et al. 2024] Fig. 5: the temperature (App. B: tau = 0.1, beta = 0.9) and the epochs
#: at which both runs are measured (the learning curves).
GNC_FIG5_TAU = 0.1
_FIG5_EPOCHS = list(range(5, 61, 5))


def _fig5_cpu_configs(*, tiny: bool = False) -> dict:
    """Fig. 5 (training from scratch): the Fig. 2 stand-in (same network, d = 3 < K - 1 as the paper's d = 20 <
    K - 1 = 99, same data and optimiser, same seed) once with the CMF head (:class:`~nclab.nets.CMFHead`, beta =
    0.9) and once with the learned cosine head it replaces, both at the paper's tau = 0.1, measured every 5 epochs
    (``tiny``: the same two runs on the embedded digits for 2 epochs, measured at both, the smoke test)."""
    from nclab.train.config import deep_merge, resolve_config

    heads: dict[str, dict[str, Any]] = {
        "learned": {"kind": "cosine", "tau": GNC_FIG5_TAU},
        "cmf": {"kind": "cmf", "tau": GNC_FIG5_TAU, "beta": 0.9},
    }
    out = {}
    for name, head in heads.items():
        raw = _gnc_cpu_raw(f"jiang-fig5-cpu-{name}", head, _FIG5_EPOCHS)
        if tiny:
            raw = deep_merge(raw, {
                "data": {"name": "digits", "per_class": 20, "test_per_class": 10},
                "model": {"options": {"channels": [4, 8], "hidden": 16}},
                "train": {"epochs": 2, "batch_size": 32, "threads": 1},
                "measure": {"epochs": [1, 2]},
                "report": False,
            })  # fmt: skip
        out[f"fig5/{raw['data']['name']}/cnn-d{GNC_CPU_D}/{name}"] = resolve_config(raw)
    return out


#: The cpu stand-in of [Jiang et al. 2024] Fig. 4: four Fashion-MNIST classes in two similar pairs, as the paper's
#: {Automobile, Truck} and {Cat, Dog}: T-shirt/top (0) with Shirt (6), Sneaker (7) with Ankle boot (9); relabelled
#: 0..3 in this order, so the similar pairs are (0, 1) and (2, 3).
GNC_FIG4_CLASSES: tuple[int, ...] = (0, 6, 7, 9)
#: The similar class pairs of Fig. 4, by dataset and original label: the paper's {automobile, truck} and {cat, dog}
#: of CIFAR-10, the stand-in's {T-shirt/top, Shirt} and {Sneaker, Ankle boot} of Fashion-MNIST.
_SIMILAR = {"cifar10": ({1, 9}, {3, 5}), "fashion-mnist": ({0, 6}, {7, 9}), "digits": ({0, 6}, {7, 9})}


def _similar_pairs(data: dict[str, Any]) -> set[tuple[int, int]]:
    """The similar pairs of a Fig. 4 run as indices of its relabelled classes (``data.options.classes``)."""
    classes = list(data["options"]["classes"])
    return {tuple(sorted(classes.index(c) for c in pair)) for pair in _SIMILAR[data["name"]]}  # type: ignore[misc]


def _fig4_heads(tau: float) -> dict[str, dict[str, Any]]:
    """Fig. 4's heads at d = 2: a learned cosine head and the square fixed in each of its 3 class assignments up to
    symmetry (:func:`nclab.geometry.enumerate_assignments`), named ``fixed-<assignment>``."""
    from nclab.geometry import regular_polygon
    from nclab.geometry.assignment import enumerate_assignments

    heads: dict[str, dict[str, Any]] = {"learned": {"kind": "cosine", "tau": tau}}
    for a in enumerate_assignments(regular_polygon(4)):
        heads["fixed-" + "".join(map(str, a))] = {"kind": "fixed", "code": "polygon", "assignment": [int(c) for c in a],
                                                  "tau": tau}  # fmt: skip
    return heads


def _fig4_cpu_configs(*, tiny: bool = False) -> dict:
    """Fig. 4 at d = 2: a learned cosine head and the square fixed in each of its 3 class assignments up to
    symmetry (:func:`nclab.geometry.enumerate_assignments`), tau = 0.05 as the paper, 500 training and 1000 test
    images per class, 30 epochs, the Fig. 2 stand-in's network and optimiser otherwise (``tiny``: the same runs
    on the embedded digits for 2 epochs, the smoke test)."""
    from nclab.train.config import deep_merge, resolve_config

    out = {}
    for name, head in _fig4_heads(0.05).items():
        raw: dict[str, Any] = {
            "name": f"jiang-fig4-cpu-{name}",
            "preset": "jiang2023-gnc@cpu",
            "data": {"name": "fashion-mnist", "per_class": 500, "test_per_class": 1000,
                     "options": {"classes": list(GNC_FIG4_CLASSES)}},
            "model": {"name": "cnn", "options": {"channels": [16, 32], "hidden": 64, "d": 2}, "head": head},
            "optim": {"name": "adamw", "lr": 1e-3, "weight_decay": 5e-4},
            "train": {"epochs": 30, "batch_size": 128, "threads": 1},
            "measure": {"epochs": [30], "splits": ["train", "test"], "layers": "penultimate"},
        }  # fmt: skip
        if tiny:
            raw = deep_merge(raw, {
                "data": {"name": "digits", "per_class": 20, "test_per_class": 10},
                "model": {"options": {"channels": [4, 8], "hidden": 16}},
                "train": {"epochs": 2, "batch_size": 32, "threads": 1},
                "measure": {"epochs": [2]},
                "report": False,
            })  # fmt: skip
        out[f"fig4/{raw['data']['name']}/cnn-d2/{name}"] = resolve_config(raw)
    return out


def _accuracy(record: Any, split: str) -> dict[int, float]:
    """``{epoch: 1 - the output layer's error}`` of a read run (:class:`~nclab.io.rundir.RunRecord`) on ``split``;
    empty when the run never measured it."""
    from nclab.io.run_table import OUTPUT_LAYER, MetricTable

    try:
        errors = MetricTable(record.rows).series("error", layer=OUTPUT_LAYER, split=split)
    except KeyError:
        return {}
    return {epoch: 1.0 - err for epoch, err in errors.items()}


def _run_key(folder: Path) -> str:
    """``"<run folder> seed<s>"``: a trained run's name in the summaries (its folder and seed folder)."""
    return f"{folder.parent.name} {folder.name}"


#: The target every ``gnc-trained`` run must reach to count in a claim: training error <= 5 % at the last epoch.
#: Ours (the paper states no training error for its Figs. 2, 4 and 5 runs): it tells a trained run from a stalled
#: one. At cpu scale the d = 2 runs of Fig. 4 end at 0-0.45 % (learned and two fixed assignments) and 2.8-3.2 %
#: (the fixed square with the similar pairs antipodal: that it fits worse is part of what the figure shows), a
#: stalled learned d = 2 head (two classes on one arc) at 27.5 %.
GNC_TRAIN_ERROR_TARGET = 0.05


def run_convergence(record: Any, label: str, *, target: float | None = None) -> dict[str, Any]:
    """The convergence keys (:func:`nclab.experiments.convergence.convergence_keys`) of a read run under
    ``label``: reached when its training error at the last measured epoch is <= ``target`` (default
    :data:`GNC_TRAIN_ERROR_TARGET`); its final loss is the training loss at that epoch (``None`` when the run did
    not record it)."""
    from nclab.experiments.convergence import convergence_keys
    from nclab.io.run_table import OUTPUT_LAYER, MetricTable

    target = GNC_TRAIN_ERROR_TARGET if target is None else target

    table = MetricTable(record.rows)
    errors = table.series("error", layer=OUTPUT_LAYER, split="train")
    last = max(errors)
    try:
        loss = table.series("loss", layer=OUTPUT_LAYER, split="train").get(last)
    except KeyError:
        loss = None
    err = errors[last]
    return convergence_keys(
        label,
        reached=err <= target,
        final_loss=loss,
        target=f"training error <= {100 * target:g} % at the last epoch",
        detail=f"{100 * err:.3g} % training error at epoch {last}",
    )


def _seed_of(folder: Path) -> str:
    return folder.name  # "seed<s>"


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    v = np.asarray(values, dtype=np.float64)
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def assignment_of_runs(folders: Sequence[Path]) -> dict[str, Any]:
    """The [Jiang et al. 2024, Fig. 4] comparison of the ``fig4-*`` runs in ``folders``.

    Every run is named by its role and seed, ``"fig4 <role> seed<s>"``: role ``learned`` (the learned cosine
    head), ``similar antipodal`` (the square fixed with the similar pairs antipodal, the paper's A3), ``fixed other
    1`` / ``fixed other 2`` (the other two assignments, in the order of their antipodal pairs); each gets its test
    accuracy (``"...: test accuracy"``) and its convergence keys (:func:`run_convergence`: target training error
    <= :data:`GNC_TRAIN_ERROR_TARGET`). Over the converged runs of each head (the others are listed in
    ``fig4_dropped`` with why): the mean test accuracy (``fig4_test_accuracy``, by assignment name), its sample
    standard deviation over seeds (``fig4_test_accuracy_sd``) and the number of runs (``fig4_seeds``), the similar-
    antipodal assignment's accuracy (``fig4_similar_antipodal_acc``) against the lowest of the others, the learned
    head's gap to the best fixed one, and how often the learned code puts a similar pair antipodal (from its trained
    rows: the class opposite class 0; ``fig4_learned_similar_antipodal`` when it does in more than half of the
    converged seeds). Empty when no such run exists."""
    from nclab.geometry import regular_polygon
    from nclab.geometry.assignment import antipodal_pairs
    from nclab.io.rundir import read_run
    from nclab.train.checkpoint import load_checkpoint

    found: list[tuple[str, Path, Any, float, dict[str, Any]]] = []  # name, folder, record, accuracy, opposite info
    similar_name: str | None = None
    for folder in (Path(f) for f in folders if Path(f).parent.name.startswith("fig4-")):
        record = read_run(folder)
        test = _accuracy(record, "test")
        if not test:
            continue
        head = record.config["model"]["head"]
        info: dict[str, Any] = {}
        if head["kind"] == "fixed":
            pairs = {tuple(sorted(p)) for p in antipodal_pairs(regular_polygon(4), head["assignment"])}
            name = "fixed antipodal " + " ".join(f"{p}-{q}" for p, q in sorted(pairs))
            similar_name = name if pairs == _similar_pairs(record.config["data"]) else similar_name
        else:
            name = "learned"
            W = load_checkpoint(folder / "checkpoints" / "last.pt")["model"]["head.weight"].double().numpy()
            U = W / np.linalg.norm(W, axis=1, keepdims=True)
            partner = next(q for p, q in _similar_pairs(record.config["data"]) if p == 0)
            info["opposite"] = int(np.argmin(U[1:] @ U[0])) + 1
            info["similar"] = info["opposite"] == partner
        found.append((name, folder, record, test[max(test)], info))
    others = sorted({n for n, *_ in found if n.startswith("fixed") and n != similar_name})
    if not any(n == "learned" for n, *_ in found) or similar_name is None or not others:
        return {}
    role = {"learned": "learned", similar_name: "similar antipodal"}
    role.update({n: f"fixed other {i + 1}" for i, n in enumerate(others)})
    out: dict[str, Any] = {"fig4_roles": {r: n for n, r in role.items()}}
    accs: dict[str, list[float]] = {}
    dropped: dict[str, str] = {}
    opposite: list[int] = []  # per converged learned seed: the class opposite class 0
    similar_opposite: list[bool] = []  # ... and whether it is class 0's similar partner
    for name, folder, record, acc, info in found:
        label = f"fig4 {role[name]} {_seed_of(folder)}"
        conv = run_convergence(record, label)
        out.update(conv)
        out[f"{label}: test accuracy"] = acc
        if info:  # 1 when this learned code puts class 0's similar partner opposite it
            out[f"{label}: similar antipodal"] = float(info["similar"])
        if not conv[f"{label}: converged"]:
            dropped[label] = conv[f"{label}: convergence"]
            continue
        accs.setdefault(name, []).append(acc)
        if info:
            opposite.append(info["opposite"])
            similar_opposite.append(info["similar"])
    stats = {name: _mean_sd(v) for name, v in accs.items()}
    acc_of = {name: m for name, (m, _) in stats.items()}
    rest = [a for name, a in acc_of.items() if name.startswith("fixed") and name != similar_name]
    out.update(fig4_dropped=dropped, fig4_seeds={name: len(v) for name, v in accs.items()})
    if "learned" not in acc_of or similar_name not in acc_of or not rest:
        return out  # too few converged runs: the aggregates are absent, the claims read the runs' keys
    similar_fraction = sum(similar_opposite) / len(similar_opposite)
    out.update({
        "fig4_test_accuracy": acc_of,
        "fig4_test_accuracy_sd": {name: sd for name, (_, sd) in stats.items()},
        "fig4_learned_acc": acc_of["learned"],
        "fig4_similar_antipodal_acc": acc_of[similar_name],
        "fig4_other_fixed_min_acc": min(rest),
        "fig4_learned_gap_to_best_fixed": max(a for n, a in acc_of.items() if n != "learned") - acc_of["learned"],
        "fig4_learned_opposite_of_class0": opposite if len(opposite) > 1 else opposite[0],
        "fig4_learned_similar_antipodal_fraction": similar_fraction,
        "fig4_learned_similar_antipodal": similar_fraction > 0.5,
    })  # fmt: skip
    return out


def cmf_of_runs(folders: Sequence[Path]) -> dict[str, Any]:
    """The [Jiang et al. 2024, Fig. 5] comparison of the ``fig5-*`` runs in ``folders``: the CMF head's and the
    learned head's accuracy (1 - error of the output layer), averaged over each head's seeds, on the test and
    training splits at every epoch all measured (``fig5_epochs``; the curves ``fig5_{test,train}_accuracy_curve``),
    the final ones (``fig5_{test,train}_accuracy``), and the mean test curves' gap learned - CMF: at the last epoch
    (``fig5_final_gap``, signed: > 0 when CMF is behind; ``fig5_final_abs_gap``) and its largest absolute value over
    the curve (``fig5_max_abs_gap``); ``fig5_seeds`` the seeds per head. Empty unless both heads ran with a common
    measured epoch."""
    from nclab.io.rundir import read_run

    runs: dict[str, list[dict[str, dict[int, float]]]] = {}  # head -> per seed: split -> epoch -> accuracy
    per_run: dict[str, Any] = {}
    dropped: dict[str, str] = {}
    for folder in (Path(f) for f in folders if Path(f).parent.name.startswith("fig5-")):
        record = read_run(folder)
        head = "cmf" if record.config["model"]["head"]["kind"] == "cmf" else "learned"
        label = f"fig5 {head} {_seed_of(folder)}"
        curves = {split: _accuracy(record, split) for split in ("test", "train")}
        conv = run_convergence(record, label)
        per_run.update(conv)
        if curves["test"]:
            per_run[f"{label}: test accuracy"] = curves["test"][max(curves["test"])]
        if not conv[f"{label}: converged"]:
            dropped[label] = conv[f"{label}: convergence"]
            continue
        runs.setdefault(head, []).append(curves)
    if set(runs) != {"cmf", "learned"}:
        return {**per_run, "fig5_dropped": dropped} if per_run else {}
    epochs = sorted(set.intersection(*(set(seed["test"]) for h in runs.values() for seed in h)))
    if not epochs:
        return {}
    curve = {split: {h: [float(np.mean([seed[split].get(e, np.nan) for seed in runs[h]])) for e in epochs]
                     for h in ("cmf", "learned")} for split in ("test", "train")}  # fmt: skip
    # accuracies are multiples of 1 / N_test: rounding keeps a gap of exactly one point from reading 0.0100...09,
    # past the claim's threshold
    gaps = [round(a - b, 12) for a, b in zip(curve["test"]["learned"], curve["test"]["cmf"], strict=True)]
    final = {h: _mean_sd([seed["test"][epochs[-1]] for seed in runs[h]]) for h in ("cmf", "learned")}
    return {
        **per_run,
        "fig5_dropped": dropped,
        "fig5_epochs": epochs,
        "fig5_seeds": {h: len(v) for h, v in runs.items()},
        "fig5_test_accuracy": {h: c[-1] for h, c in curve["test"].items()},
        "fig5_test_accuracy_sd": {h: sd for h, (_, sd) in final.items()},
        "fig5_train_accuracy": {h: c[-1] for h, c in curve["train"].items()},
        "fig5_test_accuracy_curve": curve["test"],
        "fig5_train_accuracy_curve": curve["train"],
        "fig5_final_gap": gaps[-1],
        "fig5_final_abs_gap": abs(gaps[-1]),
        "fig5_max_abs_gap": max(abs(g) for g in gaps),
        "fig5_max_gap": max(gaps),  # the furthest the CMF head falls behind the learned one (< 0: never behind)
    }


def resnet_depth_configs() -> dict:
    """The [Tirer & Bruna 2022] Figs. 5 / 10 runs: ResNet18 on MNIST (MSE without the classifier's bias, CE with
    it) and CIFAR10 (MSE without bias), lr 0.05 / 10 every 40 epochs, every residual stage measured."""
    out = {}
    for ds, loss, bias in (("mnist", "mse", False), ("mnist", "ce", True), ("cifar10", "mse", False)):
        raw = {
            "name": f"tirer2022-{ds}-{loss}",
            "data": {"name": ds, "pad_to": 32 if ds == "mnist" else None},
            "model": {"name": "resnet18", "head": {"kind": "linear", "bias": bias}},
            # the paper's MSE is 1/(2N) ||W H - Y||_F^2 (its eq. (2)): nclab's reduction "sum_half"
            "loss": {"name": loss, **({"reduction": "sum_half"} if loss == "mse" else {})},
            "optim": {"name": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4},
            "schedule": {"name": "multistep", "milestones": [40, 80], "gamma": 0.1},
            "train": {"epochs": 120, "batch_size": 128},
            "measure": {"epochs": "log", "num_log": 30, "splits": ["train"], "layers": "all"},
            "checkpoint": {"every": 10},
        }
        out[f"{ds}/resnet18/{loss}-{'bias' if bias else 'nobias'}"] = _resolve(raw)
    return out


#: [Xu & Liu 2023, Sec. 6.3]: the temperature and regulariser groups, the downstream probe sets, the L2 grid.
VCI_TAUS: tuple[float, ...] = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0)
VCI_LAMBDAS: tuple[float, ...] = (2.5, 3.75, 5.0, 7.5, 10.0)
VCI_PROBE_SETS: tuple[str, ...] = ("oxford-pets", "flowers102", "fgvc-aircraft", "stanford-cars", "dtd", "food101",
                                   "cifar10", "cifar100", "caltech101", "sun397")  # fmt: skip


def _vci_base() -> dict[str, Any]:
    return {
        "preset": "xu2023-vci",
        "data": {
            "name": "imagenet",
            "image_size": 224,
            "augment": "imagenet_autoaugment",
            "workers": 16,
            "pin_memory": True,
        },
        "model": {"name": "resnet50"},
        "optim": {"lr": 0.4},  # 0.1 x batch / 256 at the global batch 1024 (Sec. 6.1)
        "train": {"batch_size": 1024},
        "measure": {"epochs": list(range(0, 301, 20)), "splits": ["train", "test"], "layers": "penultimate"},
        "checkpoint": {"every": 5},
    }


def vci_pretrain_base() -> dict[str, Any]:
    """The raw config every [Xu & Liu 2023, Sec. 6.3] pretraining run shares, on the GPU (the ``base`` of the
    paper-scale transfer study, :func:`nclab.experiments.transfer.vci_paper_study`)."""
    from nclab.train.config import deep_merge

    return deep_merge(_vci_base(), _gpu())


def vci_transfer_configs() -> dict:
    """The [Xu & Liu 2023, Sec. 6.3] pretraining runs ``{"tau=..." | "lambda=...": RunConfig}``."""
    from nclab.train.config import deep_merge

    out = {}
    for tau in VCI_TAUS:
        out[f"tau={tau:g}"] = _resolve(deep_merge(_vci_base(), {"name": f"vci-tau{tau:g}", "loss": {"tau": tau}}))
    for lam in VCI_LAMBDAS:
        over = {"name": f"vci-lambda{lam:g}", "loss": {"name": "ce_cosreg", "cosreg_weight": lam}}
        out[f"lambda={lam:g}"] = _resolve(deep_merge(_vci_base(), over))
    return out


def vci_transfer_protocols() -> list[Protocol]:
    """The paper-scale protocols of ``vci-transfer``: each pretraining run with the downstream probes."""
    probes = {
        "downstream": [{"name": n, "dataset": n} for n in VCI_PROBE_SETS],
        "classifier": "multinomial logistic regression, L-BFGS",
        "lams": {"start": 1e-6, "stop": 1e6, "num": 97},
        "selection": "validation split",
    }
    return [Protocol.from_config(c, label, probes=probes) for label, c in vci_transfer_configs().items()]


def protocols_of(configs: dict, *, lr_sweep: tuple[float, ...] = (), seeds: dict | None = None) -> list[Protocol]:
    """``{label: RunConfig}`` as protocols (``seeds``: per label, default the config's seed)."""
    return [
        Protocol.from_config(c, label, lr_sweep=lr_sweep, seeds=(seeds or {}).get(label))
        for label, c in configs.items()
    ]


# ---------------------------------------------------------------------------------------------------- tiny scale
def _tiny_configs(kind: str) -> dict:
    """A smoke test of the runner on the embedded digits: two runs of two epochs in the shape of ``kind``'s."""
    from nclab.train.config import resolve_config

    preset = {"han2022": "han2022-mse@cpu", "pfc": "wang2024-pfc@cpu", "gnc": "jiang2023-gnc@cpu"}[kind]
    model: dict[str, Any] = {"name": "mlp", "options": {"widths": [32, 32]}}
    if kind == "pfc":
        model = {"name": "fc_resnet", "options": {"width": 32, "num_blocks": 3}}
    if kind == "gnc":  # a d = 3 < K bottleneck, so that the smoke test reaches GNC2 as the cpu scale does
        model = {"name": "cnn", "options": {"channels": [4, 8], "hidden": 16, "d": GNC_CPU_D}}
    out = {}
    for i, loss in enumerate(("mse", "ce") if kind == "han2022" else ("ce", "ce")):
        if kind == "gnc":  # the cpu scale's two temperatures
            model = {**model, "head": {"kind": "cosine", "tau": GNC_CPU_TAUS[i]}}
        raw = {
            "name": f"{kind}-tiny-{i}",
            "seed": i,
            "preset": f"han2022-{loss}@cpu" if kind == "han2022" else preset,
            "data": {"name": "digits", "per_class": 20, "test_per_class": 10},
            "model": model,
            "train": {"epochs": 2, "batch_size": 32, "threads": 1},
            # the pfc runs measure every block, so that the smoke test reaches the depth-order summary
            "measure": {"epochs": [2], "splits": ["train"], "layers": "all" if kind == "pfc" else "penultimate"},
            "report": False,
        }
        out[f"digits/{model['name']}/{loss}-{i}"] = resolve_config(raw)
    return {**out, **_fig4_cpu_configs(tiny=True), **_fig5_cpu_configs(tiny=True)} if kind == "gnc" else out


_BUILDERS = {
    "mse-nc-benchmarks": ("han2022", han2022_configs),
    "pfc-table1": ("pfc", pfc_configs),
    "gnc-trained": ("gnc", gnc_configs),
}


def _configs(name: str, scale: str) -> dict:
    kind, build = _BUILDERS[name]
    if scale == "cpu" and name == "gnc-trained":
        return gnc_cpu_configs()
    return _tiny_configs(kind) if scale == "tiny" else build()


def _seeds(name: str, configs: dict, scale: str) -> dict:
    # [Jiang et al. 2024, Sec. 4 / App. B.5]: 5 trials of each class-assignment run (the paper scale). The cpu
    # stand-in's Fig. 4 and Fig. 5 runs train 3 seeds: one seed moved Fig. 5's learned head 5.4 points, and a d = 2
    # learned head can stall with two classes on one arc (27.5 % training error in one Fig. 4 run), each more than
    # the claims' thresholds (the tiny scale trains Fig. 5 twice, to run the averaging). A run that misses its
    # target (GNC_TRAIN_ERROR_TARGET) is dropped from the claims and named
    if name != "gnc-trained":
        return {}
    if scale == "paper":
        return {k: (0, 1, 2, 3, 4) for k in configs if k.startswith(("fig4", "figB6"))}
    if scale == "cpu":  # the learned Fig. 4 head a fourth seed: a stalled run is dropped and >= 3 must converge
        return {k: (0, 1, 2, 3) if k.endswith("/learned") and k.startswith("fig4") else (0, 1, 2)
                for k in configs if k.startswith(("fig2", "fig4", "fig5"))}  # fmt: skip
    return {k: (0, 1) for k in configs if k.startswith("fig5")}


@declare_protocols("mse-nc-benchmarks")
def _han2022_protocols(scale: str) -> list[Protocol]:
    configs = _configs("mse-nc-benchmarks", scale)
    return protocols_of(configs, lr_sweep=HAN2022_LR_GRID if scale == "paper" else ())


@declare_protocols("pfc-table1")
def _pfc_protocols(scale: str) -> list[Protocol]:
    return protocols_of(_configs("pfc-table1", scale))


@declare_protocols("gnc-trained")
def _gnc_protocols(scale: str) -> list[Protocol]:
    configs = _configs("gnc-trained", scale)
    return protocols_of(configs, seeds=_seeds("gnc-trained", configs, scale))


@declare_protocols("resnet-depth", scales=("paper",))
def _resnet_depth_protocols(scale: str) -> list[Protocol]:
    return protocols_of(resnet_depth_configs())


# ---------------------------------------------------------------------------------------------------- runner
def run_plan(out: Path, configs: dict, *, seed: int = 0, seeds: dict | None = None) -> dict[str, tuple[Any, Path]]:
    """Where :func:`train_runs` trains each run: ``{"label seed<s>": (its RunConfig, its folder)}``, one per seed of
    ``seeds[label]`` (default ``(0,)``) shifted by ``seed``, in ``out/<label, / as ->/seed<s>``.

    Parameters
    ----------
    out : pathlib.Path
        The experiment's output folder.
    configs : dict
        ``{label: RunConfig}``.
    seed : int, default=0
        The experiment's seed: added to every run's config seed and seed index.
    seeds : dict, optional
        Per label, the seed indices to train (default one, 0).

    Returns
    -------
    dict
        ``{"label seed<s>": (RunConfig, pathlib.Path)}`` in the order of ``configs``.

    Examples
    --------
    >>> from nclab.train import resolve_config
    >>> plan = run_plan(Path("out"), {"fig5/cmf": resolve_config({"seed": 3})}, seed=1, seeds={"fig5/cmf": (0, 1)})
    >>> [(k, cfg.seed, folder.as_posix()) for k, (cfg, folder) in plan.items()]
    [('fig5/cmf seed1', 4, 'out/fig5-cmf/seed1'), ('fig5/cmf seed2', 5, 'out/fig5-cmf/seed2')]
    """
    plan = {}
    for label, cfg in configs.items():
        for s in (seeds or {}).get(label, (0,)):
            folder = Path(out) / label.replace("/", "-") / f"seed{seed + s}"
            plan[f"{label} seed{seed + s}"] = (cfg.model_copy(update={"seed": cfg.seed + seed + s}), folder)
    return plan


def train_runs(out: Path, configs: dict, *, seed: int = 0, seeds: dict | None = None, progress: bool = True) -> dict:
    """Train every run of ``configs`` (``{label: RunConfig}``) where :func:`run_plan` puts it; a run whose folder
    already holds its config is resumed (an interrupted experiment continues where it stopped), a folder holding
    another config refused before any run trains. Returns the summary (per run: its zero-error epoch, NC1 and
    errors, as ``fashion-mnist-cnn``'s) and writes ``out/report.html``."""
    from nclab.io.rundir import RunDir
    from nclab.report.html import metrics_table_html, write_report
    from nclab.report.run_report import collapse_summary
    from nclab.train.trainer import train

    plan = run_plan(out, configs, seed=seed, seeds=seeds)
    for run_cfg, folder in plan.values():  # every refusal before the first epoch
        _check_own_run(folder, run_cfg)
    runs = {}
    for key, (run_cfg, folder) in plan.items():
        resume = RunDir(folder).config.is_file()
        runs[key] = train(run_cfg, folder, resume=resume, overwrite=not resume, progress=progress)
    summary: dict[str, Any] = {}
    for key, r in runs.items():
        summary[f"{key}: zero-error epoch"] = "not reached" if r.zero_error_epoch is None else r.zero_error_epoch
        summary.update(
            {f"{key}: {k}": v for k, v in collapse_summary(r.rows, r.penultimate, r.zero_error_epoch).items()}
        )
    links = "".join(f'<li><a href="{r.out.relative_to(out)}/report.html">{k}</a></li>' for k, r in runs.items())
    write_report(
        Path(out) / RunDir.REPORT,
        f"{Path(out).name}: the paper's protocol",
        [("Runs", f"<ul>{links}</ul>" + metrics_table_html(summary))],
        [],
    )
    return summary


def _check_own_run(folder: Path, cfg: Any) -> None:
    """Refuse (``ValueError``) a run folder that holds a run of another config: an experiment resumes only its own
    runs (the trainer would extend a run cut with ``--epochs`` into the full protocol's, its schedule already
    spent on the shorter budget)."""
    from nclab.io.rundir import RunDir, config_differences
    from nclab.io.yaml_io import load_yaml_file

    saved = RunDir(folder).config
    if not saved.is_file():
        return
    diff = config_differences(load_yaml_file(saved), cfg.to_dict())
    if diff:
        raise ValueError(
            f"{folder} holds a run of another protocol (its config.yaml differs at {', '.join(diff)}); an experiment "
            "resumes only its own runs: give this one another output folder (-o), e.g. a cut (--runs, --epochs) "
            "and the full protocol apart; nothing was trained"
        )


def _run(name: str, out: Path, scale: str, seed: int, selection: RunSelection | None) -> tuple[dict, list[Path]]:
    """The summary of :func:`train_runs` and the run folders it trained: the summaries read those, not every folder
    under ``out`` (a cut into a folder of the full protocol reports its own runs only)."""
    configs = _configs(name, scale)
    seeds = _seeds(name, configs, scale)
    if selection is not None:
        configs = selection.apply(configs)
    summary = train_runs(out, configs, seed=seed, seeds=seeds, progress=scale != "tiny")
    return summary, [folder for _, folder in run_plan(out, configs, seed=seed, seeds=seeds).values()]


@register(
    "mse-nc-benchmarks",
    summary="MSE NC on 5 datasets x VGG/ResNet/DenseNet (Figs. 2-12, Table 1), and CE for Figs. 10-12",
    paper="[Han et al. 2022]",
    scales=("tiny", "paper"),
    selectable=True,
)
def mse_nc_benchmarks(out: Path, scale: str, seed: int, selection: RunSelection | None = None) -> dict[str, Any]:
    return _run("mse-nc-benchmarks", out, scale, seed, selection)[0]


@register(
    "pfc-table1",
    summary="Table I networks on MNIST, FMNIST, CIFAR10, STL10, CIFAR100: per-block PFC1-3, geodesic (Figs. 2-3)",
    paper="[Wang et al. 2024]",
    scales=("tiny", "paper"),
    selectable=True,
)
def pfc_table1(out: Path, scale: str, seed: int, selection: RunSelection | None = None) -> dict[str, Any]:
    summary, folders = _run("pfc-table1", out, scale, seed, selection)
    return {**summary, **pfc_depth_of_runs(folders)}


def pfc_depth_of_runs(folders: Sequence[Path]) -> dict[str, Any]:
    """The [Wang et al. 2024, Conjecture 1] depth order of the trained runs in ``folders``: per run
    (``pfc_by_run``) :func:`~nclab.experiments.theory_engines.pfc_depth_summary` of PFC1 (``trace_ratio``), PFC2
    (``etf_gram_error``) and PFC3 (``ncc_accuracy``) over its blocks ``layer0, layer1, ...`` at its last measured
    epoch (train split), and ``pfc{j}_depth_violations`` summed over the runs (the keys the claims read). Runs that
    measured fewer than two blocks are left out."""
    from nclab.experiments.theory_engines import pfc_depth_summary
    from nclab.io.rundir import read_run

    names = {"pfc1": "trace_ratio", "pfc2": "etf_gram_error", "pfc3": "ncc_accuracy"}
    per_run: dict[str, Any] = {}
    for folder in map(Path, folders):
        rows = [r for r in read_run(folder).rows if r.split == "train"]
        blocks = sorted({r.layer for r in rows if re.fullmatch(r"layer\d+", r.layer)}, key=lambda b: int(b[5:]))
        last = max((r.epoch for r in rows if r.layer in blocks and r.metric == "trace_ratio"), default=None)
        at = {(r.layer, r.metric): r.value for r in rows if r.epoch == last}
        if len(blocks) < 2 or any((b, m) not in at for b in blocks for m in names.values()):
            continue
        measured = {key: [at[(b, metric)] for b in blocks] for key, metric in names.items()}
        per_run[_run_key(folder)] = {"epoch": last, **pfc_depth_summary(measured)}
    totals = {f"{k}_depth_violations": sum(r[f"{k}_depth_violations"] for r in per_run.values()) for k in names}
    return {**totals, "pfc_by_run": per_run} if per_run else {}


#: The GNC metrics of [Jiang et al. 2024, Sec. 2] that :func:`gnc_of_runs` reads (``nclab.metrics``).
_GNC_KEYS = ("gnc1", "gnc2", "gnc2_ratio", "gnc3")


def gnc_of_runs(folders: Sequence[Path]) -> dict[str, Any]:
    """The [Jiang et al. 2024, Fig. 2] quantities of the trained runs in ``folders`` at their last measured epoch:
    per run (``gnc_by_run``) GNC1, GNC2 (``gnc2``: rho_one-vs-rest of the unit classifier rows), ``gnc2_ratio``
    (over the best known Softmax Code's margin for (K, d); absent when none is known cheaply) and GNC3 of the
    penultimate layer on the training split, the final train / test error and the zero-error epoch; and, at top
    level (the keys the claim reads), those of the run with the smallest tau (the paper's GNC regime), with its
    ``tau``, and under ``largest_tau`` those of the run with the largest (when the taus differ). Runs without GNC2
    (``K <= d``) are left out."""
    from nclab.io.run_table import OUTPUT_LAYER
    from nclab.io.rundir import read_run

    per_run: dict[str, Any] = {}
    keys: dict[str, Any] = {}  # the runs' convergence keys
    for folder in map(Path, folders):
        if folder.parent.name.startswith(("fig4-", "fig5-")):  # assignment_of_runs, cmf_of_runs
            continue
        record = read_run(folder)
        last = max((r.epoch for r in record.rows if r.metric == "gnc2"), default=None)
        if last is None:
            continue
        at = {(r.split, r.layer, r.metric): r.value for r in record.rows if r.epoch == last}
        layer = next(r.layer for r in record.rows if r.metric == "gnc2")  # the measured (penultimate) layer
        entry: dict[str, Any] = {"epoch": last, "tau": record.config["model"]["head"]["tau"]}
        entry.update({k: at[("train", layer, k)] for k in _GNC_KEYS if ("train", layer, k) in at})
        for split in ("train", "test"):
            if (split, OUTPUT_LAYER, "error") in at:
                entry[f"{split}_error"] = at[(split, OUTPUT_LAYER, "error")]
        entry["zero_error_epoch"] = record.zero_error_epoch
        # the run by figure, temperature and seed ("fig2 tau0.05 seed1"): the keys the claims read over seeds
        label = f"{folder.parent.name.split('-')[0]} tau{entry['tau']:g} {_seed_of(folder)}"
        conv = run_convergence(record, label)
        keys.update(conv)
        keys.update({f"{label}: {k}": v for k, v in entry.items() if k in (*_GNC_KEYS, "train_error", "test_error")})
        entry["converged"], entry["final_loss"] = conv[f"{label}: converged"], conv[f"{label}: final loss"]
        per_run[_run_key(folder)] = entry
    if not per_run:
        return {}
    first = min(per_run.values(), key=lambda e: e["tau"])
    last = max(per_run.values(), key=lambda e: e["tau"])
    # the run at the largest tau, for Fig. 2's contrast (small tau nearer the Softmax Code): only when it differs
    return {
        **keys,
        **first,
        **({"largest_tau": last} if last["tau"] > first["tau"] else {}),
        "gnc_by_run": per_run,
    }


@register(
    "gnc-trained",
    summary="cosine-head networks with K > d: tau sweep (Fig. 2), GNC prevalence (Fig. B.3), assignment (Figs. 4, "
    "B.6), CMF head (Fig. 5); cpu: Figs. 2 and 5 on Fashion-MNIST at d = 3, Fig. 4 at d = 2",
    paper="[Jiang et al. 2024]",
    selectable=True,
)
def gnc_trained(out: Path, scale: str, seed: int, selection: RunSelection | None = None) -> dict[str, Any]:
    summary, folders = _run("gnc-trained", out, scale, seed, selection)
    return {**summary, **gnc_of_runs(folders), **assignment_of_runs(folders), **cmf_of_runs(folders)}
