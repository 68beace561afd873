"""Experiment ``resnet-depth`` ([Tirer & Bruna 2022, Figs. 5 / 10]) at tiny scale, and its pieces."""

import numpy as np
import pytest

from nclab.experiments import get, run
from nclab.experiments.tirer_bruna2022.experiments import DEPTHS, block_layers, depth_config, stage_layers
from nclab.geometry import orthogonal_frame, simplex_etf
from nclab.io import read_metrics
from nclab.metrics import orthogonal_frame_error
from nclab.nets import build_model
from nclab.train.checkpoint import load_checkpoint


def test_block_and_stage_layers_of_resnet18():
    names = list(build_model("resnet18", (1, 8, 8), 10).measured_layers())
    assert block_layers(names) == [f"layer{s}.{b}" for s in range(1, 5) for b in range(2)]
    assert stage_layers(names) == ["layer1.1", "layer2.1", "layer3.1", "layer4.1"]
    resnet34 = list(build_model("resnet34", (1, 8, 8), 10).measured_layers())
    assert len(block_layers(resnet34)) == 3 + 4 + 6 + 3
    assert stage_layers(resnet34) == ["layer1.2", "layer2.3", "layer3.5", "layer4.2"]


def test_of_error_is_zero_on_an_orthogonal_frame_and_the_etf_value_on_an_etf():
    # the metric the summary's OF errors use: 0 on an exact OF (any scale), sqrt(2 - 2 sqrt((K-1)/K)) on an ETF
    assert orthogonal_frame_error(3.0 * orthogonal_frame(10, 16, seed=0)) == pytest.approx(0.0, abs=1e-12)
    etf = simplex_etf(10, 16, seed=0)
    assert orthogonal_frame_error(etf) == pytest.approx(np.sqrt(2 - 2 * np.sqrt(9 / 10)), abs=1e-12)


def test_config_is_the_papers_recipe():
    cfg = depth_config("cpu", "resnet18")  # the CPU runs keep the paper's recipe on smaller data
    assert cfg["model"]["head"] == {"kind": "linear", "bias": False}
    assert (cfg["loss"]["name"], cfg["loss"]["reduction"]) == ("mse", "sum_half")
    assert (cfg["optim"]["lr"], cfg["optim"]["weight_decay"]) == (0.05, 5e-4)


def test_paper_scale_runs_what_dry_run_lists():
    from nclab.experiments import dry_run
    from nclab.experiments.tirer_bruna2022.experiments import _runs

    runs = _runs("paper", seed=0)
    listed = dry_run("resnet-depth", "paper")
    assert [p.label for p in listed] == list(runs)
    mse = runs["mnist/resnet18/mse-nobias"]
    assert (mse.loss.name, mse.loss.reduction) == ("mse", "sum_half")  # the paper's 1/(2N) ||WH - Y||^2
    assert mse.model.head.bias is False and runs["mnist/resnet18/ce-bias"].model.head.bias is True
    assert (mse.optim.lr, mse.optim.weight_decay, mse.schedule.milestones) == (0.05, 5e-4, [40, 80])
    assert {cfg.data.name for cfg in runs.values()} == {"mnist", "cifar10"}


def test_resnet_depth_tiny(tmp_path):
    assert get("resnet-depth").paper == "[Tirer & Bruna 2022]"
    summary = run("resnet-depth", tmp_path, scale="tiny")
    assert summary["networks"] == list(DEPTHS) and summary["per_block_metric"] == "nc1"
    for i, model in enumerate(DEPTHS):
        net = build_model(model, (1, 8, 8), 10)
        blocks = block_layers(list(net.measured_layers()))
        # one NC1 per residual block of the network, equal to the last measured epoch's rows in metrics.csv
        assert len(summary["nc1_by_block"][i]) == len(blocks) == {"resnet18": 8, "resnet34": 16}[model]
        rows = read_metrics(tmp_path / model)
        last = max(r.epoch for r in rows)
        nc1 = {r.layer: r.value for r in rows if r.metric == "nc1" and r.epoch == last and r.split == "train"}
        assert summary["nc1_by_block"][i] == [nc1[b] for b in blocks]
        assert summary["nc1_by_stage"][i] == [nc1[s] for s in stage_layers(blocks)]
        assert summary["nc1_block_violations"][i] == int(np.sum(np.diff([nc1[b] for b in blocks]) > 0))
        of = next(
            r.value for r in rows if r.metric == "orthogonal_frame_error" and r.layer == "pool" and r.epoch == last
        )
        assert summary["of_error_last_block_by_net"][i] == of
        W = load_checkpoint(tmp_path / model / "checkpoints" / "last.pt")["model"]["head.weight"]
        assert "head.bias" not in load_checkpoint(tmp_path / model / "checkpoints" / "last.pt")["model"]
        assert summary["of_error_classifier_by_net"][i] == pytest.approx(orthogonal_frame_error(W.double().numpy()))
    expected = all(np.all(np.diff(s) <= 0) for s in summary["nc1_by_stage"])
    assert summary["nc1_decreasing_in_depth_all_networks"] is expected
    # the claims read converged networks only (zero training error at the end); the others are dropped with why
    assert summary["converged"] == [e == 0 for e in summary["train_error_last"]]
    kept = [i for i, c in enumerate(summary["converged"]) if c]
    assert set(summary["dropped"]) == {m for i, m in enumerate(DEPTHS) if i not in kept}
    assert all("train error" in why for why in summary["dropped"].values())
    if kept:
        assert summary["of_network"] == DEPTHS[kept[-1]]
        assert summary["of_error_last_block"] == summary["of_error_last_block_by_net"][kept[-1]]
    else:  # two epochs: nothing converged, so the claims have nothing to read (not measured)
        assert summary["of_network"] is summary["of_error_last_block"] is summary["nc1_decreasing_in_depth"] is None
    assert all(loss > 0 for loss in summary["final_loss"])
    for m, c, loss in zip(DEPTHS, summary["converged"], summary["final_loss"], strict=True):
        assert (summary[f"{m}: converged"], summary[f"{m}: final loss"]) == (c, loss)
    assert (tmp_path / "depth.png").read_bytes()[:4] == b"\x89PNG"
    assert "orthogonal frame" in (tmp_path / "report.html").read_text()
