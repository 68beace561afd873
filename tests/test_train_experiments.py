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
    assert {"mse_zero_error_epoch", "ce_zero_error_epoch"} <= set(summary)
    assert (tmp_path / "report.html").is_file()
    for loss in ("mse", "ce"):
        rows = read_metrics(tmp_path / loss)
        assert {r[2] for r in rows} == {"output", "block1", "block2", "fc"}
        assert {r[0] for r in rows if r[3] == "nc1"} >= {0, 3}
