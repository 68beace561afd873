"""Command ``extract``: a model's features streamed to memory-mapped ``.npy`` files (or one ``.safetensors``
file) for ``nclab measure``, from an in-memory dataset or a streamed image dataset (ImageNet-scale: decoded in
DataLoader workers, memory one batch, resumable with ``--resume``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from torch import nn

from nclab.cli.common import console, flag, per_class_option, user_errors, warnings_as_notes
from nclab.validation import check_output_dir

__all__ = ["extract_command", "load_model"]


def _run_config(source: Path) -> Any:
    """The resolved config of the run directory ``source``, or ``None`` when ``source`` is a file."""
    if not source.is_dir():
        return None
    from nclab.io.yaml_io import load_yaml_file
    from nclab.train import RunConfig

    return RunConfig.model_validate(load_yaml_file(source / "config.yaml"))


def _data_options(cfg: Any) -> dict[str, Any]:
    """The run's preprocessing (folder, padding, normalisation, dataset options), as ``nclab.data.load`` takes it."""
    d = cfg.data
    return dict(root=d.root, pad_to=d.pad_to, normalize=d.normalize, **d.options)


def _input_shape(ds: Any) -> tuple[int, ...]:
    """The input shape of an in-memory dataset, or of a streamed one's (transformed) first image."""
    return tuple(ds.input_shape) if hasattr(ds, "input_shape") else tuple(ds[0][0].shape)


def _first_input(ds: Any) -> Any:
    return ds.x[:1] if hasattr(ds, "x") else ds[0][0][None]


def _mismatch(source: Path, cfg: Any, data: str, ds: Any, err: Exception) -> ValueError:
    """Why the run's network does not fit ``ds``: both input shapes and class counts, and the first layer that
    differs."""
    from nclab.data import load

    try:  # the run's own input shape, from one test sample of its dataset
        own = load(cfg.data.name, "test", per_class=1, **_data_options(cfg))
        trained = f"inputs of shape {own.input_shape} and {own.num_classes} classes"
    except (OSError, ValueError):
        trained = "its data cannot be loaded here to tell its input shape"
    lines = str(err).splitlines()
    detail = next((line.strip().rstrip(".") for line in lines if "size mismatch" in line), lines[0] if lines else "")
    return ValueError(
        f"the network of {source} does not fit {data}: it was trained on {cfg.data.name} ({trained}), {data} has "
        f"inputs of shape {_input_shape(ds)} and {ds.num_classes} classes ({detail}). Extract features on "
        f"{cfg.data.name}, or on a dataset with the same input shape and number of classes"
    )


def load_model(source: Path, ds: Any, data: str) -> nn.Module:
    """The network of an ``nclab train`` run directory (``config.yaml`` + ``checkpoints/last.pt``), or a whole
    module saved with ``torch.save(model, path)`` (unpickled: only files you trust), checked to take the inputs of
    the dataset ``ds`` (named ``data``): a network of another input size is refused naming both shapes."""
    import torch

    from nclab.nets import build_model
    from nclab.train.checkpoint import load_checkpoint

    cfg = _run_config(source)
    if cfg is not None:
        model = build_model(
            cfg.model.name, _input_shape(ds), ds.num_classes, head=cfg.model.head.build_kwargs(), **cfg.model.options
        )
        saved = load_checkpoint(source / "checkpoints" / "last.pt")
        try:
            model.load_state_dict(saved["model"])
        except RuntimeError as err:  # torch's "size mismatch for blocks.0.0.weight ..."
            raise _mismatch(source, cfg, data, ds, err) from None
        return model
    obj = torch.load(source, map_location="cpu", weights_only=False)
    if not isinstance(obj, torch.nn.Module):
        raise ValueError(f"{source}: expected a run directory or a saved nn.Module, found {type(obj).__name__}")
    was = obj.training
    try:  # one sample through the network: a module of another input size fails here, not mid-extraction
        with torch.no_grad():
            obj.eval()(_first_input(ds))
    except RuntimeError as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(
            f"the network in {source} cannot take {data} inputs of shape {_input_shape(ds)}: {first}"
        ) from None
    finally:
        obj.train(was)
    return obj


def _dataset(data: str, split: str, per_class: int | None, cfg: Any, root: Path | None, image_size: int | None) -> Any:
    """The split to extract: an in-memory dataset (preprocessed as the run's when it trained on it), or a streamed
    image dataset with the run's test-time transform (or the default one at ``--image-size``)."""
    from nclab.data import IMAGE_DATASETS, load

    own = cfg is not None and cfg.data.name == data
    if data not in IMAGE_DATASETS:
        options = _data_options(cfg) if own else {}
        if root is not None:
            options["root"] = str(root)
        if image_size is not None:
            raise ValueError(f"--image-size applies to the streamed image datasets ({', '.join(IMAGE_DATASETS)})")
        return load(data, split, per_class=per_class, **options)
    from nclab.train import resolve_config
    from nclab.train.feeds import streamed_split

    raw = cfg.to_dict() if own else {"data": {"name": data}}
    raw["data"]["root"] = str(root) if root is not None else raw["data"].get("root")
    if image_size is not None:
        raw["data"]["image_size"] = image_size
    if raw["data"].get("image_size") is None:
        raise ValueError(f"--image-size is needed to extract the streamed dataset {data!r} (e.g. 224)")
    return streamed_split(resolve_config(raw), split, per_class=per_class)


def extract_command(
    model: Annotated[Path, typer.Argument(help="an `nclab train` run directory, or a torch.save'd nn.Module")],
    data: Annotated[str, typer.Argument(help="dataset name (nclab.data: digits, mnist, cifar10, ...)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="output folder (LAYER.npy, labels.npy, W.npy, b.npy)")],
    layers: Annotated[
        list[str] | None, typer.Option("--layers", "-l", help="layer names (repeatable; default: penultimate)")
    ] = None,
    split: Annotated[str, typer.Option(help="train or test (streamed datasets: their splits, e.g. val)")] = "train",
    per_class: Annotated[int | None, per_class_option("balanced subset of n samples per class")] = None,
    batch_size: Annotated[int, typer.Option(help="samples per forward pass", min=1)] = 256,
    format: Annotated[
        str, typer.Option("--file-format", help="npy (one memory-mapped file per array) or safetensors (one file)")
    ] = "npy",
    overwrite: Annotated[bool, flag("--overwrite", help="replace an earlier extraction in --out as a whole")] = False,
    resume: Annotated[
        bool, flag("--resume", help="continue an extraction into --out that was interrupted (killed, or an error)")
    ] = False,
    root: Annotated[Path | None, typer.Option(help="the dataset's folder (default: the run's, $NCLAB_DATA)")] = None,
    image_size: Annotated[
        int | None, typer.Option("--image-size", help="streamed datasets: side of the centre crop", min=1)
    ] = None,
    workers: Annotated[int, typer.Option(help="DataLoader worker processes decoding the images", min=0)] = 0,
) -> None:
    """Stream features of a trained model on a dataset split to memory-mapped .npy files, ready for
    `nclab measure OUT/penultimate.npy OUT/labels.npy -w OUT/W.npy -b OUT/b.npy` (with --file-format safetensors:
    OUT/features.safetensors, `nclab measure OUT/features.safetensors:penultimate
    OUT/features.safetensors:labels -w OUT/features.safetensors:W -b OUT/features.safetensors:b`).

    The files appear in OUT only when all of them are complete (with OUT/manifest.json, written last); a failure
    leaves OUT as it was. An earlier extraction in OUT is replaced only with --overwrite. With a run directory and
    its own dataset, the data is preprocessed as in training (the run's pad_to, normalize and options; for a
    streamed dataset its test-time transform). Streamed image datasets (imagenet, image-folder, ...) are decoded
    in --workers processes, one batch in memory at a time. An extraction that stops (an error, Ctrl-C, a kill)
    keeps its progress in a hidden folder of OUT: --resume continues it (same model, data, layers and
    --batch-size), into the files an uninterrupted extraction writes."""
    from nclab.monitor import extract_features

    with user_errors(OSError), warnings_as_notes():  # OSError: a full disk, an unreadable model file
        check_output_dir(out, name="--out")  # before the forward passes
        cfg = _run_config(model)
        ds = _dataset(data, split, per_class, cfg, root, image_size)
        net = load_model(model, ds, data)
        paths = extract_features(
            net,
            ds,
            layers or "penultimate",
            out=out,
            num_classes=ds.num_classes,
            format=format,
            overwrite=overwrite,
            batch_size=batch_size,
            workers=workers,
            resume=resume,
        )
    for name, path in paths.items():
        console.print(f"{name}: {path}" + (f":{name}" if path.suffix == ".safetensors" else ""))
