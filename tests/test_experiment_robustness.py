"""DeepFool robustness of training runs (the fashion-mnist-cnn keys): read back from the right checkpoints."""

from __future__ import annotations

import dataclasses

import pytest

from nclab.experiments import claims as pc
from nclab.experiments.han2022.summaries import robustness_images, robustness_keys
from nclab.experiments.registry import all_claims
from nclab.io.rundir import RunDir
from nclab.measure import deepfool
from nclab.nets import build_model
from nclab.train import resolve_config, train
from nclab.train.checkpoint import load_checkpoint

RUN = {
    "name": "robust",
    "data": {"name": "digits", "per_class": 40, "test_per_class": 10},
    "model": {"name": "mlp", "options": {"widths": [32, 32], "batchnorm": True}},
    "loss": {"name": "ce"},
    "optim": {"lr": 0.05, "weight_decay": 5e-3},
    "schedule": {"name": "constant"},
    "train": {"epochs": 12, "batch_size": 64, "threads": 1},
    "measure": {"num_log": 3, "zero_error_check": "every_epoch"},
    "checkpoint": {"keep_measured": True},
    "report": False,
}


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    return train(resolve_config(RUN), tmp_path_factory.mktemp("robust"), progress=False)


def _robustness_of(result, path, x, K):
    cfg = result.config
    model = build_model(cfg.model.name, tuple(x.shape[1:]), K, head=cfg.model.head.build_kwargs(), **cfg.model.options)
    model.load_state_dict(load_checkpoint(path)["model"])
    return deepfool(model, x)


def test_robustness_at_the_zero_error_epoch_and_last(digits_run):
    zero = digits_run.zero_error_epoch
    assert zero is not None and zero < 12  # the recipe reaches zero training error, then trains on
    x, K = robustness_images(digits_run.config, 3)
    assert tuple(x.shape) == (30, 1, 8, 8) and K == 10
    # the same images whatever the run's seed: the subset of seed 0
    other = digits_run.config.model_copy(update={"seed": 5})
    assert (robustness_images(other, 3)[0] == x).all()
    keys = robustness_keys(digits_run, x, K)
    run = RunDir(digits_run.out)
    at_zero = _robustness_of(digits_run, run.epoch_checkpoint(zero), x, K)
    last = _robustness_of(digits_run, run.checkpoint, x, K)
    assert keys["robustness at zero-error epoch"] == at_zero.robustness
    assert keys["robustness last"] == last.robustness
    assert keys["robustness last / at zero-error epoch"] == last.robustness / at_zero.robustness
    assert keys["robustness improvement after zero error"] == last.robustness / at_zero.robustness - 1
    assert keys["robustness unflipped at zero-error epoch"] == at_zero.unflipped
    assert keys["robustness unflipped last"] == last.unflipped
    assert at_zero.robustness != last.robustness  # two different networks were read
    assert 0 < at_zero.robustness < 10 and 0 < last.robustness < 10


def test_robustness_keys_without_zero_error_or_without_epoch_checkpoints(digits_run):
    x, K = robustness_images(digits_run.config, 1)
    never = robustness_keys(dataclasses.replace(digits_run, zero_error_epoch=None), x, K)
    assert never["robustness at zero-error epoch"] is None
    assert never["robustness last / at zero-error epoch"] is None
    assert never["robustness improvement after zero error"] is None
    assert never["robustness unflipped at zero-error epoch"] is None
    assert never["robustness last"] > 0
    cfg = digits_run.config
    plain = cfg.model_copy(update={"checkpoint": cfg.checkpoint.model_copy(update={"keep_measured": False})})
    assert robustness_keys(dataclasses.replace(digits_run, config=plain), x, K) == {}


def _claim(claim_id: str):
    return next(c for c in all_claims() if c.id == claim_id)


def _runs(loss: str, metric: str, values, converged=(True, True, True)) -> dict:
    """A hand-made fashion-mnist-cnn summary part: ``metric`` of ``loss``'s three seeds (labels as the experiment
    writes them), each run's convergence recorded."""
    out = {}
    for label, v, ok in zip((loss, f"{loss} seed1", f"{loss} seed2"), values, converged, strict=True):
        out[f"{label}: {metric}"] = v
        out.update(pc.convergence_keys(label, reached=ok, final_loss=0.01, target="zero training error"))
    return out


def test_fig9_robustness_after_zero_error_claim():
    claim = _claim("han2022-fig9-robustness-tpt")
    key = "robustness improvement after zero error"
    assert claim.quote.line == 436 and "0.1762" in claim.paper_says() and "0.9278" in claim.paper_says()
    # agrees: every seed more robust at the end (ratios 1.18, 1.25, 1.10)
    assert pc.verdict(claim, _runs("mse", key, (0.18, 0.25, 0.10))).status == "reproduced"
    # contradicts: less robust at the end on every seed
    assert pc.verdict(claim, _runs("mse", key, (-0.2, -0.3, -0.25))).status == "not reproduced"
    # a mean inside the seeds' spread: inconclusive
    noisy = pc.verdict(claim, _runs("mse", key, (0.3, -0.25, 0.05)))
    assert noisy.status == "inconclusive" and "inside the seeds' spread" in noisy.ours
    # a run that never reached zero error has no such ratio: dropped, named, and two seeds decide nothing
    dropped = _runs("mse", key, (0.18, None, 0.10), converged=(True, False, True))
    v = pc.verdict(claim, dropped)
    assert v.status == "inconclusive" and "dropped 1 of 3 runs (mse seed1" in v.ours
    # a result file without the robustness keys: not measured
    assert pc.verdict(claim, _runs("mse", "nc1 last", (1.0, 1.0, 1.0))).status == "not measured"


def test_fig11_mse_more_robust_than_ce_claim():
    claim = _claim("han2022-fig11-mse-vs-ce-robustness")
    key = "robustness last"
    assert claim.quote.line == 440 and "several magnitudes" in claim.quote.text
    agree = {**_runs("mse", key, (0.30, 0.32, 0.28)), **_runs("ce", key, (0.10, 0.12, 0.08))}
    assert pc.verdict(claim, agree).status == "reproduced"
    contradict = {**_runs("mse", key, (0.10, 0.12, 0.08)), **_runs("ce", key, (0.30, 0.32, 0.28))}
    assert pc.verdict(claim, contradict).status == "not reproduced"
    # MSE above CE by 0.03 with seeds' standard deviations 0.02 + 0.05: inside the spread
    close = {**_runs("mse", key, (0.13, 0.15, 0.11)), **_runs("ce", key, (0.05, 0.10, 0.15))}
    v = pc.verdict(claim, close)
    assert v.status == "inconclusive" and "spread" in v.ours
