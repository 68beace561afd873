"""The papers' networks are the reference implementations': torchvision's ResNet / ResNeXt / VGG / DenseNet and
timm's DeiT. Parameter counts equal the reference figures, state-dict keys are the reference's (written out below
from the reference sources, since torchvision and timm cannot be imported here) up to the documented renames,
initialisation follows the reference, the small-image variants and the feature bottleneck have hand-derived
parameter counts, and every named layer is measurable by ``CollapseMonitor``."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from nclab.measure import collect_features
from nclab.metrics import collapse_report
from nclab.monitor import CollapseMonitor
from nclab.nets import NET_MODELS, build_model, load_reference_state_dict, reference_key_map, to_reference_state_dict
from nclab.stats import ClassStats
from nclab.train.config import RunConfig

#: torchvision / timm, 1,000 classes on (3, 224, 224) (``sum(p.numel() for p in model.parameters())``)
REFERENCE_COUNTS = {
    "resnet18": 11_689_512,
    "resnet34": 21_797_672,
    "resnet50": 25_557_032,
    "resnext50_32x4d": 25_028_904,
    "vgg11": 132_863_336,
    "vgg13": 133_047_848,
    "vgg11_bn": 132_868_840,
    "vgg13_bn": 133_053_736,
    "densenet121": 7_978_856,
    "deit_tiny": 5_717_416,
    "deit_small": 22_050_664,
}

BN_KEYS = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")


def _count(name, shape=(3, 224, 224), K=1000, **opts):
    with torch.device("meta"):  # no memory, no initialisation cost: only the shapes
        model = build_model(name, shape, K, **opts)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", list(REFERENCE_COUNTS))
def test_reference_parameter_counts(name):
    assert _count(name) == REFERENCE_COUNTS[name]


def test_small_image_variant_counts_derived_by_hand():
    """The 3x3 stride-1 stem replaces a 7x7 conv (3 -> 64 channels): 3 * 64 * (49 - 9) = 7,680 fewer parameters.
    A K-class head has (d + 1) K parameters. The CIFAR VGG drops torchvision's 7x7 pool and 4096-4096
    classifier."""
    stem = 3 * 64 * (49 - 9)
    assert _count("resnet18", (3, 32, 32)) == 11_681_832 == REFERENCE_COUNTS["resnet18"] - stem
    assert _count("resnet18", (3, 32, 32), K=10) == 11_681_832 - 513 * 1000 + 513 * 10 == 11_173_962
    assert _count("resnet50", (3, 32, 32), K=10) == REFERENCE_COUNTS["resnet50"] - stem - 2049 * 990 == 23_520_842
    assert _count("densenet121", (3, 32, 32)) == REFERENCE_COUNTS["densenet121"] - stem == 7_971_176
    assert _count("resnet18", (3, 32, 32), variant="imagenet") == REFERENCE_COUNTS["resnet18"]
    assert _count("resnet18", (3, 224, 224), variant="cifar") == 11_681_832
    classifier = (512 * 49 * 4096 + 4096) + (4096 * 4096 + 4096) + (4096 * 1000 + 1000)
    bn = 2 * (64 + 128 + 2 * 256 + 4 * 512)  # vgg11_bn: weight and bias of 8 batch norms
    vgg11_convs = REFERENCE_COUNTS["vgg11"] - classifier
    convs = [(3, 64), (64, 128), (128, 256), (256, 256), (256, 512), (512, 512), (512, 512), (512, 512)]
    assert vgg11_convs == sum(9 * a * b + b for a, b in convs) == 9_220_480
    assert _count("vgg11", (3, 32, 32), K=10) == vgg11_convs + 513 * 10
    assert _count("vgg11_bn", (3, 32, 32), K=10) == vgg11_convs + bn + 513 * 10
    assert _count("vgg13_bn", (3, 32, 32), K=100) == REFERENCE_COUNTS["vgg13_bn"] - classifier + 513 * 100


def _cifar_densenet_count(depth, k, bc, K):
    """[Huang et al. 2017, Sec. 3-4] by hand: 3x3 stem to 2k (BC) or 16 channels; each layer BN(c) + [1x1 to 4k +
    BN(4k)] + 3x3 to k; transitions BN + 1x1 to floor(theta c); final BN; linear head."""
    n, c = (depth - 4) // (6 if bc else 3), (2 * k if bc else 16)
    total = 27 * c
    for s in range(3):
        for i in range(n):
            cin = c + i * k
            total += 2 * cin + ((cin * 4 * k + 2 * 4 * k + 4 * k * 9 * k) if bc else cin * 9 * k)
        c += n * k
        if s < 2:
            c_out = int(c * (0.5 if bc else 1.0))
            total += 2 * c + c * c_out
            c = c_out
    return total + 2 * c + c * K + K


@pytest.mark.parametrize(
    ("depth", "k", "bc", "paper_millions"),
    [(40, 12, False, 1.0), (100, 12, True, 0.8), (250, 24, True, 15.3), (190, 40, True, 25.6)],
)
def test_cifar_densenet_counts(depth, k, bc, paper_millions):
    """[Huang et al. 2017, Table 2]'s CIFAR-10 sizes (rounded to 0.1M there)."""
    got = _count("densenet", (3, 32, 32), K=10, depth=depth, growth=k, bottleneck=bc)
    assert got == _cifar_densenet_count(depth, k, bc, 10)
    assert abs(got / 1e6 - paper_millions) < 0.05
    if (depth, k) == (100, 12):
        assert got == 769_162


def test_variant_from_input_size_and_explicit():
    """'auto' gives the small-image stem up to 64 pixels a side (MNIST, CIFAR, Tiny-ImageNet), the reference above."""
    for side, k in ((28, 3), (32, 3), (64, 3), (65, 7), (96, 7), (224, 7)):
        net = build_model("resnet18", (3, side, side), 10, width=4)
        assert net.conv1.kernel_size == (k, k) and net.conv1.stride == ((1, 1) if k == 3 else (2, 2))
        assert isinstance(net.maxpool, nn.Identity if k == 3 else nn.MaxPool2d)
    assert build_model("resnet18", (3, 32, 32), 10, width=4, variant="imagenet").conv1.kernel_size == (7, 7)
    vgg = build_model("vgg11", (3, 224, 224), 10, width=4, hidden=8, variant="cifar")
    assert vgg.classifier is None and vgg.d == 32
    with pytest.raises(ValueError, match="variant must be one of 'auto', 'imagenet', 'cifar'"):
        build_model("resnet18", (3, 32, 32), 10, variant="small")


# ---------------------------------------------------------------- state-dict keys of the reference sources
def _torchvision_resnet_keys(layers, bottleneck):
    """torchvision/models/resnet.py: conv1, bn1, layer1..4 (blocks conv1/bn1/conv2/bn2[/conv3/bn3], downsample.0/1
    on the first block of a stage when the shape changes), fc."""
    keys = ["conv1.weight", *(f"bn1.{b}" for b in BN_KEYS)]
    for s, n in enumerate(layers, start=1):
        for i in range(n):
            p = f"layer{s}.{i}"
            for j in (1, 2, 3) if bottleneck else (1, 2):
                keys += [f"{p}.conv{j}.weight", *(f"{p}.bn{j}.{b}" for b in BN_KEYS)]
            if i == 0 and (s > 1 or bottleneck):
                keys += [f"{p}.downsample.0.weight", *(f"{p}.downsample.1.{b}" for b in BN_KEYS)]
    return [*keys, "fc.weight", "fc.bias"]


def _torchvision_vgg_keys(cfg, batch_norm):
    """torchvision/models/vgg.py make_layers: conv (+ bn) + relu per number, one module per 'M'; classifier
    Linear 0, 3, 6."""
    keys, idx = [], 0
    for v in cfg:
        if v == "M":
            idx += 1
            continue
        keys += [f"features.{idx}.weight", f"features.{idx}.bias"]
        if batch_norm:
            keys += [f"features.{idx + 1}.{b}" for b in BN_KEYS]
        idx += 3 if batch_norm else 2
    return keys + [f"classifier.{i}.{w}" for i in (0, 3, 6) for w in ("weight", "bias")]


def _torchvision_densenet121_keys():
    """torchvision/models/densenet.py: features.conv0/norm0, denseblock{i}.denselayer{j}.norm1/conv1/norm2/conv2,
    transition{i}.norm/conv, norm5; classifier."""
    keys = ["features.conv0.weight", *(f"features.norm0.{b}" for b in BN_KEYS)]
    for i, n in enumerate((6, 12, 24, 16), start=1):
        for j in range(1, n + 1):
            p = f"features.denseblock{i}.denselayer{j}"
            keys += [*(f"{p}.norm1.{b}" for b in BN_KEYS), f"{p}.conv1.weight"]
            keys += [*(f"{p}.norm2.{b}" for b in BN_KEYS), f"{p}.conv2.weight"]
        if i < 4:
            keys += [*(f"features.transition{i}.norm.{b}" for b in BN_KEYS), f"features.transition{i}.conv.weight"]
    return [*keys, *(f"features.norm5.{b}" for b in BN_KEYS), "classifier.weight", "classifier.bias"]


def _timm_vit_keys(depth):
    """timm/models/vision_transformer.py (class token, learned pos_embed, no reg tokens, LayerScale off)."""
    keys = ["cls_token", "pos_embed", "patch_embed.proj.weight", "patch_embed.proj.bias"]
    for i in range(depth):
        for m in ("norm1", "attn.qkv", "attn.proj", "norm2", "mlp.fc1", "mlp.fc2"):
            keys += [f"blocks.{i}.{m}.weight", f"blocks.{i}.{m}.bias"]
    return [*keys, "norm.weight", "norm.bias", "head.weight", "head.bias"]


_A = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")
_B = (64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")
# name, small reference-architecture options, expected keys, expected count of keys
KEY_CASES = [
    ("resnet18", {"width": 4}, _torchvision_resnet_keys((2, 2, 2, 2), False), 122),
    ("resnet34", {"width": 4}, _torchvision_resnet_keys((3, 4, 6, 3), False), 218),
    ("resnet50", {"width": 4}, _torchvision_resnet_keys((3, 4, 6, 3), True), 320),
    ("resnext50_32x4d", {"width": 16}, _torchvision_resnet_keys((3, 4, 6, 3), True), 320),
    ("vgg11", {"width": 4, "hidden": 8}, _torchvision_vgg_keys(_A, False), 22),
    ("vgg11_bn", {"width": 4, "hidden": 8}, _torchvision_vgg_keys(_A, True), 62),
    ("vgg13", {"width": 4, "hidden": 8}, _torchvision_vgg_keys(_B, False), 26),
    ("vgg13_bn", {"width": 4, "hidden": 8}, _torchvision_vgg_keys(_B, True), 76),
    ("densenet121", {"growth_rate": 2, "num_init_features": 4}, _torchvision_densenet121_keys(), 727),
    ("deit_tiny", {}, _timm_vit_keys(12), 152),
]


@pytest.mark.parametrize(("name", "opts", "keys", "n_keys"), KEY_CASES, ids=[c[0] for c in KEY_CASES])
def test_reference_state_dict_round_trip(name, opts, keys, n_keys):
    """nclab -> reference names gives exactly the reference's keys, in its order; a state dict with those names
    loads back (every tensor equal, the same logits)."""
    torch.manual_seed(0)
    shape = (3, 32, 32)
    variant = {} if name.startswith("deit") else {"variant": "imagenet"}
    src = build_model(name, shape, 7, **variant, **opts).eval()
    ref = to_reference_state_dict(src)
    assert list(ref) == keys and len(keys) == n_keys
    assert keys[-1] in ("fc.bias", "classifier.6.bias", "classifier.bias", "head.bias")
    torch.manual_seed(1)
    dst = build_model(name, shape, 7, **variant, **opts).eval()
    assert not torch.equal(dst.head.weight, src.head.weight)
    result = load_reference_state_dict(dst, ref)
    assert not result.missing_keys and not result.unexpected_keys
    loaded = dst.state_dict()
    for k, v in src.state_dict().items():
        assert torch.equal(loaded[k], v), k
    x = torch.randn(2, *shape)
    with torch.no_grad():
        torch.testing.assert_close(dst(x), src(x), rtol=0, atol=0)


def test_reference_key_map_renames_and_mismatches():
    net = build_model("vgg11_bn", (3, 32, 32), 5, width=4, hidden=8, variant="imagenet")
    names = reference_key_map(net)
    assert names["body.0.weight"] == "features.0.weight" and names["head.weight"] == "classifier.6.weight"
    assert names["classifier.3.bias"] == "classifier.3.bias"
    assert (
        reference_key_map(build_model("densenet121", (3, 32, 32), 5, growth_rate=2))["head.bias"] == "classifier.bias"
    )
    # the small-image stem cannot take an ImageNet conv1: load_state_dict names the mismatch
    imagenet = to_reference_state_dict(build_model("resnet18", (3, 32, 32), 5, width=4, variant="imagenet"))
    with pytest.raises(RuntimeError, match=r"size mismatch for conv1\.weight"):
        load_reference_state_dict(build_model("resnet18", (3, 32, 32), 5, width=4), imagenet)
    # a bottleneck is not in the reference: strict=False loads the rest and reports it
    bott = build_model("resnet18", (3, 32, 32), 5, width=4, variant="imagenet", d=3)
    res = load_reference_state_dict(bott, {k: v for k, v in imagenet.items() if not k.startswith("fc.")}, strict=False)
    assert sorted(res.missing_keys) == ["bottleneck.bias", "bottleneck.weight", "head.bias", "head.weight"]
    torch.testing.assert_close(bott.conv1.weight, imagenet["conv1.weight"], rtol=0, atol=0)
    with pytest.raises(TypeError, match="state_dict must be a mapping"):
        load_reference_state_dict(bott, [1, 2])


# ---------------------------------------------------------------- forward passes
@pytest.mark.parametrize("name", list(REFERENCE_COUNTS))
def test_reference_networks_forward_on_a_small_input(name):
    """Each reference network (full size, 1,000 classes) runs a forward pass on a small input on the CPU, and its
    logits are its head applied to its penultimate features."""
    torch.manual_seed(0)
    shape = (3, 32, 32) if not name.startswith("densenet") else (3, 64, 64)
    variant = {} if name.startswith("deit") else {"variant": "imagenet"}
    net = build_model(name, shape, 1000, **variant).eval()
    x = torch.randn(1, *shape)
    with torch.no_grad():
        h, out = net.features(x), net(x)
    assert h.shape == (1, net.d) and out.shape == (1, 1000) and torch.isfinite(out).all()
    torch.testing.assert_close(out, net.head(h), rtol=0, atol=0)


def test_vit_attention_against_per_head_formula():
    """timm's qkv layout: rows [0, D) of the qkv weight are the queries, [D, 2D) the keys, [2D, 3D) the values,
    head h owns the rows h*D/H .. (h+1)*D/H of each; attention is softmax(q k^T / sqrt(D/H)) v, then proj. A
    different split (e.g. per head first) or scale changes the output."""
    torch.manual_seed(0)
    net = build_model("vit", (3, 8, 8), 3, patch_size=4, embed_dim=8, depth=1, num_heads=2).eval()
    attn = net.blocks[0].attn
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    W, b = attn.qkv.weight.double(), attn.qkv.bias.double()
    heads = []
    for h in range(2):
        rows = slice(4 * h, 4 * h + 4)
        q = x @ W[0:8][rows].T + b[0:8][rows]
        k = x @ W[8:16][rows].T + b[8:16][rows]
        v = x @ W[16:24][rows].T + b[16:24][rows]
        heads.append(torch.softmax(q @ k.transpose(1, 2) / math.sqrt(4), dim=-1) @ v)
    ref = torch.cat(heads, dim=-1) @ attn.proj.weight.double().T + attn.proj.bias.double()
    with torch.no_grad():
        torch.testing.assert_close(attn.double()(x), ref, rtol=1e-12, atol=1e-12)


def test_vit_token_order_and_class_token():
    """The class token is prepended and read at position 0 after the final norm; patches in row-major order."""
    torch.manual_seed(0)
    net = build_model("vit", (1, 4, 8), 3, patch_size=4, embed_dim=4, depth=1, num_heads=1).eval()
    assert net.pos_embed.shape == (1, 1 + 2, 4)
    x = torch.zeros(1, 1, 4, 8)
    x[..., 4:] = 1.0  # the right patch only
    with torch.no_grad():
        tokens = net.patch_embed(x)
        w, b = net.patch_embed.proj.weight, net.patch_embed.proj.bias
        torch.testing.assert_close(tokens[0, 0], b)  # left patch (zeros)
        torch.testing.assert_close(tokens[0, 1], w.sum(dim=(1, 2, 3)) + b)
        seq = torch.cat([net.cls_token, tokens], dim=1) + net.pos_embed
        torch.testing.assert_close(net.features(x), net.norm(net.blocks(seq))[:, 0])


# ---------------------------------------------------------------- initialisation
def _std(t):
    return float(t.detach().double().std())


def test_initialisation_as_the_references():
    """torchvision ResNet / VGG: convs N(0, 2 / fan_out); DenseNet: N(0, 2 / fan_in); BN 1 / 0; VGG linears
    N(0, 0.01^2), zero bias; ResNet fc PyTorch's U(+-1/sqrt(fan_in)); timm ViT: linears trunc_normal(0.02), zero
    bias, pos_embed trunc_normal(0.02), cls_token N(0, 1e-12). Tensors of >= 10^5 entries: the sample std is
    within 1 % of sigma; fan_in and fan_out differ by sqrt(2) or more in each checked layer."""
    torch.manual_seed(0)
    rn = build_model("resnet18", (3, 32, 32), 10)
    conv = rn.layer4[0].conv1  # 256 -> 512
    assert _std(conv.weight) == pytest.approx(math.sqrt(2 / (512 * 9)), rel=0.01)
    assert torch.equal(rn.layer2[0].bn1.weight, torch.ones(128)) and not rn.layer2[0].bn1.bias.any()
    assert float(rn.head.weight.detach().abs().max()) <= 1 / math.sqrt(512)
    assert (
        build_model("resnet18", (3, 32, 32), 10, width=4, zero_init_residual=True).layer3[1].bn2.weight.abs().sum() == 0
    )
    vgg = build_model("vgg11", (3, 32, 32), 10, width=16, hidden=512, variant="imagenet")
    conv = vgg.body[11]  # 64 -> 128 channels
    assert _std(conv.weight) == pytest.approx(math.sqrt(2 / (128 * 9)), rel=0.01) and not conv.bias.any()
    assert _std(vgg.classifier[0].weight) == pytest.approx(0.01, rel=0.01) and not vgg.classifier[0].bias.any()
    assert _std(vgg.head.weight) == pytest.approx(0.01, rel=0.05) and not vgg.head.bias.any()
    dn = build_model("densenet121", (3, 32, 32), 10)
    c = dn.body.denseblock3.denselayer24.conv1  # 992 -> 128, 1x1
    assert _std(c.weight) == pytest.approx(math.sqrt(2 / 992), rel=0.01) and not dn.head.bias.any()
    vit = build_model("deit_tiny", (3, 224, 224), 1000)
    assert _std(vit.blocks[0].mlp.fc1.weight) == pytest.approx(0.02, rel=0.01) and not vit.blocks[0].mlp.fc1.bias.any()
    assert _std(vit.pos_embed) == pytest.approx(0.02, rel=0.02) and _std(vit.cls_token) < 1e-5
    assert _std(vit.head.weight) == pytest.approx(0.02, rel=0.01)
    # a linear head built from a spec is initialised as the reference's classifier
    torch.manual_seed(0)
    head = build_model("vgg11", (3, 32, 32), 1000, width=4, head={"kind": "linear", "bias": False}).head
    assert head.bias is None and _std(head.weight) == pytest.approx(0.01, rel=0.05)


# ---------------------------------------------------------------- feature bottleneck and bias-free head
def test_feature_bottleneck_last_block():
    """[Jiang et al. 2024, App. B.1]: the last block's second conv (basic) / third conv (bottleneck block) has d
    channels, and its shortcut is a 1x1 conv + BN to d. Counts from the reference by hand."""
    d, K = 10, 100
    r18 = _count("resnet18", (3, 32, 32), K=K)
    change = -(512 * 512 * 9 + 2 * 512) + (512 * d * 9 + 2 * d) + (512 * d + 2 * d) - 513 * K + (d + 1) * K
    assert _count("resnet18", (3, 32, 32), K=K, d=d, feature_layer="last_block") == r18 + change
    r50 = _count("resnet50", (3, 32, 32), K=K)
    change = -(512 * 2048 + 2 * 2048) + (512 * d + 2 * d) + (2048 * d + 2 * d) - 2049 * K + (d + 1) * K
    assert _count("resnet50", (3, 32, 32), K=K, d=d, feature_layer="last_block") == r50 + change
    torch.manual_seed(0)
    net = build_model("resnet18", (3, 16, 16), 7, width=4, d=3, feature_layer="last_block").eval()
    last = net.layer4[1]
    assert last.conv2.out_channels == 3 and isinstance(last.downsample[0], nn.Conv2d)
    assert net.d == 3 and net.penultimate_name == "pool" and net.head.weight.shape == (7, 3)
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        h4 = net.layer4[0](net.layer3(net.layer2(net.layer1(net.maxpool(net.relu(net.bn1(net.conv1(x))))))))
        block = torch.relu(last.bn2(last.conv2(last.relu(last.bn1(last.conv1(h4))))) + last.downsample(h4))
        torch.testing.assert_close(net.features(x), block.mean(dim=(2, 3)))


def test_feature_bottleneck_linear_and_bias_free_head():
    """[Jiang et al. 2024, App. B.3]: a Linear(d_backbone, d) with bias between the pooled features and the head;
    [Tirer & Bruna 2022]: a head without bias."""
    K = 10_000
    backbone = 11_168_832  # resnet18, small-image stem, no fc
    assert _count("resnet18", (3, 32, 32), K=K) == backbone + 513 * K
    assert _count("resnet18", (3, 32, 32), K=K, d=512) == backbone + 512 * 513 + 513 * K
    assert _count("resnet18", (3, 32, 32), K=K, head={"kind": "linear", "bias": False}) == backbone + 512 * K
    assert _count("deit_tiny", K=100, d=10) == REFERENCE_COUNTS["deit_tiny"] - 193 * 1000 + 193 * 10 + 11 * 100
    assert _count("densenet121", K=100, d=10) == REFERENCE_COUNTS["densenet121"] - 1025 * 1000 + 1025 * 10 + 11 * 100
    vgg = 132_863_336 - 4097 * 1000
    assert _count("vgg11", K=100, d=10) == vgg + 4097 * 10 + 11 * 100
    torch.manual_seed(0)
    for name, opts in (
        ("vgg11_bn", {"width": 4}),
        ("densenet", {"depth": 10, "growth": 4}),
        ("vit", {"patch_size": 8, "embed_dim": 8, "depth": 1, "num_heads": 2}),
    ):
        net = build_model(name, (3, 16, 16), 5, d=3, head={"kind": "linear", "bias": False}, **opts).eval()
        layers = net.measured_layers()
        assert list(layers)[-1] == "bottleneck" == net.penultimate_name and net.d == 3
        x = torch.randn(4, 3, 16, 16)
        feats = collect_features(net, x)
        h = feats[list(layers)[-2]].double() @ net.bottleneck.weight.double().T + net.bottleneck.bias.double()
        torch.testing.assert_close(feats["bottleneck"].double(), h)
        with torch.no_grad():
            torch.testing.assert_close(net(x).double(), h @ net.head.weight.double().T)  # no bias
        assert net.head.bias is None
    with pytest.raises(ValueError, match="feature_layer='last_block' is not available for VGG"):
        build_model("vgg11", (3, 32, 32), 10, d=10, feature_layer="last_block")
    with pytest.raises(ValueError, match="d must be an int >= 1"):
        build_model("resnet18", (3, 32, 32), 10, d=0)


# ---------------------------------------------------------------- the monitor measures every named layer
MONITOR_CASES = [
    ("resnet18", (3, 16, 16), {"width": 4}),
    ("resnext50_32x4d", (3, 16, 16), {"width": 16, "variant": "imagenet"}),
    ("vgg13_bn", (3, 32, 32), {"width": 4, "hidden": 12, "variant": "imagenet"}),
    ("densenet121", (3, 32, 32), {"growth_rate": 4, "num_init_features": 8}),
    ("densenet", (3, 16, 16), {"depth": 10, "growth": 4}),
    ("deit_tiny", (3, 32, 32), {}),
]


@pytest.mark.parametrize(("name", "shape", "opts"), MONITOR_CASES, ids=[c[0] for c in MONITOR_CASES])
def test_named_layers_measured_by_the_monitor(name, shape, opts):
    """Every named layer of each family goes through CollapseMonitor; the penultimate layer's report equals
    collapse_report of ClassStats fed with features(x) directly."""
    torch.manual_seed(0)
    K, n = 3, 24
    net = build_model(name, shape, K, **opts)
    x, y = torch.randn(n, *shape), torch.arange(n) % K
    layers = list(net.measured_layers())
    res = CollapseMonitor(net, K, layers=layers).measure([(x[:12], y[:12]), (x[12:], y[12:])])
    assert set(layers) <= set(res.reports)
    net.eval()
    with torch.no_grad():
        h = net.features(x)
    ref = ClassStats(K, h.shape[1], track="full")
    ref.update(h, y)
    expect = collapse_report(ref)
    got = res.reports[net.penultimate_name]
    for key in ("nc1", "trace_ratio", "vci", "equinorm"):
        assert got[key] == pytest.approx(expect[key], rel=1e-6), key
    for layer in layers:  # light statistics at the other layers: finite numbers
        assert math.isfinite(res.reports[layer]["trace_ratio"]), layer


def test_registered_names_are_config_options():
    """Every registered network is reachable from a run config, its options checked against its signature."""
    for name in ("resnet18", "resnet34", "resnet50", "resnext50_32x4d", "vgg11", "vgg11_bn", "vgg13", "vgg13_bn",
                 "densenet121", "densenet", "deit_tiny", "deit_small", "vit"):  # fmt: skip
        assert name in NET_MODELS
    cfg = RunConfig.model_validate(
        {
            "model": {
                "name": "resnet18",
                "options": {"variant": "cifar", "d": 10, "feature_layer": "last_block"},
            }
        }
    )
    assert cfg.model.options["feature_layer"] == "last_block"
    with pytest.raises(ValueError, match="variant"):
        RunConfig.model_validate({"model": {"name": "resnet18", "options": {"variant": "small"}}})
    with pytest.raises(ValueError, match="drop_path_rate"):
        RunConfig.model_validate({"model": {"name": "deit_tiny", "options": {"drop_path_rate": "0.1"}}})


def test_configs_written_before_the_size_letters_still_validate():
    """``model.options.feature_dim`` and ``data.options.num_classes`` (configs written before the sizes were
    ``d`` / ``K``) are read as the new keys, with a DeprecationWarning naming both; both at once is an error."""
    old = {"name": "resnet18", "options": {"variant": "cifar", "feature_dim": 10}}
    with pytest.warns(DeprecationWarning) as record:
        cfg = RunConfig.model_validate({"model": old, "data": {"name": "features", "options": {"num_classes": 3}}})
    assert sorted(str(w.message) for w in record) == [
        "data.options.num_classes is deprecated: it is now data.options.K (read as such)",
        "model.options.feature_dim is deprecated: it is now model.options.d (read as such)",
    ]
    assert cfg.model.options == {"variant": "cifar", "d": 10} and cfg.data.options == {"K": 3}
    with pytest.raises(ValueError, match="'feature_dim' is the old name of 'd'; give only 'd'"):
        RunConfig.model_validate({"model": {"name": "resnet18", "options": {"feature_dim": 10, "d": 10}}})
