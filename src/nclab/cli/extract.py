"""Command ``extract``: a model's features streamed to memory-mapped ``.npy`` files (or one ``.safetensors``
file) for ``nclab measure``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from torch import nn

from nclab.cli.common import console, per_class_option, user_errors
from nclab.validation import check_output_dir

__all__ = ["extract_command", "load_model"]


def load_model(source: Path, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """The network of an ``nclab train`` run directory (``config.yaml`` + ``checkpoints/last.pt``), or a whole
    module saved with ``torch.save(model, path)`` (unpickled: only files you trust)."""
    import torch

    from nclab.io.yaml_io import load_yaml_file
    from nclab.nets import build_model
    from nclab.train import RunConfig
    from nclab.train.checkpoint import load_checkpoint

    if source.is_dir():
        cfg = RunConfig.model_validate(load_yaml_file(source / "config.yaml"))
        model = build_model(
            cfg.model.name, input_shape, num_classes, head=cfg.model.head.build_kwargs(), **cfg.model.options
        )
        saved = load_checkpoint(source / "checkpoints" / "last.pt")
        model.load_state_dict(saved["model"])
        return model
    obj = torch.load(source, map_location="cpu", weights_only=False)
    if not isinstance(obj, torch.nn.Module):
        raise ValueError(f"{source}: expected a run directory or a saved nn.Module, found {type(obj).__name__}")
    return obj


def extract_command(
    model: Annotated[Path, typer.Argument(help="an `nclab train` run directory, or a torch.save'd nn.Module")],
    data: Annotated[str, typer.Argument(help="dataset name (nclab.data: digits, mnist, cifar10, ...)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="output folder (LAYER.npy, labels.npy, W.npy, b.npy)")],
    layers: Annotated[
        list[str] | None, typer.Option("--layers", "-l", help="layer names (repeatable; default: penultimate)")
    ] = None,
    split: Annotated[str, typer.Option(help="train or test")] = "train",
    per_class: Annotated[int | None, per_class_option("balanced subset of n samples per class")] = None,
    batch_size: Annotated[int, typer.Option(help="samples per forward pass", min=1)] = 256,
    format: Annotated[
        str, typer.Option("--file-format", help="npy (one memory-mapped file per array) or safetensors (one file)")
    ] = "npy",
) -> None:
    """Stream features of a trained model on a dataset split to memory-mapped .npy files, ready for
    `nclab measure OUT/penultimate.npy OUT/labels.npy -w OUT/W.npy -b OUT/b.npy` (with --file-format safetensors:
    OUT/features.safetensors, `nclab measure OUT/features.safetensors:penultimate
    OUT/features.safetensors:labels -w OUT/features.safetensors:W -b OUT/features.safetensors:b`)."""
    from nclab.data import load
    from nclab.monitor import extract_features

    with user_errors():
        check_output_dir(out, name="--out")  # before the forward passes
        ds = load(data, split, per_class=per_class)
        net = load_model(model, ds.input_shape, ds.num_classes)
        batches = ((ds.x[i : i + batch_size], ds.y[i : i + batch_size]) for i in range(0, len(ds), batch_size))
        paths = extract_features(
            net, batches, layers or "penultimate", out=out, num_classes=ds.num_classes, format=format
        )
    for name, path in paths.items():
        console.print(f"{name}: {path}" + (f":{name}" if path.suffix == ".safetensors" else ""))
