"""Losses (MSE scale conventions, cosine regulariser readings), schedules and presets: closed forms."""

import math

import pytest
import torch

from nclab.measure import measurement_epochs
from nclab.train import (
    lambda_from_weight_decay,
    lr_at,
    make_loss,
    preset_dict,
    resolve_config,
    within_class_cosine_penalty,
)
from nclab.train.config import LossConfig, ScheduleConfig


def test_mse_reductions_and_lambda_from_weight_decay():
    torch.manual_seed(0)
    K = 4
    logits, y = torch.randn(6, K), torch.tensor([0, 1, 2, 3, 0, 1])
    mean = make_loss(LossConfig(name="mse"), K)(logits, y, logits)
    half = make_loss(LossConfig(name="mse", reduction="sum_half"), K)(logits, y, logits)
    torch.testing.assert_close(mean, torch.nn.functional.mse_loss(logits, torch.eye(K)[y]))
    torch.testing.assert_close(mean, (2 / K) * half)  # nn.MSELoss = (2/K) x the [Han et al. 2022] L
    # objective mean + (wd/2)|theta|^2 = (2/K) [L + (K wd / 4)|theta|^2] -> lambda = K wd / 2
    assert (
        lambda_from_weight_decay(5e-4, 10) == pytest.approx(2.5e-3)
        and lambda_from_weight_decay(5e-4, 10, "sum_half") == 5e-4
    )
    scaled = make_loss(LossConfig(name="mse", target_scale=3.0), K)(logits, y, logits)
    torch.testing.assert_close(scaled, torch.nn.functional.mse_loss(logits, 3 * torch.eye(K)[y]))


def test_ce_temperature_and_smoothing():
    logits, y = torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 1])
    ce = make_loss(LossConfig(name="ce", tau=0.5), 2)(logits, y, logits)
    torch.testing.assert_close(ce, torch.nn.functional.cross_entropy(2 * logits, y))
    ls = make_loss(LossConfig(name="ce", label_smoothing=0.2), 2)(logits, y, logits)
    torch.testing.assert_close(ls, torch.nn.functional.cross_entropy(logits, y, label_smoothing=0.2))


def test_cosine_regulariser_readings():
    # class 0: three unit vectors at 0, 90, 180 degrees -> pair cosines 0, -1, 0; class 1: two equal vectors
    h = torch.tensor([[1.0, 0], [0, 2.0], [-3.0, 0], [1.0, 1.0], [2.0, 2.0]])
    y = torch.tensor([0, 0, 0, 1, 1])
    pairs0, pairs1 = -1 / 3, 1.0
    torch.testing.assert_close(within_class_cosine_penalty(h, y, 2, "pairs"), torch.tensor((pairs0 + pairs1) / 2))
    torch.testing.assert_close(
        within_class_cosine_penalty(h, y, 2, "pairs_over_n"), torch.tensor((pairs0 / 3 + pairs1 / 2) / 2)
    )
    torch.testing.assert_close(within_class_cosine_penalty(h, y, 2, "with_self"), torch.tensor((1 / 9 + 1.0) / 2))
    loss = make_loss(LossConfig(name="ce_cosreg", cosreg_weight=2.0), 2)
    logits = torch.zeros(5, 2)
    torch.testing.assert_close(loss(logits, y, h), math.log(2) + 2 * torch.tensor((pairs0 + pairs1) / 2))


def test_lr_schedules():
    step = ScheduleConfig(name="multistep")
    lrs = [lr_at(i, 1.0, step, 350) for i in range(350)]
    assert lrs[115] == 1.0 and lrs[116] == pytest.approx(0.1) and lrs[232] == pytest.approx(0.1)
    assert lrs[233] == pytest.approx(0.01)  # [Han et al. 2022]: /10 at 350//3 = 116 and 2*350//3 = 233
    cos = ScheduleConfig(name="cosine", warmup_epochs=10, warmup_start_lr=1e-5)
    assert lr_at(0, 0.1, cos, 100) == 1e-5 and lr_at(10, 0.1, cos, 100) == pytest.approx(0.1)
    assert lr_at(55, 0.1, cos, 100) == pytest.approx(0.05) and lr_at(5, 0.1, cos, 100) == pytest.approx(0.05 + 5e-6)


def test_presets_and_measurement_epochs():
    cfg = resolve_config({"preset": "han2022-mse"})
    assert (cfg.loss.name, cfg.optim.lr, cfg.optim.weight_decay, cfg.train.epochs) == ("mse", 0.0184, 5e-4, 350)
    pfc = preset_dict("wang2024-pfc@cpu")
    assert pfc["train"]["epochs"] == 60 and pfc["schedule"]["milestones"] == [20, 40]
    assert resolve_config({"preset": "han2022-ce@cpu", "train": {"epochs": 7}}).train.epochs == 7  # the YAML wins
    with pytest.raises(ValueError, match="unknown preset"):
        resolve_config({"preset": "nope"})
    ep = measurement_epochs(350, 20)
    # 20 log-spaced points 350^(i/19), i = 0..19, rounded (1.36 -> 1, 3.43 -> 3 merge), plus epoch 0
    assert ep == sorted({0, 350, *(round(350 ** (i / 19)) for i in range(20))})
    assert ep[:5] == [0, 1, 2, 3, 5] and ep[-3:] == [189, 257, 350]  # 350^(17/19) = 188.9, 350^(18/19) = 257.0
