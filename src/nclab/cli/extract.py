"""Command ``extract``: a model's features streamed to memory-mapped ``.npy`` files (or one ``.safetensors``
file) for ``nclab measure``, or both splits in the layout ``nclab probe`` reads (``--layout probe``), from an
in-memory dataset or a streamed image dataset (ImageNet-scale: decoded in DataLoader workers, one batch in memory,
resumable with ``--resume``).

With a run directory, the data is loaded as the run loaded it (:func:`run_dataset`): the run's padding and
normalisation whatever the dataset, and on the run's own dataset also its folder, dataset options, seed and
balanced subset, so that the extracted features of the training split are the ones the run measured (a streamed
dataset: the run's test-time transform).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nclab.cli.common import (
    OutputFormat,
    emit,
    err_console,
    flag,
    format_option,
    out_option,
    per_class_option,
    user_errors,
    warnings_as_notes,
)

if TYPE_CHECKING:
    from torch import nn

__all__ = ["SavedModel", "extract_command", "load_model", "run_dataset"]


class Layout(StrEnum):
    """``--layout``: one split's files (for ``nclab measure``), or both splits (for ``nclab probe``)."""

    measure = "measure"
    probe = "probe"


def _run_config(source: Path) -> Any:
    """The resolved config of the ``nclab train`` run directory ``source``, or ``None`` when ``source`` is a file or
    a monitor's or callback's run folder (:func:`_run_identity`)."""
    if not source.is_dir():
        return None
    from nclab.io.rundir import RunDir
    from nclab.io.yaml_io import load_yaml_file
    from nclab.train import RunConfig

    run = RunDir(source)
    kind = run.kind()
    if kind == "monitor":
        return None
    if kind != "train":
        raise ValueError(
            f"{source} is not a run folder nclab can extract from (it holds: {kind}): name an `nclab train` run, "
            "a CollapseMonitor / callback run folder with --weights, or a torch.save'd model file"
        )
    if not run.config.is_file():
        raise ValueError(f"{source} has a checkpoint but no config.yaml: it is not a complete `nclab train` run")
    return RunConfig.model_validate(load_yaml_file(run.config))


def _run_identity(source: Path) -> Any:
    """The :class:`~nclab.io.rundir.RunIdentity` of a monitor's or callback's run folder ``source`` (what it
    measured: K, the layers, the parameter shapes), or ``None`` when ``source`` is not such a folder."""
    from nclab.io.rundir import RunDir

    if not source.is_dir() or RunDir(source).kind() != "monitor":
        return None
    ident = RunDir(source).saved_identity()
    if ident is None:
        raise ValueError(
            f"{source} holds a metrics table but no identity.json: it does not say what was measured; extract "
            "from the model file instead (nclab extract MODEL.pt DATA --layers ...)"
        )
    return ident


def run_dataset(cfg: Any, data: str, split: str, per_class: int | None = None, *, root: Path | None = None) -> Any:
    """The split ``split`` of dataset ``data`` preprocessed as the run of config ``cfg`` preprocessed its data.

    Every dataset gets the run's ``pad_to`` and ``normalize`` (a network trained on 32 x 32 inputs takes 32 x 32
    inputs). The run's own dataset also gets its ``root``, its dataset ``options`` and its seed, and, unless
    ``per_class`` is given, the balanced subset the run drew (``data.per_class`` of the training split,
    ``data.test_per_class`` of the test split): the same samples as the run's measurements. ``cfg`` ``None``
    (a saved module): the dataset as :func:`nclab.data.load` gives it. ``root``: the dataset's folder (``--root``),
    instead of the run's or the default."""
    from nclab.data import load

    given: dict[str, Any] = {} if root is None else {"root": str(root)}
    if cfg is None:
        return load(data, split, per_class=per_class, **given)
    d = cfg.data
    options: dict[str, Any] = {"pad_to": d.pad_to, "normalize": d.normalize}
    if data == d.name:
        options |= {"root": d.root, "seed": cfg.seed, **d.options}
        if per_class is None:
            per_class = d.per_class if split == "train" else d.test_per_class
    return load(data, split, per_class=per_class, **(options | given))


def _input_shape(ds: Any) -> tuple[int, ...]:
    """The input shape of an in-memory dataset, or of a streamed one's (transformed) first image."""
    return tuple(ds.input_shape) if hasattr(ds, "input_shape") else tuple(ds[0][0].shape)


def _first_input(ds: Any) -> Any:
    return ds.x[:1] if hasattr(ds, "x") else ds[0][0][None]


def _mismatch(source: Path, cfg: Any, data: str, ds: Any, err: Exception) -> ValueError:
    """Why the run's network does not fit ``ds``: both input shapes and class counts, and the first layer that
    differs."""
    try:  # the run's own input shape, from one test sample of its dataset
        own = run_dataset(cfg, cfg.data.name, "test", per_class=1)
        trained = f"inputs of shape {own.input_shape} and {own.K} classes"
    except (OSError, ValueError):
        trained = "its data cannot be loaded here to tell its input shape"
    lines = str(err).splitlines()
    detail = next((line.strip().rstrip(".") for line in lines if "size mismatch" in line), lines[0] if lines else "")
    return ValueError(
        f"the network of {source} does not fit {data}: it was trained on {cfg.data.name} ({trained}), {data} has "
        f"inputs of shape {_input_shape(ds)} and {ds.K} classes ({detail}). Extract features on "
        f"{cfg.data.name}, or on a dataset with the same input shape and number of classes"
    )


def load_model(source: Path, ds: Any, data: str, saved: SavedModel | None = None) -> nn.Module:
    """The network of an ``nclab train`` run directory (``config.yaml`` + ``checkpoints/last.pt``), or a model saved
    with ``torch.save`` (``saved``: the file, and the class a state dict or a script-defined class needs; see
    :func:`nclab.nets.saved.load_saved_model`), checked to take the inputs of the dataset ``ds`` (named ``data``): a
    network of another input size is refused naming both shapes."""
    import torch

    from nclab.io.rundir import RunDir
    from nclab.nets import build_model
    from nclab.train.checkpoint import load_checkpoint

    cfg = _run_config(source)
    if cfg is not None:
        model = build_model(
            cfg.model.name, _input_shape(ds), ds.K, head=cfg.model.head.build_kwargs(), **cfg.model.options
        )
        checkpoint = load_checkpoint(RunDir(source).checkpoint)
        try:
            model.load_state_dict(checkpoint["model"])
        except RuntimeError as err:  # torch's "size mismatch for blocks.0.0.weight ..."
            raise _mismatch(source, cfg, data, ds, err) from None
        return model
    from nclab.nets.saved import load_saved_model

    saved = saved or SavedModel(source)
    obj = load_saved_model(saved.file, saved.model_class, saved.model_kwargs)
    was = obj.training
    try:  # one sample through the network: a module of another input size fails here, not mid-extraction
        with torch.no_grad():
            obj.eval()(_first_input(ds))
    except RuntimeError as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(
            f"the network in {saved.file} cannot take {data} inputs of shape {_input_shape(ds)}: {first}"
        ) from None
    finally:
        obj.train(was)
    return obj


@dataclass(frozen=True)
class SavedModel:
    """A model saved with ``torch.save``: the ``file``, and the class (``"MODULE:CLASS"`` / ``"FILE.py:CLASS"``) and
    constructor keywords that a state dict, or a whole module of a script-defined class, needs to load."""

    file: Path
    model_class: str | None = None
    model_kwargs: dict[str, Any] = field(default_factory=dict)


def _check_identity(source: Path, ident: Any, net: nn.Module, K: int) -> None:
    """Refuse a model that is not the one a monitor run measured: another K or other parameter shapes."""
    hashed = ident.hashed or {}
    if hashed.get("num_classes") not in (None, K):
        raise ValueError(f"{source} measured {hashed['num_classes']} classes, the dataset has {K}")
    shapes = hashed.get("parameters")
    if shapes is None:
        return
    own = {n: list(p.shape) for n, p in net.named_parameters()}
    for name, shape in shapes.items():
        if own.get(name) != list(shape):
            got = "no such parameter" if name not in own else f"shape {own[name]}"
            raise ValueError(
                f"the model in --weights is not the one {source} measured: parameter {name!r} had shape "
                f"{list(shape)} there, {got} here"
            )


def _dataset(cfg: Any, data: str, split: str, per_class: int | None, root: Path | None, image_size: int | None) -> Any:
    """The split to extract: an in-memory dataset (:func:`run_dataset`), or a streamed image dataset with the run's
    test-time transform (or the default one at ``--image-size``)."""
    from nclab.data import IMAGE_DATASETS

    if data not in IMAGE_DATASETS:
        if image_size is not None:
            raise ValueError(f"--image-size applies to the streamed image datasets ({', '.join(IMAGE_DATASETS)})")
        return run_dataset(cfg, data, split, per_class, root=root)
    from nclab.train import resolve_config
    from nclab.train.feeds import streamed_split

    own = cfg is not None and cfg.data.name == data
    raw: dict[str, Any] = cfg.to_dict() if own else {"data": {"name": data}}
    raw["data"]["root"] = str(root) if root is not None else raw["data"].get("root")
    if image_size is not None:
        raw["data"]["image_size"] = image_size
    if raw["data"].get("image_size") is None:
        raise ValueError(f"--image-size is needed to extract the streamed dataset {data!r} (e.g. 224)")
    return streamed_split(resolve_config(raw), split, per_class=per_class)


def _extract_split(
    model: Path, source: _Source, data: str, split: str, out: Path, layers: list[str], options: dict[str, Any]
) -> tuple[dict[str, Path], Any]:
    """One split's extraction into ``out``: ``({array name: path}, dataset)``. The dataset itself goes to
    :func:`~nclab.monitor.extract_features` (read by index, so an interrupted extraction resumes with ``resume``)."""
    from nclab.monitor import extract_features

    ds = _dataset(source.cfg, data, split, options.pop("per_class"), options.pop("root"), options.pop("image_size"))
    net = load_model(model, ds, data, source.saved)
    if source.identity is not None:
        _check_identity(model, source.identity, net, ds.K)
    return extract_features(net, ds, layers, out=out, K=ds.K, **options), ds


@dataclass(frozen=True)
class _Source:
    """What ``nclab extract`` reads: a train run's config, or a saved model (with, for a monitor's or callback's
    run folder, the identity that says what it measured)."""

    cfg: Any = None
    saved: SavedModel | None = None
    identity: Any = None


def _source(model: Path, weights: Path | None, model_class: str | None, model_kwargs: str | None) -> _Source:
    """Resolve MODEL and the options that say how to load it; a combination that cannot apply is refused."""
    import json

    kwargs: dict[str, Any] = {}
    if model_kwargs is not None:
        try:
            kwargs = json.loads(model_kwargs)
        except json.JSONDecodeError as err:
            raise ValueError(f"--model-kwargs must be a JSON object, e.g. '{{\"hidden\": 64}}' ({err})") from None
        if not isinstance(kwargs, dict):
            raise ValueError(f"--model-kwargs must be a JSON object, got {type(kwargs).__name__}")
    cfg = _run_config(model)
    if cfg is not None:
        if weights is not None or model_class is not None or model_kwargs is not None:
            raise ValueError(
                f"{model} is an `nclab train` run: its config builds the model; --weights, --model-class and "
                "--model-kwargs apply to saved models and monitor run folders"
            )
        return _Source(cfg=cfg)
    ident = _run_identity(model)
    if ident is None:
        if weights is not None:
            raise ValueError(f"--weights applies to a monitor or callback run folder; {model} is a model file")
        return _Source(saved=SavedModel(model, model_class, kwargs))
    if weights is None:
        raise ValueError(
            f"{model} is a {ident.writer} run folder: it holds the metrics, not the model. Pass the model with "
            "--weights FILE (a torch.save'd module or state dict; --model-class MODULE:CLASS for your own class)"
        )
    return _Source(saved=SavedModel(weights, model_class, kwargs), identity=ident)


def _spec(path: Path, name: str) -> str:
    """How ``nclab measure`` names array ``name`` of the file ``path`` (``FILE:NAME`` inside a .safetensors)."""
    return f"{path}:{name}" if path.suffix == ".safetensors" else str(path)


def extract_command(
    model: Annotated[
        Path,
        typer.Argument(
            help="an `nclab train` run directory, a torch.save'd model, or a monitor run folder (--weights)"
        ),
    ],
    data: Annotated[
        str | None,
        typer.Argument(help="dataset name (nclab.data: digits, mnist, cifar10, ...); default: the run's own"),
    ] = None,
    out: Annotated[
        Path | None, out_option("output folder (default runs/features/<run or model name>-<dataset>-<split>)")
    ] = None,
    layers: Annotated[
        list[str] | None,
        typer.Option("--layers", "-l", help="layer names (repeatable; default: penultimate)", metavar="<str>"),
    ] = None,
    split: Annotated[str, typer.Option(help="train or test (--layout measure)")] = "train",
    layout: Annotated[
        Layout,
        typer.Option(
            help="measure: OUT/LAYER.npy, labels.npy, W.npy, b.npy of one split; probe: OUT/train/ and OUT/test/, "
            "each such an extraction of one layer, the folder `nclab probe -t NAME=OUT` reads"
        ),
    ] = Layout.measure,
    per_class: Annotated[
        int | None, per_class_option("balanced subset of n samples per class (default: the run's own subset)")
    ] = None,
    batch_size: Annotated[int, typer.Option(help="samples per forward pass", min=1)] = 256,
    file_format: Annotated[
        str, typer.Option("--file-format", help="npy (one memory-mapped file per array) or safetensors (one file)")
    ] = "npy",
    overwrite: Annotated[bool, flag("--overwrite", help="replace an earlier extraction in --out as a whole")] = False,
    fmt: Annotated[OutputFormat, format_option()] = OutputFormat.table,
    resume: Annotated[
        bool, flag("--resume", help="continue an extraction into --out that was interrupted (killed, or an error)")
    ] = False,
    root: Annotated[Path | None, typer.Option(help="the dataset's folder (default: the run's, $NCLAB_DATA)")] = None,
    image_size: Annotated[
        int | None, typer.Option("--image-size", help="streamed datasets: side of the centre crop", min=1)
    ] = None,
    workers: Annotated[int, typer.Option(help="DataLoader worker processes decoding the images", min=0)] = 0,
    model_class: Annotated[
        str | None,
        typer.Option(
            "--model-class",
            help="the saved model's class, MODULE:CLASS or FILE.py:CLASS: needed for a state dict, and for a "
            "torch.save'd module whose class was defined in the saving script",
        ),
    ] = None,
    model_kwargs: Annotated[
        str | None, typer.Option("--model-kwargs", help="JSON object of the class's constructor arguments")
    ] = None,
    weights: Annotated[
        Path | None,
        typer.Option(help="with a CollapseMonitor / callback run folder as MODEL: the model file (torch.save'd)"),
    ] = None,
) -> None:
    """Stream a trained model's features on a dataset to memory-mapped files for `nclab measure` or `nclab probe`.

    Files (--layout measure): OUT/LAYER.npy per layer, OUT/labels.npy, and the classifier OUT/W.npy and OUT/b.npy.
    A layer's file is named as the network names the layer: `-l penultimate` (the default) writes the
    classifier's input under its module name (e.g. layer3.npy for an nclab MLP, fc.npy for the CNN; manifest.json
    records it as "penultimate"), a Sequential's unnamed penultimate layer as penultimate.npy. The command prints
    every file and the `nclab measure` line that reads them. With --file-format safetensors the arrays are the
    tensors of OUT/features.safetensors (read as OUT/features.safetensors:NAME).

    With --layout probe, OUT/train/ and OUT/test/ hold one layer's extraction of each split (each committed on
    its own): the downstream folder of `nclab probe -t NAME=OUT`.

    A run directory's data is loaded as the run loaded it: its pad_to and normalize on every dataset; on its own
    dataset also its folder, options, seed and balanced subset (--per-class replaces the subset). The files appear
    in OUT only when all of them are complete (with OUT/manifest.json, written last); a failure leaves OUT as it
    was. An earlier extraction in OUT is replaced only with --overwrite. Streamed image datasets (imagenet,
    image-folder, ...) are decoded in --workers processes, one batch in memory at a time. An extraction that stops
    (an error, Ctrl-C, a kill) keeps its progress in a hidden folder of OUT: --resume continues it (same model,
    data, layers and --batch-size), into the files an uninterrupted extraction writes.

    MODEL is an `nclab train` run directory, a model file written by torch.save (a whole module, or a state dict
    with --model-class and --model-kwargs; a module whose class was defined in the script that saved it needs
    --model-class FILE.py:CLASS, and the file runs on import, so keep its training under
    `if __name__ == "__main__":`), or the run folder of a CollapseMonitor or a Lightning / Hugging Face callback
    with --weights FILE: its identity.json says which layers it measured (the default --layers) and the model
    must have the parameter shapes it recorded."""
    from nclab.validation import check_output_dir

    with user_errors(OSError), warnings_as_notes():  # OSError: a full disk, an unreadable model file
        source = _source(model, weights, model_class, model_kwargs)
        cfg = source.cfg
        if data is None:
            if cfg is None:
                raise ValueError(f"{model} is not an `nclab train` run, so its dataset is unknown: name it (DATA)")
            data = cfg.data.name
        if layers is None and source.identity is not None:
            layers = list((source.identity.hashed or {}).get("layers") or []) or None
        splits = ["train", "test"] if layout is Layout.probe else [split]
        if layout is Layout.probe and layers is not None and len(layers) != 1:
            raise ValueError(f"--layout probe extracts one layer, got --layers {' '.join(layers)}")
        name = model.name if model.is_dir() else model.stem
        out = out or Path("runs") / "features" / (f"{name}-{data}" + ("" if layout is Layout.probe else f"-{split}"))
        check_output_dir(out, name="--out")  # before the forward passes
        written = {}
        for s in splits:
            target = out / s if layout is Layout.probe else out
            options = {
                "per_class": per_class,
                "root": root,
                "image_size": image_size,
                "batch_size": batch_size,
                "workers": workers,
                "resume": resume,
                "format": file_format,
                "overwrite": overwrite,
            }
            written[s] = _extract_split(model, source, data, s, target, layers or ["penultimate"], options)
    files = {s: {k: _spec(p, k) for k, p in paths.items()} for s, (paths, _) in written.items()}
    shapes = {s: _shapes(next(iter(paths.values())).parent) for s, (paths, _) in written.items()}
    rows = [
        {"split": s, "array": k, "shape": shapes[s].get(k, "see manifest.json"), "file": f}
        for s in files
        for k, f in files[s].items()
    ]
    emit(rows, fmt, f"features of {model} on {data}", data=files)
    err_console.print(_next_step(files, layout, data, out), markup=False, highlight=False, soft_wrap=True)


def _shapes(folder: Path) -> dict[str, str]:
    """``{array name: "N x d"}`` of the extraction in ``folder``, from its manifest."""
    from nclab.io.manifest import read_manifest

    found = read_manifest(folder) or {}
    arrays = {k: v for entry in found.get("files", {}).values() for k, v in entry.get("arrays", {}).items()}
    return {k: " x ".join(map(str, v["shape"])) or "scalar" for k, v in arrays.items()}


def _next_step(files: dict[str, dict[str, str]], layout: Layout, data: str, out: Path) -> str:
    """The command that reads the extraction: ``nclab measure`` of one split's first layer, or the ``-t`` option
    of ``nclab probe``."""
    if layout is Layout.probe:
        return f"probe with: nclab probe FEATURES LABELS -t {data}={out}"
    (arrays,) = files.values()
    feature = next(k for k in arrays if k not in ("labels", "W", "b"))
    clf = "".join(f" -{k.lower()} {arrays[k]}" for k in ("W", "b") if k in arrays)
    return f"measure with: nclab measure {arrays[feature]} {arrays['labels']}{clf}"
