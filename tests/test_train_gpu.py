"""Training options for paper-scale runs, checked on the CPU: mixed precision (bf16 autocast in training and in
the measurement), gradient accumulation, label smoothing and soft targets, Nesterov, the warm-up / cosine /
exponential schedules, channels_last, augmentation recipes (resume included), the config's refusals, and the
run plan (``nclab train CONFIG --plan``). The CUDA-only paths (fp16 with its GradScaler, pinned memory) are in
tests/test_cuda.py."""

import copy
import math
import os

import numpy as np
import pytest
import torch
import yaml
from typer.testing import CliRunner

from nclab.cli.train import app as train_app
from nclab.nets import build_model
from nclab.train import ConfigError, Trainer, lr_at, make_loss, make_optimizer, resolve_config, train
from nclab.train.config import LossConfig, OptimConfig, ScheduleConfig
from nclab.train.plan import plan_run
from nclab.train.trainer import run_id

runner = CliRunner()

BASE = {
    "name": "opt",
    "data": {"name": "digits", "per_class": 40, "test_per_class": 10},
    "model": {"name": "mlp", "options": {"widths": [32, 32], "batchnorm": False}},
    "loss": {"name": "ce"},
    "optim": {"lr": 0.05, "weight_decay": 5e-4},
    "schedule": {"name": "constant"},
    "train": {"epochs": 1, "batch_size": 64, "threads": 1},
    "measure": {"epochs": [0, 1]},
    "report": False,
}


def cfg_with(**sections):
    raw = copy.deepcopy(BASE)
    for name, values in sections.items():
        raw[name] = {**raw.get(name, {}), **values}
    return resolve_config(raw)


def final_params(cfg, out):
    with Trainer(cfg, out) as t:
        while not t.done:
            t.epoch()
        return {k: v.detach().clone() for k, v in t.model.state_dict().items()}


# ------------------------------------------------------------------------------------------ precision
def test_bf16_autocast_runs_the_forward_passes_in_bfloat16(tmp_path):
    """Training and measurement forward passes run under the same autocast; the statistics stay float64."""
    seen = {"train": set(), "measure": set()}
    cfg = cfg_with(train={"precision": "bf16"})
    with Trainer(cfg, tmp_path / "bf16") as t:
        layer = t.model.measured_layers()["layer1"]
        phase = ["train"]
        layer.register_forward_hook(lambda m, i, o: seen[phase[0]].add(o.dtype))
        t.epoch()
        phase[0] = "measure"
        res_rows = t.state.rows
        plan = t.measure_plan()
        assert plan.autocast_dtype == torch.bfloat16
        res = t.data.splits["train"].measure(t.model, plan, None)
    assert seen == {"train": {torch.bfloat16}, "measure": {torch.bfloat16}}
    assert res.stats["layer2"].means.dtype == np.float64
    assert np.isfinite(res.value("layer2", "nc1")) and 0 <= res.value("output", "error") <= 1
    assert {r.metric for r in res_rows if r.epoch == 1} >= {"nc1", "running_loss", "error"}
    seen["train"].clear()
    with Trainer(cfg_with(), tmp_path / "fp32") as t:
        t.model.measured_layers()["layer1"].register_forward_hook(lambda m, i, o: seen["train"].add(o.dtype))
        t.epoch()
        assert t.measure_plan().autocast_dtype is None
    assert seen["train"] == {torch.float32}


def test_bf16_training_follows_fp32_to_bfloat16_rounding(tmp_path):
    a = train(cfg_with(), tmp_path / "a", progress=False)
    b = train(cfg_with(train={"precision": "bf16"}), tmp_path / "b", progress=False)
    la, lb = a.series("running_loss", "output")[1], b.series("running_loss", "output")[1]
    assert la != lb and abs(la - lb) < 0.02 * la  # bfloat16 has 8 bits of mantissa: close, never equal


# ------------------------------------------------------------------------------------------ accumulation
@pytest.mark.parametrize("k", [2, 4])
def test_grad_accumulation_equals_one_step_on_the_whole_batch(tmp_path, k):
    """A batch-norm-free net: k micro-batches of 64 / k accumulate to the gradient of the batch of 64."""
    cfg = cfg_with(train={"epochs": 2}, optim={"lr": 0.1, "momentum": 0.9})
    init = build_model("mlp", (1, 8, 8), 10, widths=[32, 32], batchnorm=False).state_dict()
    whole = final_params(cfg, tmp_path / "whole")
    acc = final_params(
        cfg_with(train={"epochs": 2, "grad_accum": k}, optim={"lr": 0.1, "momentum": 0.9}), tmp_path / "acc"
    )
    moved = max(float((whole[n] - init[n]).abs().max()) for n in whole)
    assert moved > 0.05  # the runs really trained
    for name in whole:
        torch.testing.assert_close(acc[name], whole[name], rtol=1e-5, atol=1e-6)


def test_grad_accum_must_divide_the_batch():
    with pytest.raises(ConfigError, match=r"train.grad_accum: must divide train.batch_size=64"):
        cfg_with(train={"grad_accum": 5})


# ------------------------------------------------------------------------------------------ losses
def test_label_smoothing_is_the_formula():
    torch.manual_seed(0)
    z, y, K, eps = torch.randn(7, 5), torch.tensor([0, 1, 2, 3, 4, 0, 1]), 5, 0.1
    loss = make_loss(LossConfig(name="ce", label_smoothing=eps), K)(z, y, z)
    logp = torch.log_softmax(z.double(), 1)
    want = (1 - eps) * (-logp[torch.arange(7), y]).mean() + eps * (-logp.mean(1)).mean()
    assert abs(float(loss) - float(want)) < 1e-6


def test_soft_targets_of_mixed_batches():
    torch.manual_seed(1)
    z, K = torch.randn(6, 4), 4
    T = torch.softmax(torch.randn(6, 4), 1)
    ce = make_loss(LossConfig(name="ce", label_smoothing=0.1), K)(z, T, z)  # mixed targets carry the smoothing
    assert abs(float(ce) - float(-(T * torch.log_softmax(z, 1)).sum(1).mean())) < 1e-6
    mse = make_loss(LossConfig(name="mse", target_scale=2.0), K)(z, T, z)
    assert abs(float(mse) - float(((z - 2 * T) ** 2).mean())) < 1e-6
    with pytest.raises(ValueError, match="soft targets"):
        make_loss(LossConfig(name="ce_cosreg", cosreg_weight=0.1), K)(z, T, z)


# ------------------------------------------------------------------------------------------ optimiser
def test_nesterov_is_torchs_update_rule():
    """PyTorch's Nesterov SGD with coupled decay: g <- g + wd p; v <- mu v + g; p <- p - lr (g + mu v)."""
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 2)
    opt = make_optimizer(net, OptimConfig(name="sgd", lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01))
    p = [q.detach().clone() for q in net.parameters()]
    v = [torch.zeros_like(q) for q in p]
    x = torch.randn(5, 3)
    for _ in range(3):
        opt.zero_grad()
        net(x).pow(2).sum().backward()
        grads = [q.grad.detach().clone() for q in net.parameters()]
        opt.step()
        for i, g in enumerate(grads):
            g = g + 0.01 * p[i]
            v[i] = 0.9 * v[i] + g
            p[i] = p[i] - 0.1 * (g + 0.9 * v[i])
    for q, want in zip(net.parameters(), p, strict=True):
        torch.testing.assert_close(q.detach(), want, rtol=1e-6, atol=1e-7)
    assert resolve_config({"preset": "xu2023-vci-step"}).optim.nesterov  # [Xu & Liu 2023]'s SGD is Nesterov


# ------------------------------------------------------------------------------------------ schedules
def test_warmup_cosine_and_exponential_lr_closed_forms():
    base, E = 0.1, 300
    cos = ScheduleConfig(name="cosine", warmup_epochs=10, warmup_start_lr=1e-5, min_lr=0.0)
    assert lr_at(0, base, cos, E) == 1e-5
    assert lr_at(5, base, cos, E) == pytest.approx(1e-5 + (base - 1e-5) * 0.5, rel=1e-15)
    assert lr_at(10, base, cos, E) == pytest.approx(base, rel=1e-15)
    assert lr_at(155, base, cos, E) == pytest.approx(base / 2, rel=1e-12)  # half-way through 10..300
    assert lr_at(10 + 290 // 3, base, cos, E) == pytest.approx(base * (1 + math.cos(math.pi * 96 / 290)) / 2)
    step = resolve_config({"preset": "xu2023-vci-step"}).schedule
    assert (step.name, step.gamma, step.warmup_epochs) == ("exponential", 0.975, 10)
    assert lr_at(10, base, step, E) == base
    assert lr_at(50, base, step, E) == pytest.approx(base * 0.975**40, rel=1e-14)
    # PyTorch's ExponentialLR stepped once per epoch after the warmup gives the same curve
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=base)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.975)
    for i in range(10, 60):
        assert lr_at(i, base, step, E) == pytest.approx(opt.param_groups[0]["lr"], rel=1e-12)
        opt.step()
        sched.step()
    floor = ScheduleConfig(name="exponential", gamma=0.5, min_lr=1e-3)
    assert lr_at(20, base, floor, E) == 1e-3


def test_exponential_needs_its_factor():
    with pytest.raises(ConfigError, match=r"schedule.gamma: schedule exponential needs its per-epoch factor"):
        resolve_config({"schedule": {"name": "exponential"}})


# ------------------------------------------------------------------------------------------ memory format
def test_channels_last_gives_the_same_outputs_and_run(tmp_path):
    torch.manual_seed(0)
    net = build_model("resnet18", (3, 16, 16), 4, width=8).eval()
    x = torch.randn(6, 3, 16, 16)
    ref = net(x)
    net.to(memory_format=torch.channels_last)
    assert net.conv1.weight.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(net(x.contiguous(memory_format=torch.channels_last)), ref, rtol=1e-4, atol=1e-5)
    # a run: the same metrics to rounding
    raw = {**BASE, "model": {"name": "cnn", "options": {"channels": [4, 8], "hidden": 16}}}
    a = train(raw, tmp_path / "a", progress=False)
    b = train({**raw, "train": {**raw["train"], "channels_last": True}}, tmp_path / "b", progress=False)
    for metric in ("running_loss", "error"):
        va, vb = a.series(metric, "output"), b.series(metric, "output")
        assert va.keys() == vb.keys() and all(abs(va[e] - vb[e]) < 1e-4 for e in va), metric
    with pytest.raises(ConfigError, match="channels_last: needs image inputs"):
        train({**BASE, "data": {"name": "gaussian", "options": {"K": 3, "d": 4, "n": 20}},
               "train": {**BASE["train"], "channels_last": True}}, tmp_path / "c", progress=False)  # fmt: skip


# ------------------------------------------------------------------------------------------ config
def test_config_refusals_name_the_key():
    cases = [
        ({"train": {"precision": "fp16"}}, "train.precision: fp16 needs a CUDA device"),
        ({"data": {"name": "gaussian", "augment": "cifar"}}, "data.augment: augments images"),
        ({"data": {"augment": "autoaugment"}}, "unknown augmentation recipe 'autoaugment'"),
        ({"data": {"name": "imagenet"}}, "data.image_size: the streamed dataset 'imagenet' needs image_size"),
        (
            {"data": {"name": "imagenet", "image_size": 16, "test_split": "test"}},
            "data.test_split: 'imagenet' has splits",
        ),
        ({"data": {"workers": 2}}, "data.workers: applies to the streamed datasets"),
        ({"data": {"name": "image-folder", "image_size": 8, "persistent_workers": True}}, "needs workers > 0"),
        ({"data": {"augment": "deit"}, "loss": {"name": "ce_cosreg"}}, "loss.name: ce_cosreg's within-class"),
    ]
    for raw, message in cases:
        with pytest.raises(ConfigError) as info:
            resolve_config(raw)
        assert message in str(info.value), (raw, str(info.value))


def test_new_keys_stay_out_of_old_configs():
    """config.yaml and the run id of a config that sets none of the new keys are what they were."""
    cfg = resolve_config(BASE)
    d = cfg.to_dict()
    assert "precision" not in d["train"] and "augment" not in d["data"] and "workers" not in d["data"]
    assert resolve_config(d) == cfg and run_id(resolve_config(d)) == run_id(cfg)
    bf = cfg_with(train={"precision": "bf16"}, data={"augment": "cifar"})
    assert bf.to_dict()["train"]["precision"] == "bf16" and bf.to_dict()["data"]["augment"] == "cifar"
    assert resolve_config(bf.to_dict()) == bf and run_id(bf) != run_id(cfg)


# ------------------------------------------------------------------------------------------ augmentation
def test_augmented_run_resumes_bit_identically(tmp_path):
    """Per-batch augmentation and mixing draw from (seed, epoch, batch): a killed run continues exactly."""
    raw = {**BASE, "data": {**BASE["data"], "augment": "deit"}, "train": {**BASE["train"], "epochs": 3},
           "model": {"name": "cnn", "options": {"channels": [4, 8], "hidden": 16}},
           "measure": {"epochs": [0, 3]}}  # fmt: skip
    full = train(raw, tmp_path / "full", progress=False)

    def kill_at_2(epoch):
        if epoch == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(raw, tmp_path / "cut", progress=False, on_epoch_end=kill_at_2)
    again = train(raw, tmp_path / "cut", progress=False, resume=True)
    assert (tmp_path / "full" / "metrics.csv").read_bytes() == (tmp_path / "cut" / "metrics.csv").read_bytes()
    plain = train({**raw, "data": BASE["data"]}, tmp_path / "plain", progress=False)
    assert again.series("running_loss", "output") != plain.series("running_loss", "output")  # it did augment
    assert full.config.data.augment == "deit"


# ------------------------------------------------------------------------------------------ plan
def test_plan_counts_parameters_steps_and_writes_nothing(tmp_path, monkeypatch):
    raw = {**BASE, "model": {"name": "resnet18", "options": {"width": 8}}, "data": {"name": "digits"},
           "train": {"epochs": 7, "batch_size": 100, "grad_accum": 4, "precision": "bf16"}}  # fmt: skip
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(tmp_path)
    before = sorted(os.listdir(tmp_path))
    res = runner.invoke(train_app, ["train", str(path), "--plan"])
    assert res.exit_code == 0, res.output
    assert sorted(os.listdir(tmp_path)) == before  # no runs/ folder, no run directory
    net = build_model("resnet18", (1, 8, 8), 10, width=8)
    n = sum(p.numel() for p in net.parameters())
    assert f"parameters:      {n:,} ({n:,} trainable)" in res.output
    assert "steps:           91 optimisation steps (13 per epoch x 7 epochs; 364 micro-batches)" in res.output
    assert "batch:           100 global, 4 micro-batches of 25, drop_last" in res.output
    assert "precision:       bf16" in res.output and "variant cifar" in res.output
    assert res.output == runner.invoke(train_app, ["train", str(path), "--dry-run"]).output


def test_plan_memory_parts_against_the_built_network():
    """Parameter, gradient and optimiser bytes are exact; the activations of an MLP are counted by hand."""
    plan = plan_run({**BASE, "optim": {"name": "adamw", "lr": 1e-3}, "train": {"epochs": 1, "batch_size": 32}})
    net = build_model("mlp", (1, 8, 8), 10, widths=[32, 32], batchnorm=False)
    nbytes = sum(p.numel() * p.element_size() for p in net.parameters())
    m = plan.memory
    assert m.parameters == nbytes and m.gradients == nbytes and m.optimizer == 2 * nbytes and m.autocast_copies == 0
    # the input (64 per sample) and every leaf's output: Linear 32, ReLU 32, Linear 32, ReLU 32, head 10
    assert [type(mod).__name__ for mod in net.modules() if not list(mod.children())] == ["Linear", "ReLU"] * 2 + [
        "Linear"
    ]
    assert m.activations == 4 * 32 * (64 + 32 + 32 + 32 + 32 + 10)
    assert m.total == m.parameters + m.gradients + m.optimizer + max(m.activations, m.measurement)
    assert plan.steps_per_epoch == len(range(0, 400 - 32 + 1, 32)) == 12  # 40 per class x 10, drop_last
    bf = plan_run({**BASE, "train": {"epochs": 1, "batch_size": 32, "precision": "bf16"}})
    assert bf.memory.activations == m.activations // 2 and bf.memory.autocast_copies == 2 * plan.num_parameters
    with pytest.raises(ConfigError, match="exceeds the 400 training samples"):
        plan_run({**BASE, "train": {"batch_size": 512}})
