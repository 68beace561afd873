"""DeepFool (nclab.measure.deepfool) against closed forms: an affine classifier is fooled exactly in one step."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from nclab.measure import DEEPFOOL_OVERSHOOT, deepfool


def _affine(W: np.ndarray, b: np.ndarray) -> nn.Linear:
    model = nn.Linear(W.shape[1], W.shape[0]).double()
    with torch.no_grad():
        model.weight.copy_(torch.from_numpy(W))
        model.bias.copy_(torch.from_numpy(b))
    return model


def _nearest_boundary(W: np.ndarray, b: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Brute force: per input, the predicted class, the nearest other class and the distance to their boundary,
    min_j |f_j - f_k| / ||w_j - w_k||."""
    f = x @ W.T + b
    k = f.argmax(1)
    dist = np.full(f.shape, np.inf)
    for j in range(W.shape[0]):
        gap = np.abs(f[:, j] - f[np.arange(len(x)), k])
        norm = np.linalg.norm(W[j] - W[k], axis=1)
        dist[:, j] = np.where(j != k, gap / np.where(j != k, norm, 1.0), np.inf)
    return k, dist.argmin(1), dist.min(1)


@pytest.fixture
def affine_case():
    rng = np.random.default_rng(0)
    K, d, N = 6, 9, 40
    W, b, x = rng.normal(size=(K, d)), rng.normal(size=K), rng.normal(size=(N, d)) * 2
    return W, b, x


def test_affine_classifier_is_fooled_exactly_in_one_step(affine_case):
    W, b, x = affine_case
    res = deepfool(_affine(W, b), torch.from_numpy(x), batch_size=7, keep_perturbations=True)
    k, j, dist = _nearest_boundary(W, b, x)
    assert res.flipped.all() and res.unflipped == 0
    assert (res.iterations == 1).all()
    np.testing.assert_array_equal(res.labels, k)
    np.testing.assert_array_equal(res.adversarial_labels, j)
    np.testing.assert_allclose(res.norms, (1 + DEEPFOOL_OVERSHOOT) * dist, rtol=1e-12)
    # along w_j - w_k, and x + r lands past the boundary while x + r / (1 + eta) sits on it
    r = res.perturbations
    direction = W[j] - W[k]
    cos = np.sum(r * direction, 1) / (np.linalg.norm(r, axis=1) * np.linalg.norm(direction, axis=1))
    np.testing.assert_allclose(cos, 1.0, rtol=1e-12)
    f_adv = (x + r) @ W.T + b
    np.testing.assert_array_equal(f_adv.argmax(1), j)
    f_on = (x + r / (1 + DEEPFOOL_OVERSHOOT)) @ W.T + b
    rows = np.arange(len(x))
    np.testing.assert_allclose(f_on[rows, j] - f_on[rows, k], 0.0, atol=1e-12)
    assert ((x + 0.99 * r / (1 + DEEPFOOL_OVERSHOOT)) @ W.T + b).argmax(1).tolist() == k.tolist()
    # the measure: the mean of ||r|| / ||x||, float64
    rel = (1 + DEEPFOOL_OVERSHOOT) * dist / np.linalg.norm(x, axis=1)
    np.testing.assert_allclose(res.relative, rel, rtol=1e-12)
    assert res.robustness == pytest.approx(rel.mean(), rel=1e-12)


def test_two_classes_is_the_distance_to_the_hyperplane():
    # f_1 - f_0 = (w_1 - w_0) . x + (b_1 - b_0) = 3 x_1 + 4 x_2 - 5: distance |3 x_1 + 4 x_2 - 5| / 5
    W, b = np.array([[0.0, 0.0], [3.0, 4.0]]), np.array([0.0, -5.0])
    x = np.array([[0.5, 0.0], [3.0, 4.0], [1.0, 0.0], [0.0, 2.0]])
    res = deepfool(_affine(W, b), x, overshoot=0.1)
    np.testing.assert_array_equal(res.labels, [0, 1, 0, 1])
    np.testing.assert_array_equal(res.adversarial_labels, [1, 0, 1, 0])
    np.testing.assert_allclose(res.norms, 1.1 * np.array([3.5, 20, 2, 3]) / 5, rtol=1e-13)


def test_invariances_scaling_the_input_and_the_logits(affine_case):
    W, b, x = affine_case
    base = deepfool(_affine(W, b), x)
    # inputs c x with weights W / c: the same logits, perturbations c times larger, relative sizes unchanged
    c = 7.5
    scaled = deepfool(_affine(W / c, b), c * x)
    np.testing.assert_allclose(scaled.norms, c * base.norms, rtol=1e-12)
    np.testing.assert_allclose(scaled.relative, base.relative, rtol=1e-12)
    assert scaled.robustness == pytest.approx(base.robustness, rel=1e-12)
    # logits scaled by a > 0 and shifted by a common constant: the same decision boundaries
    same = deepfool(_affine(3.0 * W, 3.0 * b + 2.0), x)
    np.testing.assert_allclose(same.norms, base.norms, rtol=1e-12)
    # a rotation of the inputs with the weights rotated along: norms unchanged
    Q, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(x.shape[1],) * 2))
    rotated = deepfool(_affine(W @ Q.T, b), x @ Q.T)
    np.testing.assert_allclose(rotated.norms, base.norms, rtol=1e-10)


def test_a_nonlinear_network_needs_more_steps_and_flips():
    # f_1 - f_0 = ||x||^2 - 1: the boundary is the unit circle, from x = (2, 0) at distance 1; one linear step
    # undershoots (the tangent plane lies at x_1 = 1.25), so DeepFool iterates and stays within 2 % of 1.02
    class Radial(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.stack([1 - (x**2).sum(1), (x**2).sum(1) - 1], 1)  # class 1 outside the circle

    res = deepfool(Radial(), torch.tensor([[2.0, 0.0], [0.0, -3.0]], dtype=torch.float64))
    assert res.flipped.all() and (res.iterations > 1).all()
    np.testing.assert_allclose(res.norms, 1.02 * np.array([1.0, 2.0]), rtol=0.02)
    np.testing.assert_allclose(res.input_norms, [2.0, 3.0])


def test_unflipped_inputs_are_counted_and_left_out_of_the_mean():
    # one step only, on the circle model, is not enough: the input stays on its side, flagged and counted
    class Radial(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            s = (x**2).sum(1)
            return torch.stack([1 - s, s - 1], 1)

    x = torch.tensor([[4.0, 0.0], [0.0, 0.5]], dtype=torch.float64)
    res = deepfool(Radial(), x, max_iter=1, overshoot=0.0)
    assert res.unflipped == 1 and res.flipped.tolist() == [False, True] and res.iterations.tolist() == [1, 1]
    assert res.adversarial_labels.tolist() == [1, 1] and res.labels.tolist() == [1, 0]
    # the tangent step from 4 toward 0: |16 - 1| / (2 * 4) = 1.875, short of the true distance 3: kept in norms as
    # a lower bound, left out of the mean; from 0.5 outward: |0.25 - 1| / (2 * 0.5) = 0.75 lands outside (1.25)
    np.testing.assert_allclose(res.norms, [1.875, 0.75])
    assert res.robustness == pytest.approx(0.75 / 0.5)
    assert math.isnan(deepfool(Radial(), x[:1], max_iter=1).robustness)  # none flipped: nan, never 0
    # a model whose logits do not depend on x: no direction, stalled at 0 steps, unflipped
    flat = deepfool(_affine(np.zeros((3, 2)), np.array([0.0, 1.0, 0.0])), np.ones((2, 2)))
    assert flat.unflipped == 2 and (flat.iterations == 0).all() and (flat.norms == 0).all()
    assert math.isnan(flat.robustness)


def test_deterministic_and_the_model_state_is_untouched(affine_case):
    W, b, x = affine_case
    model = nn.Sequential(_affine(W, b), nn.Dropout(0.5))
    a = deepfool(model, x, batch_size=5)
    b2 = deepfool(model, x, batch_size=64)  # the batch size changes roundoff only; dropout is off (eval mode)
    np.testing.assert_allclose(a.norms, b2.norms, rtol=1e-13)
    np.testing.assert_array_equal(deepfool(model, x, batch_size=5).norms, a.norms)  # deterministic
    assert model.training and all(p.grad is None for p in model.parameters())


def test_float32_model_reports_float64():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(16, 12), nn.ReLU(), nn.Linear(12, 4))
    res = deepfool(net, torch.randn(30, 1, 4, 4))
    assert res.norms.dtype == np.float64 and res.relative.dtype == np.float64
    assert res.flipped.all() and res.robustness > 0


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"x": [[1.0, 2.0]]}, TypeError, "x must be a torch tensor or numpy array"),
        ({"x": np.ones((3, 2), dtype=np.int64)}, TypeError, "x must hold floating-point"),
        ({"x": np.ones(3)}, ValueError, r"x must have shape \(N, \.\.\.\)"),
        ({"x": np.ones((0, 2))}, ValueError, r"x must have shape \(N, \.\.\.\)"),
        ({"x": np.array([[1.0, np.nan]])}, ValueError, "x holds NaN or inf"),
        ({"x": np.array([[1.0, 2.0], [0.0, 0.0]])}, ValueError, r"all-zero input\(s\) \(rows \[1\]\)"),
        ({"overshoot": -0.1}, ValueError, "overshoot must be a finite number >= 0"),
        ({"max_iter": 0}, ValueError, "max_iter"),
        ({"max_iter": 2.0}, TypeError, "max_iter"),
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"keep_perturbations": 1}, TypeError, "keep_perturbations"),
    ],
)
def test_bad_input_is_named(kwargs, error, match):
    args = {"model": _affine(np.eye(2), np.zeros(2)), "x": np.ones((3, 2))} | kwargs
    with pytest.raises(error, match=match):
        deepfool(**args)


def test_bad_models_are_named():
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module"):
        deepfool(lambda x: x, np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"logits \(n, K\) with K >= 2 classes.*\(2, 1\)"):
        deepfool(_affine(np.ones((1, 2)), np.zeros(1)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="NaN or inf logits"):
        deepfool(_affine(np.eye(2), np.array([np.inf, 0.0])), np.ones((2, 2)))
