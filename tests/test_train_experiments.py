"""Registered training experiments at tiny scale."""

from pathlib import Path

import pytest

import nclab.experiments.training  # noqa: F401  (registers the experiments)
from nclab.experiments import get, run
from nclab.io import read_metrics

FMNIST = Path("/usr/share/datasets/fashion-mnist")


def test_registered():
    assert get("fashion-mnist-cnn").paper == "[Han et al. 2022]" and "tiny" in get("digits-mlp-demo").scales


@pytest.mark.skipif(not FMNIST.is_dir(), reason="Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)")
def test_fashion_mnist_cnn_tiny(tmp_path):
    summary = run("fashion-mnist-cnn", tmp_path, scale="tiny")
    assert (tmp_path / "report.html").is_file()
    for loss in ("mse", "ce"):
        rows = read_metrics(tmp_path / loss)
        assert {r.layer for r in rows} == {"output", "block1", "block2", "fc"}
        # the summary is read off metrics.csv: the zero-error epoch is the first epoch whose train error row is 0,
        # and the NC1 entries are the penultimate layer's (fc) first and last logged values
        errors = sorted((r.epoch, r.value) for r in rows if r.metric == "error" and r.split == "train")
        zero = next((e for e, v in errors if v == 0.0), None)
        assert summary[f"{loss}: zero-error epoch"] == ("not reached" if zero is None else zero)
        assert all(v > 0 for e, v in errors if zero is None or e < zero)
        nc1 = sorted((r.epoch, r.value) for r in rows if r.metric == "nc1" and r.layer == "fc" and r.split == "train")
        assert {e for e, _ in nc1} >= {0, 3}
        assert summary[f"{loss}: nc1 first measured"] == nc1[0][1]
        assert summary[f"{loss}: nc1 last"] == nc1[-1][1]
        assert summary[f"{loss}: train error last"] == errors[-1][1]
