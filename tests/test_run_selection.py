"""A cut paper protocol (``nclab experiment run NAME --scale paper --runs PATTERN --epochs N``): the runs it keeps,
the schedule it trains, the data it checks, and the words that say it was cut."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nclab.cli import app
from nclab.experiments import run
from nclab.experiments.protocols import RunSelection
from nclab.experiments.runs import train_runs
from nclab.experiments.wang2024.experiments import pfc_configs
from nclab.io.rundir import read_run
from nclab.train import rescale_schedule, resolve_config

runner = CliRunner()


def test_rescale_schedule_keeps_the_fractions_of_the_run():
    # [Wang et al. 2024]: /10 at 117 and 233 of 350 epochs; 35 epochs -> 12 and 23 (0.334 and 0.666 of the run)
    out = rescale_schedule({"name": "multistep", "milestones": [117, 233], "warmup_epochs": 10}, 350, 35)
    assert out == {"name": "multistep", "milestones": [12, 23], "warmup_epochs": 1}
    # never before epoch 1, and the input is left as it was
    sched = {"milestones": [1, 2]}
    assert rescale_schedule(sched, 350, 3)["milestones"] == [1, 1] and sched == {"milestones": [1, 2]}


def test_selection_keeps_the_matching_runs_and_cuts_their_epochs():
    configs = pfc_configs()
    cut = RunSelection(runs=("fashion-mnist/*", "mnist/*"), epochs=30).apply(configs)
    assert list(cut) == ["mnist/fc_resnet", "fashion-mnist/pfc_resnet"]  # the registry's order, not the patterns'
    cfg, paper = cut["fashion-mnist/pfc_resnet"], configs["fashion-mnist/pfc_resnet"]
    assert (cfg.train.epochs, cfg.schedule.milestones) == (30, [10, 20])  # 117 / 350 * 30 = 10.03, 233 -> 19.97
    # everything else is the paper's
    same = ("model", "data", "loss", "optim", "measure")
    assert all(getattr(cfg, k) == getattr(paper, k) for k in same)
    assert (cfg.train.batch_size, cfg.train.device, cfg.seed) == (paper.train.batch_size, "cuda", paper.seed)


def test_selection_refuses_what_it_cannot_mean():
    with pytest.raises(ValueError, match="matches no run; the runs are: a, b"):
        RunSelection(runs=("c*",)).select({"a": 1, "b": 2})
    with pytest.raises(ValueError, match="epochs must be an int >= 1, got 0"):
        RunSelection(epochs=0)
    with pytest.raises(TypeError, match=r"epochs must be an int, got 2\.5"):
        RunSelection(epochs=2.5)
    with pytest.raises(TypeError, match=r"runs must be a tuple of non-empty pattern strings, got 'mnist/\*'"):
        RunSelection(runs="mnist/*")  # type: ignore[arg-type]
    assert RunSelection().is_all and RunSelection().describe() == ""
    with pytest.raises(ValueError, match="not 'ufm-thm51' at scale cpu"):
        run("ufm-thm51", "unused", scale="cpu", selection=RunSelection(epochs=2))
    with pytest.raises(ValueError, match="not 'pfc-table1' at scale tiny"):  # the smoke test is never cut
        run("pfc-table1", "unused", scale="tiny", selection=RunSelection(epochs=2))


def test_a_cut_trains_only_its_runs_for_its_epochs(tmp_path: Path):
    # two runs of 2 epochs on the digits through the paper scale's runner, cut to one run of 1 epoch
    def config(seed: int):
        return resolve_config({
            "name": f"cut-{seed}", "seed": seed, "preset": "wang2024-pfc@cpu",
            "data": {"name": "digits", "per_class": 20, "test_per_class": 10},
            "model": {"name": "fc_resnet", "options": {"width": 32, "num_blocks": 3}},
            "train": {"epochs": 2, "batch_size": 32, "threads": 1},
            "measure": {"epochs": [2], "splits": ["train"]}, "report": False,
        })  # fmt: skip

    full = {f"digits/fc_resnet/ce-{s}": config(s) for s in (0, 1)}
    configs = RunSelection(runs=("*-1",), epochs=1).apply(full)
    assert list(configs) == ["digits/fc_resnet/ce-1"]
    train_runs(tmp_path, configs, progress=False)
    trained = sorted(p.parent.relative_to(tmp_path).as_posix() for p in tmp_path.glob("*/*/metrics.csv"))
    assert trained == ["digits-fc_resnet-ce-1/seed0"]
    rows = read_run(tmp_path / trained[0]).rows
    assert max(r.epoch for r in rows) == 1  # measured at the cut's last epoch (the config said epoch 2)
    assert {r.epoch for r in rows if r.metric == "nc1"} == {1}
    # the full protocol into the same folder is refused before anything trains: it would extend the cut run
    before = (tmp_path / trained[0] / "metrics.csv").read_bytes()
    with pytest.raises(
        ValueError,
        match=r"ce-1/seed0 holds a run of another protocol .*at measure\.epochs, .*train\.epochs\); .*nothing was",
    ):
        train_runs(tmp_path, {"digits/fc_resnet/ce-0": full["digits/fc_resnet/ce-0"], **full}, progress=False)
    assert (tmp_path / trained[0] / "metrics.csv").read_bytes() == before
    assert not (tmp_path / "digits-fc_resnet-ce-0").exists()  # not even the run listed before the refused one


def test_paper_scale_checks_only_the_selected_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NCLAB_DATA", str(tmp_path / "empty"))
    res = runner.invoke(app, ["experiment", "run", "pfc-table1", "--scale", "paper", "--runs", "stl10/*",
                              "-o", str(tmp_path / "out")])  # fmt: skip
    assert res.exit_code == 2
    assert "stl10" in res.output and "cifar10" not in res.output and "mnist:" not in res.output
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_dry_run_of_a_cut_lists_the_selected_runs_and_says_so():
    args = ["experiment", "run", "pfc-table1", "--scale", "paper", "--dry-run", "--runs", "c*", "--epochs", "9"]
    res = runner.invoke(app, [*args, "-f", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [p["label"] for p in data["protocol"]] == ["cifar10/pfc_resnet", "cifar100/pfc_resnet"]
    assert [d["name"] for d in data["data"]] == ["cifar10", "cifar100"] and data["runs"] == 2
    assert "cut: runs c* only; 9 epochs per run" in res.stderr


def test_a_cut_writes_to_its_own_default_folder(monkeypatch: pytest.MonkeyPatch):
    import nclab.experiments

    seen = []
    monkeypatch.setattr(nclab.experiments, "run", lambda name, out, **kw: seen.append((out, kw)) or {})
    for cut in ([], ["--epochs", "3"]):
        assert runner.invoke(app, ["experiment", "run", "pfc-table1", "--scale", "paper", *cut]).exit_code == 0
    assert [str(out) for out, _ in seen] == [
        "runs/experiments/pfc-table1-paper",
        "runs/experiments/pfc-table1-paper-cut",
    ]
    assert seen[1][1]["selection"] == RunSelection(epochs=3)
    res = runner.invoke(app, ["experiment", "run", "pfc-table1", "--scale", "paper", "--epochs", "0"])
    assert res.exit_code == 2 and "epochs must be an int >= 1, got 0" in res.output
