"""Models: measured-layer shapes, penultimate = classifier input; heads; hooks on any nn.Module."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from nclab.measure import FeatureHooks, collect_features, resolve_layers
from nclab.nets import CMFHead, FixedHead, build_model, make_head

CASES = [
    ("mlp", (1, 8, 8), {"widths": [16, 12]}, {"layer1": 16, "layer2": 12}),
    ("fc_resnet", (1, 8, 8), {"width": 10, "num_blocks": 3}, {"layer0": 10, "layer1": 10, "layer2": 10, "layer3": 10}),
    ("cnn", (1, 28, 28), {"channels": [4, 6], "hidden": 9}, {"block1": 4 * 14 * 14, "block2": 6 * 7 * 7, "fc": 9}),
    # a linear d = 3 bottleneck after the hidden layer: the measured penultimate layer is 3 wide
    ("cnn", (1, 28, 28), {"channels": [4, 6], "hidden": 9, "d": 3}, {"block1": 784, "block2": 294, "fc": 3}),
    # [Wang et al. 2024, Table I] family: only the last stage is measured (its transition's output, then each block)
    ("pfc_resnet", (1, 28, 28), {"stages": [[3, 14, 1], [4, 7, 2]]}, {f"layer{i}": 4 * 7 * 7 for i in range(3)}),
    (
        "pfc_resnet",
        (3, 8, 8),
        {"stages": [[3, 8, 1], [5, 4, 2]], "pool": True, "block": "post"},
        {"layer0": 80, "layer1": 80, "layer2": 80, "pool": 5},
    ),
    (  # the batch-norm VGG-11 (torchvision's vgg11_bn); 32 px inputs give the global-pooled small-image head
        "vgg11_bn",
        (3, 32, 32),
        {"width": 2},
        {
            "stage1": 2 * 16 * 16,
            "stage2": 4 * 8 * 8,
            "stage3": 8 * 4 * 4,
            "stage4": 16 * 2 * 2,
            "stage5": 16,
            "pool": 16,
        },
    ),
    (  # 16 px: the small-image stem (3x3 stride-1 conv, no max-pool), so the stem keeps the input side
        "resnet18",
        (3, 16, 16),
        {"width": 2},
        {
            "stem": 2 * 256,
            "layer1.0": 2 * 256,
            "layer1.1": 2 * 256,
            "layer2.0": 4 * 64,
            "layer2.1": 4 * 64,
            "layer3.0": 8 * 16,
            "layer3.1": 8 * 16,
            "layer4.0": 16 * 4,
            "layer4.1": 16 * 4,
            "pool": 16,
        },
    ),
    (
        "densenet",
        (3, 16, 16),
        {"depth": 10, "growth": 4},
        {"block1": 6 * 64, "block2": 5 * 16, "block3": 9 * 16, "pool": 9},
    ),  # 8 -> +4 -> x0.5 -> ...: 12->6, 10->5, 9
]


@pytest.mark.parametrize(("name", "shape", "opts", "dims"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_measured_layer_shapes(name, shape, opts, dims):
    torch.manual_seed(0)
    model = build_model(name, shape, 5, **opts)
    assert list(model.measured_layers()) == list(dims)
    x = torch.randn(3, *shape)
    feats = collect_features(model, x)
    assert {k: v.shape for k, v in feats.items()} == {k: (3, d) for k, d in dims.items()}
    model.eval()
    with torch.no_grad():
        h = model.features(x)
        torch.testing.assert_close(feats[model.penultimate_name], h)  # the last measured layer feeds the head
        torch.testing.assert_close(model(x), model.head(h))
    assert model.d == h.shape[1] and model.penultimate is model.measured_layers()[model.penultimate_name]


def test_fc_resnet_blocks_are_residual():
    torch.manual_seed(0)
    m = build_model("fc_resnet", (6,), 3, width=5, num_blocks=2).eval()
    f = collect_features(m, torch.randn(4, 6))
    lin = m.blocks[0].v[0]
    torch.testing.assert_close(f["layer1"], f["layer0"] + torch.relu(lin(f["layer0"])))


@pytest.mark.parametrize("block", ["preact", "post"])
def test_pfc_resnet_measured_blocks_are_exactly_residual(block):
    """The [Wang et al. 2024] x^(l+1) = x^(l) + v_l(x^(l)) at every measured layer (transitions outside the blocks)."""
    torch.manual_seed(0)
    m = build_model("pfc_resnet", (2, 8, 8), 3, stages=[[3, 4, 1], [4, 4, 3]], block=block).eval()
    x = torch.randn(5, 2, 8, 8)
    f = collect_features(m, x)
    for i, blk in enumerate(m.stages[-1]):
        inp = f[f"layer{i}"].reshape(5, 4, 4, 4)
        with torch.no_grad():
            torch.testing.assert_close(f[f"layer{i + 1}"], (inp + blk.v(inp)).flatten(1), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("table", "shape", "d", "layers"),
    [("fashion-mnist", (1, 28, 28), 3136, 5), ("cifar10", (3, 32, 32), 4096, 5), ("cifar100", (3, 32, 32), 8192, 5)],
)
def test_pfc_resnet_table_i_dimensions(table, shape, d, layers):
    """Table I of [Wang et al. 2024]: measured dimension d = C H W of the last stage and L + 1 measured layers."""
    m = build_model("pfc_resnet", shape, 10, table=table)
    assert m.d == d and len(m.measured_layers()) == layers


def test_pfc_resnet_rejects_bad_stages():
    with pytest.raises(ValueError, match="neither the input side"):
        build_model("pfc_resnet", (1, 28, 28), 10, stages=[[4, 10, 1]])
    with pytest.raises(ValueError, match="exactly one of stages or table"):
        build_model("pfc_resnet", (1, 28, 28), 10)
    with pytest.raises(ValueError, match="unknown table row"):
        build_model("pfc_resnet", (1, 28, 28), 10, table="mnist")


def test_heads():
    torch.manual_seed(0)
    h = torch.randn(7, 4)
    cos = make_head("cosine", 4, 3, tau=0.25)
    assert cos.bias is None
    # cos(w_k, h) / tau from per-pair loops in float64: a tau that multiplied instead of dividing would give 1/16 of it
    Wc, hc = cos.weight.detach().double(), h.double()
    ref = torch.tensor([[float(x @ w / (x.norm() * w.norm())) / 0.25 for w in Wc] for x in hc], dtype=torch.float64)
    torch.testing.assert_close(cos(h).detach().double(), ref, rtol=1e-5, atol=1e-6)
    assert make_head("cosine", 4, 3, logit_scale=4.0).tau == 0.25
    with pytest.raises(ValueError, match="not both"):
        make_head("cosine", 4, 3, tau=0.1, logit_scale=10)
    lin = make_head("linear", 4, 3, bias=False)
    assert lin.bias is None
    code = np.eye(3, 4)
    fixed = FixedHead(code, assignment=[2, 0, 1], cosine=False)
    np.testing.assert_array_equal(fixed.weight.numpy(), code[[2, 0, 1]])
    assert not list(fixed.parameters())  # not trained
    etf = make_head("fixed", 4, 3, code="etf")
    G = etf.weight @ etf.weight.T
    torch.testing.assert_close(torch.diag(G), torch.ones(3))
    torch.testing.assert_close(G[0, 1], torch.tensor(-0.5))


def test_linear_head_forward_with_and_without_bias():
    """``logits_k = <w_k, h> + b_k`` ([Han et al. 2022] / PyTorch's ``nn.Linear``) and ``<w_k, h>`` without bias
    ([Tirer & Bruna 2022]), by loops in float64, on features and class rows of very different norms: any
    normalisation of h or W would change the logits, and the bias-free logits are homogeneous of degree 1 in h."""
    torch.manual_seed(0)
    K, d = 4, 5
    h = torch.randn(6, d) * torch.tensor([[0.01], [1.0], [30.0], [2.0], [0.5], [7.0]])
    for bias in (True, False):
        head = make_head("linear", d, K, bias=bias)
        with torch.no_grad():
            head.weight.mul_(torch.tensor([[0.1], [1.0], [5.0], [20.0]]))
        W = head.weight.detach().double()
        b = head.bias.detach().double() if bias else torch.zeros(K, dtype=torch.float64)
        ref = torch.tensor(
            [
                [sum(float(x[j]) * float(w[j]) for j in range(d)) + float(b[k]) for k, w in enumerate(W)]
                for x in h.double()
            ],
            dtype=torch.float64,
        )
        with torch.no_grad():
            torch.testing.assert_close(head(h).double(), ref, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(
                head(3 * h) - head.bias if bias else head(3 * h), 3 * (head(h) - (head.bias if bias else 0))
            )
        assert (head.bias is None) == (not bias)


def test_cosine_head_is_scale_free_and_bounded():
    """``cos(w_k, h) / tau``: invariant to rescaling each feature row and each class row (a normalisation along the
    wrong axis, over the batch or the classes, is not), bounded by ``1 / tau``, equal to loops in float64."""
    torch.manual_seed(0)
    K, d, tau = 3, 4, 0.2
    head = make_head("cosine", d, K, logit_scale=1 / tau)
    h = torch.randn(5, d) * torch.tensor([[0.01], [1.0], [40.0], [2.0], [0.3]])
    with torch.no_grad():
        out = head(h)
        torch.testing.assert_close(
            out.double(), torch.tensor(_cosine_logits(h, head.weight.detach(), tau)), rtol=1e-5, atol=1e-5
        )
        torch.testing.assert_close(
            head(h * torch.tensor([[5.0], [0.1], [1.0], [3.0], [100.0]])), out, rtol=1e-5, atol=1e-5
        )
        head.weight.mul_(torch.tensor([[0.1], [10.0], [2.0]]))
        torch.testing.assert_close(head(h), out, rtol=1e-5, atol=1e-5)
        # the same h, but each sample alone: a batch-wise normalisation would differ
        torch.testing.assert_close(torch.cat([head(h[i : i + 1]) for i in range(5)]), out, rtol=1e-6, atol=1e-6)
    assert float(out.abs().max()) <= 1 / tau + 1e-5


def test_fixed_simplex_etf_head_gram_and_forward():
    """The fixed simplex ETF classifier [Zhu et al. 2021; Jiang et al. 2024, Sec. 4]: unit rows with
    ``<w_j, w_k> = -1 / (K - 1)`` for every pair and rows summing to 0; linear logits ``W h``, cosine logits
    ``cos(w_k, h) / tau`` (by loops)."""
    K, d, tau = 5, 7, 0.5
    lin = make_head("fixed", d, K, code="etf", cosine=False)
    W = lin.weight.double()
    G = W @ W.T
    expect = torch.full((K, K), -1.0 / (K - 1), dtype=torch.float64) + torch.eye(K, dtype=torch.float64) * K / (K - 1)
    torch.testing.assert_close(G, expect, rtol=0, atol=1e-6)
    torch.testing.assert_close(W.sum(0), torch.zeros(d, dtype=torch.float64), rtol=0, atol=1e-6)
    h = torch.randn(4, d, generator=torch.Generator().manual_seed(1)) * torch.tensor([[0.1], [1.0], [10.0], [3.0]])
    ref = [[sum(float(x[j]) * float(w[j]) for j in range(d)) for w in W] for x in h.double()]
    torch.testing.assert_close(lin(h).double(), torch.tensor(ref, dtype=torch.float64), rtol=1e-5, atol=1e-5)
    cos = make_head("fixed", d, K, code="etf", tau=tau)
    torch.testing.assert_close(cos(h).double(), torch.tensor(_cosine_logits(h, W, tau)), rtol=1e-5, atol=1e-5)
    assert not list(lin.parameters()) and not list(cos.parameters())


def _cosine_logits(h, W, tau):
    """cos(w_k, h_i) / tau by explicit loops in float64 (the reference for the heads' forward)."""
    h, W = np.asarray(h, dtype=np.float64), np.asarray(W, dtype=np.float64)
    return np.array([[x @ w / (np.linalg.norm(x) * np.linalg.norm(w)) / tau for w in W] for x in h])


@pytest.mark.parametrize("code_kind", ["array", "etf", "orthogonal"])
def test_fixed_head_forward_against_loops(code_kind):
    """[Jiang et al. 2024, Sec. 4]: row k of the fixed classifier is code[assignment[k]]; cosine logits divide by tau,
    linear logits are <code[assignment[k]], h> with no bias."""
    from nclab.geometry import orthogonal_frame, simplex_etf

    rng = np.random.default_rng(3)
    K, d, tau = 4, 6, 0.2
    code = {
        "array": rng.normal(size=(K, d)) * np.array([[1.0], [2.0], [0.5], [3.0]]),  # unequal row norms
        "etf": simplex_etf(K, d, seed=0),
        "orthogonal": orthogonal_frame(K, d, seed=0),
    }[code_kind]
    perm = [2, 0, 3, 1]
    h = rng.normal(size=(5, d)) * np.array([[1.0], [10.0], [0.1], [3.0], [1.0]])  # unequal feature norms
    ht = torch.tensor(h, dtype=torch.float32)
    rows = np.asarray(code, dtype=np.float32)[perm].astype(np.float64)
    cos = FixedHead(code, assignment=perm, cosine=True, tau=tau)
    np.testing.assert_allclose(cos(ht).numpy(), _cosine_logits(h, rows, tau), rtol=1e-5, atol=1e-5)
    lin = FixedHead(code, assignment=perm, cosine=False)
    ref_lin = np.array([[sum(float(x[j]) * w[j] for j in range(d)) for w in rows] for x in ht.double().numpy()])
    np.testing.assert_allclose(lin(ht).numpy(), ref_lin, rtol=1e-5, atol=1e-5)
    if code_kind != "array":
        made = make_head("fixed", d, K, code=code_kind, assignment=perm, tau=tau)
        np.testing.assert_array_equal(made.weight.numpy(), np.asarray(code, dtype=np.float32)[perm])
        np.testing.assert_allclose(made(ht).numpy(), cos(ht).numpy(), rtol=1e-6)
        if code_kind == "orthogonal":  # orthonormal rows: the Gram matrix of the buffer is the identity
            Wm = made.weight.double().numpy()
            np.testing.assert_allclose(Wm @ Wm.T, np.eye(K), atol=1e-6)


def test_cmf_head_forward_and_observe_against_loops():
    """CMF [Jiang et al. 2024, Sec. 5]: forward is cos(w_k, h) / tau on the current rows; after observe, each present
    class's row is beta w_k + (1 - beta) mean_i(h_i / ||h_i||), renormalised; absent classes keep their row."""
    torch.manual_seed(1)
    K, d, tau, beta = 3, 5, 0.5, 0.75
    head = make_head("cmf", d, K, tau=tau, beta=beta)
    assert isinstance(head, CMFHead) and not list(head.parameters())
    rng = np.random.default_rng(4)
    h = rng.normal(size=(6, d)) * np.array([[1.0], [4.0], [0.2], [2.0], [1.0], [7.0]])
    ht = torch.tensor(h, dtype=torch.float32)
    W0 = head.weight.double().numpy().copy()
    np.testing.assert_allclose(head(ht).numpy(), _cosine_logits(h, W0, tau), rtol=1e-5, atol=1e-5)
    y = np.array([0, 2, 0, 2, 2, 0])  # class 1 absent
    head.observe(ht, torch.tensor(y))
    W1 = W0.copy()
    for k in (0, 2):
        mean_unit = np.mean([h[i] / np.linalg.norm(h[i]) for i in range(len(y)) if y[i] == k], axis=0)
        new = beta * W0[k] + (1 - beta) * mean_unit
        W1[k] = new / np.linalg.norm(new)
    np.testing.assert_allclose(head.weight.double().numpy(), W1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(head(ht).numpy(), _cosine_logits(h, W1, tau), rtol=1e-5, atol=1e-5)


def test_cmf_head_ema_closed_form():
    torch.manual_seed(0)
    head = CMFHead(3, 2, beta=0.5, renormalize=False)
    w0 = head.weight.clone()
    h = torch.tensor([[3.0, 0, 0], [0, 2.0, 0], [0, 0, 5.0]])
    head.observe(h, torch.tensor([0, 0, 0]))
    mean_unit = torch.tensor([1.0, 1.0, 1.0]) / 3  # mean of the unit features
    torch.testing.assert_close(head.weight[0], 0.5 * w0[0] + 0.5 * mean_unit)
    torch.testing.assert_close(head.weight[1], w0[1])  # class 1 absent: its row is kept


def test_cmf_head_without_renormalisation_forward_is_the_cosine_to_the_unnormalised_rows():
    """``renormalize=False``: observe leaves the rows off the sphere (w_k <- beta w_k + (1 - beta) mean unit
    feature), and forward is still cos(w_k, h) / tau = <h, w_k> / (||h|| ||w_k||) / tau, computed here by hand.
    A forward that skipped the normalisation of the rows would return <h / ||h||, w_k> / tau instead."""
    torch.manual_seed(3)
    K, d, tau, beta = 3, 4, 0.2, 0.6
    head = CMFHead(d, K, tau=tau, beta=beta, renormalize=False).double()
    rng = np.random.default_rng(7)
    h = rng.normal(size=(7, d)) * np.array([[0.5], [3.0], [1.0], [6.0], [0.1], [2.0], [1.5]])
    y = np.array([1, 0, 1, 1, 0, 0, 1])  # class 2 absent: its row stays a unit row
    W0 = head.weight.numpy().copy()
    head.observe(torch.tensor(h), torch.tensor(y))
    W1 = W0.copy()
    for k in (0, 1):
        members = [h[i] / math.sqrt(sum(v * v for v in h[i])) for i in range(len(y)) if y[i] == k]
        W1[k] = beta * W0[k] + (1 - beta) * sum(members) / len(members)
    np.testing.assert_allclose(head.weight.numpy(), W1, rtol=1e-12, atol=1e-14)
    norms = np.linalg.norm(W1, axis=1)
    assert norms[0] < 0.95 and norms[1] < 0.95 and abs(norms[2] - 1) < 1e-6  # off the sphere: the case at stake
    want = np.array(
        [
            [float(h[i] @ W1[k]) / (np.linalg.norm(h[i]) * np.linalg.norm(W1[k])) / tau for k in range(K)]
            for i in range(7)
        ]
    )
    np.testing.assert_allclose(head(torch.tensor(h)).detach().numpy(), want, rtol=1e-12, atol=1e-12)
    assert np.abs(want).max() <= 1 / tau + 1e-12  # cosines: bounded by 1 / tau whatever the rows' lengths


def test_hooks_on_a_user_module_by_name_and_regex():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 2))
    assert list(resolve_layers(net, r"\d")) == ["0", "1", "2", "3", "4"]
    assert list(resolve_layers(net, ["1", "3"])) == ["1", "3"]
    with pytest.raises(KeyError, match="no module named 'fc'"):
        resolve_layers(net, ["fc"])
    with pytest.raises(TypeError, match="measured_layers"):
        resolve_layers(net)
    x = torch.randn(8, 4)
    with FeatureHooks(net, ["1", "3"]) as hooks:
        net(x)
    torch.testing.assert_close(hooks.features["3"], torch.relu(net[2](torch.relu(net[0](x)))))
    assert not net[1]._forward_hooks  # removed on exit
    assert math.prod(hooks.features["1"].shape) == 8 * 6


def test_small_cnn_bottleneck_is_linear_and_checked():
    # no ReLU after the bottleneck: its features take negative values (a ReLU would confine them to an orthant)
    net = build_model("cnn", (1, 8, 8), 10, channels=[4], hidden=8, d=2)
    torch.manual_seed(0)
    h = net.features(torch.randn(64, 1, 8, 8))
    assert h.shape == (64, 2) and bool((h < 0).any()) and net.head.in_features == 2
    with pytest.raises(ValueError, match="d must be an int >= 1, got 0"):
        build_model("cnn", (1, 8, 8), 10, d=0)


def test_fixed_polygon_head_is_the_square_of_fig4_and_needs_d2():
    # [Jiang et al. 2024, Fig. 4]: the d = 2 Softmax Code of K = 4 is the square; class k sits at angle
    # 90 * assignment[k] degrees, so assignment [0, 2, 1, 3] puts classes 0 and 1 antipodal
    head = make_head("fixed", 2, 4, code="polygon", assignment=[0, 2, 1, 3], tau=0.05)
    W = head.weight.double().numpy()
    angles = np.degrees(np.arctan2(W[:, 1], W[:, 0])) % 360
    np.testing.assert_allclose(angles, [0.0, 180.0, 90.0, 270.0], atol=1e-5)
    assert W[0] @ W[1] == pytest.approx(-1.0, abs=1e-6)
    with pytest.raises(ValueError, match="'polygon' needs d = 2 features, got d = 3"):
        make_head("fixed", 3, 4, code="polygon")
