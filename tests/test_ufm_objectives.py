"""UFM objectives: analytic gradients vs torch autograd (float64), lambda conventions, input validation."""

import math

import numpy as np
import pytest
import torch

from nclab.ufm import closed_forms, conventions, make_spec
from nclab.ufm.models import evaluate, init_params


def torch_objective(spec, params):
    """Independent forward pass in torch ([Tirer & Bruna 2022, eqs. (3), (23), (24)] in row layout) for autograd."""
    t = {k: torch.tensor(v, dtype=torch.float64, requires_grad=k not in spec.fixed) for k, v in params.items()}
    F = t[spec.feature_key]
    for key in spec.weight_keys[:-1]:
        F = F @ t[key].T
        if spec.activation == "relu":
            F = torch.relu(F)
    Z = F @ t[spec.classifier_key].T
    if spec.bias != "none":
        Z = Z + t["b"]
    y = torch.tensor(spec.labels)
    N = spec.K * spec.n
    if spec.loss == "mse":
        data = 0.5 * ((Z - torch.nn.functional.one_hot(y, spec.K).double()) ** 2).sum() / N
    else:
        data = torch.nn.functional.cross_entropy(Z, y)
    loss = data
    for key in spec.weight_keys:
        loss = loss + 0.5 * spec.lams[key] * (t[key] ** 2).sum()
    fk = spec.feature_key
    if fk not in spec.fixed:
        X = 0.0 if spec.X is None else torch.tensor(spec.X)
        lam = spec.lams["transport"] if spec.name == "mufm" else spec.lams[fk]
        loss = loss + 0.5 * lam * ((t[fk] - X) ** 2).sum()
    if spec.bias == "ridge":
        loss = loss + 0.5 * spec.lams["b"] * (t["b"] ** 2).sum()
    loss.backward()
    return float(loss.detach()), {k: v.grad.numpy() for k, v in t.items() if v.grad is not None}


rng0 = np.random.default_rng(7)
CASES = [
    ("mse-bias-free", dict(W=0.01, H=0.02), {}),
    ("mse-bias", dict(W=0.01, H=0.02), {}),
    ("mse-regbias", dict(W=0.01, H=0.02, b=0.3), {}),
    ("extended-linear", dict(W1=0.01, W2=0.02, H1=0.03), {}),
    ("extended-linear", dict(W1=0.01, W2=0.02, W3=0.05, H1=0.03), {"depth": 3}),
    ("extended-relu", dict(W1=0.01, W2=0.02, H1=0.03), {}),
    ("extended-relu", dict(W1=0.01, W2=0.02, H1=0.03), {"loss": "ce"}),
    ("ce-wd", dict(W=0.01, H=0.02), {}),
    ("ce-wd", dict(W=0.01, H=0.02, b=0.1), {"bias": "ridge"}),
    ("ce-wd", dict(W=0.01, H=0.02), {"bias": "free"}),
    ("mufm", dict(W=0.01, transport=0.04), {"X": rng0.standard_normal((3 * 4, 5))}),
    ("ridge", dict(W=0.01), {"H": rng0.standard_normal((3 * 4, 5))}),
]


@pytest.mark.parametrize(("model", "lams", "kw"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_gradients_match_autograd(model, lams, kw):
    spec = make_spec(model, K=3, n=4, d=5, lams=lams, **kw)
    params = init_params(spec, np.random.default_rng(1), 0.7)
    ev = evaluate(spec, params)
    loss_t, grads_t = torch_objective(spec, params)
    assert ev.loss == pytest.approx(loss_t, rel=1e-13, abs=1e-15)
    assert set(ev.grads) == set(grads_t) == set(spec.free_keys)
    for key, g in grads_t.items():
        np.testing.assert_allclose(ev.grads[key], g, rtol=1e-11, atol=1e-13, err_msg=key)
    assert sum(ev.terms.values()) == pytest.approx(ev.loss, rel=1e-14)


def test_relu_kink_is_exercised():
    spec = make_spec("extended-relu", K=3, n=4, d=5, lams=dict(W1=0.01, W2=0.02, H1=0.03))
    ev = evaluate(spec, init_params(spec, np.random.default_rng(1), 0.7))
    pre = ev.levels[1]
    assert 0.2 < (pre > 0).mean() < 0.8  # both ReLU branches appear in the gradient check above


def test_penalty_mean_convention_maps_to_canonical_objective():
    K, n, d = 4, 6, 7
    lw2, lh2 = 0.3, 0.5  # [Wang et al. 2024] / follow-up normalisation
    canon = conventions.to_canonical({"W": lw2, "H": lh2}, "penalty_mean", K=K, n=n)
    assert canon == pytest.approx({"W": lw2 / K, "H": lh2 / (K * n)})
    assert conventions.from_canonical(canon, "penalty_mean", K=K, n=n) == pytest.approx({"W": lw2, "H": lh2})
    spec = make_spec("mse-bias-free", K=K, n=n, d=d, lams={"W": lw2, "H": lh2}, convention="penalty_mean")
    p = init_params(spec, np.random.default_rng(3))
    Y = np.repeat(np.eye(K), n, axis=0)
    direct = (
        0.5 / (K * n) * np.sum((p["H"] @ p["W"].T - Y) ** 2)
        + lw2 / (2 * K) * np.sum(p["W"] ** 2)
        + lh2 / (2 * K * n) * np.sum(p["H"] ** 2)
    )
    assert evaluate(spec, p).loss == pytest.approx(direct, rel=1e-14)
    # the follow-up paper's threshold sqrt(lam'_H lam'_W) is the [Tirer & Bruna 2022] c
    opt = closed_forms.optimum("mse-bias-free", K=K, n=n, d=d, lams={"W": lw2, "H": lh2}, convention="penalty_mean")
    assert opt.threshold == pytest.approx(math.sqrt(lw2 * lh2), rel=1e-14)
    # MUFM transport weight lam/(2Kn) ||H - X||^2
    X = np.random.default_rng(4).standard_normal((K * n, d))
    sm = make_spec("mufm", K=K, n=n, d=d, lams={"W": lw2, "transport": 0.2}, convention="penalty_mean", X=X)
    pm = {"H": p["H"], "W": p["W"]}
    direct_m = (
        0.5 / (K * n) * np.sum((p["H"] @ p["W"].T - Y) ** 2)
        + lw2 / (2 * K) * np.sum(p["W"] ** 2)
        + 0.2 / (2 * K * n) * np.sum((p["H"] - X) ** 2)
    )
    assert evaluate(sm, pm).loss == pytest.approx(direct_m, rel=1e-14)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(model="mse-bias-free", lams={"W": -0.1, "H": 0.1}), "'W' must be finite and >= 0"),
        (dict(model="mse-bias-free", lams={"W": 0.1}), "missing \\['H'\\]"),
        (dict(model="mse-bias", lams={"W": 0.1, "H": 0.1, "b": 0.1}), "mse-regbias"),
        (dict(model="nope", lams={}), "unknown UFM model"),
        (dict(model="mse-bias-free", lams={"W": 0.1, "H": 0.1}, convention="xyz"), "unknown lambda convention"),
        (dict(model="mufm", lams={"W": 0.1, "transport": 0.1}), "needs the data X"),
        (dict(model="mufm", lams={"W": 0.1, "transport": 0.1}, X=np.zeros((7, 5))), "not.*balanced|K\\*n=12"),
        (dict(model="ridge", lams={"W": 0.1}, H=np.zeros((11, 5))), "K\\*n=12"),
        (dict(model="mse-bias-free", lams={"W": 0.1, "H": float("nan")}), "finite"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_spec(K=3, n=4, d=5, **kwargs)


def test_the_old_numbered_convention_names_are_refused_with_the_new_name():
    """ "001" / "002" were internal numbers; they name the scaling now, and an old name says which one it became."""
    for old, new in (("001", "penalty_sum"), ("002", "penalty_mean")):
        with pytest.raises(ValueError, match=f"lambda convention '{old}' is now called '{new}'"):
            conventions.to_canonical({"W": 0.1}, old, K=3, n=2)
    assert conventions.to_canonical({"W": 0.1, "H": 0.2}, "penalty_sum", K=3, n=2) == {"W": 0.1, "H": 0.2}
