"""nclab.data.autoaugment: every operation against a hand-computed small image and against Pillow's own
implementation (the one AutoAugment was defined with), the ImageNet policy table, and the batched per-sample
policy against a one-image-at-a-time reference."""

import numpy as np
import pytest
import torch
from PIL import Image, ImageEnhance, ImageOps

from nclab.data.autoaugment import IMAGENET_POLICY, OPS, SIGNED_OPS, AutoAugment, apply_op, magnitude
from nclab.data.warp import rotation_inverse, shear_inverse


def u8(rows):
    return torch.tensor(rows, dtype=torch.uint8)


# ------------------------------------------------------------------------------------ hand-computed images
def test_geometric_ops_by_hand():
    z = torch.arange(1, 17, dtype=torch.uint8).view(1, 4, 4)
    # ShearX 0.3: row i reads column j + 0.3 (i + 0.5) -> rows 0, 1 unchanged, rows 2, 3 shifted left by one
    assert apply_op(z, "ShearX", 0.3).tolist() == [[[1, 2, 3, 4], [5, 6, 7, 8], [10, 11, 12, 0], [14, 15, 16, 0]]]
    assert torch.equal(apply_op(z.transpose(1, 2), "ShearY", 0.3), apply_op(z, "ShearX", 0.3).transpose(1, 2))
    # TranslateX by int(1.7) = 1 to the right; TranslateY by int(-2.5) = -2 (up), fill 0
    assert apply_op(z, "TranslateX", 1.7).tolist() == [[[0, 1, 2, 3], [0, 5, 6, 7], [0, 9, 10, 11], [0, 13, 14, 15]]]
    assert apply_op(z, "TranslateY", -2.5).tolist() == [[[9, 10, 11, 12], [13, 14, 15, 16], [0] * 4, [0] * 4]]
    assert torch.equal(apply_op(z, "Rotate", 90.0), torch.rot90(z, 1, (-2, -1)))
    assert torch.equal(apply_op(z, "Rotate", -90.0), torch.rot90(z, -1, (-2, -1)))
    assert apply_op(z, "TranslateX", 3.0, fill=99).tolist()[0][0] == [99, 99, 99, 1]


def test_photometric_ops_by_hand():
    z = u8([[[0, 100], [200, 255]]])
    assert apply_op(z, "Brightness", 0.5).tolist() == [[[0, 150], [255, 255]]]  # x 1.5, clamped
    assert apply_op(z, "Brightness", -0.5).tolist() == [[[0, 50], [100, 127]]]  # 127.5 truncates
    # Contrast around round(mean) = round(138.75) = 139 with factor 0.5: 139 + (z - 139) / 2, truncated
    assert apply_op(z, "Contrast", -0.5).tolist() == [[[69, 119], [169, 197]]]
    assert apply_op(z, "Invert").tolist() == [[[255, 155], [55, 0]]]
    assert apply_op(z, "Solarize", 128.0).tolist() == [[[0, 100], [55, 0]]]
    assert apply_op(z, "Solarize", 0.0).tolist() == [[[255, 155], [55, 0]]]
    assert torch.equal(apply_op(z, "Solarize", 256.0), z)
    assert apply_op(z, "Posterize", 2.0).tolist() == [[[0, 64], [192, 192]]]
    assert apply_op(z, "Posterize", 4.0).tolist() == [[[0, 96], [192, 240]]]
    assert torch.equal(apply_op(z, "Posterize", 8.0), z)
    # Color: gray of (200, 100, 50) = (19595*200 + 38470*100 + 7471*50 + 32768) >> 16 = 124; factor 0.5
    rgb = torch.tensor([200, 100, 50], dtype=torch.uint8).view(3, 1, 1)
    assert apply_op(rgb, "Color", -0.5).view(-1).tolist() == [162, 112, 87]
    assert apply_op(rgb, "Color", -1.0).view(-1).tolist() == [124, 124, 124]


def test_sharpness_autocontrast_equalize_by_hand():
    z = torch.full((1, 3, 3), 130, dtype=torch.uint8)
    z[0, 1, 1] = 0
    # smoothed centre (8 * 130 + 5 * 0) / 13 = 80; factor 0.5 -> 40, factor 1.5 -> -40 -> 0; border unchanged
    assert apply_op(z, "Sharpness", -0.5)[0, 1, 1] == 40
    assert apply_op(z, "Sharpness", 0.5)[0, 1, 1] == 0
    border = torch.ones(3, 3, dtype=torch.bool)
    border[1, 1] = False
    assert (apply_op(z, "Sharpness", 0.9)[0][border] == 130).all()
    # AutoContrast per channel: (50, 100, 150) -> (0, 127, 255); a constant channel is left alone
    ac = apply_op(u8([[[50, 100, 150]], [[7, 7, 7]]]), "AutoContrast")
    assert ac.tolist() == [[[0, 127, 255]], [[7, 7, 7]]]
    # Equalize on 1024 pixels: 300 x 5, 500 x 60, 224 x 90. step = (1024 - 224) // 255 = 3;
    # 5 -> (0 + 1) // 3 = 0, 60 -> (300 + 1) // 3 = 100, 90 -> min(255, (800 + 1) // 3)
    v = torch.tensor([5] * 300 + [60] * 500 + [90] * 224, dtype=torch.uint8).view(1, 32, 32)
    eq = apply_op(v, "Equalize")
    assert sorted(set(zip(v.view(-1).tolist(), eq.view(-1).tolist(), strict=True))) == [(5, 0), (60, 100), (90, 255)]
    few = u8([[[0, 0], [1, 2]]])  # step = (4 - 1) // 255 = 0: unchanged
    assert torch.equal(apply_op(few, "Equalize"), few)


# ------------------------------------------------------------------------------------ Pillow as reference
def _pil_reference(im, op, m):
    affine = Image.Transform.AFFINE
    nearest = Image.Resampling.NEAREST
    return {
        "ShearX": lambda: im.transform(im.size, affine, (1, m, 0, 0, 1, 0), nearest),
        "ShearY": lambda: im.transform(im.size, affine, (1, 0, 0, m, 1, 0), nearest),
        "TranslateX": lambda: im.transform(im.size, affine, (1, 0, -int(m), 0, 1, 0), nearest),
        "TranslateY": lambda: im.transform(im.size, affine, (1, 0, 0, 0, 1, -int(m)), nearest),
        "Rotate": lambda: im.rotate(m, nearest),
        "Brightness": lambda: ImageEnhance.Brightness(im).enhance(1 + m),
        "Color": lambda: ImageEnhance.Color(im).enhance(1 + m),
        "Contrast": lambda: ImageEnhance.Contrast(im).enhance(1 + m),
        "Sharpness": lambda: ImageEnhance.Sharpness(im).enhance(1 + m),
        "Posterize": lambda: ImageOps.posterize(im, int(m)),
        "Solarize": lambda: ImageOps.solarize(im, m),
        "AutoContrast": lambda: ImageOps.autocontrast(im),
        "Equalize": lambda: ImageOps.equalize(im),
        "Invert": lambda: ImageOps.invert(im),
    }[op]()


def _off_edges(op, m, H, W):
    """Pixels whose nearest-neighbour source point lies at least 1e-4 from a pixel edge: PIL computes the
    points in 16.16 fixed point (1.5e-5 px), so nearer ones -- exact ties included, which the shear bins do hit
    -- may fall on either side there."""
    if op not in ("ShearX", "ShearY", "Rotate"):
        return np.ones((H, W), dtype=bool)
    t = torch.tensor([m], dtype=torch.float64)
    A = (rotation_inverse(t, H, W) if op == "Rotate" else shear_inverse(t, "x" if op == "ShearX" else "y"))[0]
    jj, ii = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
    px = A[0, 0].item() * jj + A[0, 1].item() * ii + A[0, 2].item()
    py = A[1, 0].item() * jj + A[1, 1].item() * ii + A[1, 2].item()
    return (np.abs(px - np.round(px)) > 1e-4) & (np.abs(py - np.round(py)) > 1e-4)


@pytest.mark.parametrize("op", OPS)
def test_each_op_is_bit_identical_to_pillow(op, rng):
    # the magnitudes of the policy's bins, both signs
    for trial in range(60):
        a = rng.integers(0, 256, (3 + trial % 23, 3 + trial % 19, 3), dtype=np.uint8)
        if trial % 3 == 1:
            a = (a // 3 + 60).astype(np.uint8)  # a narrow range: AutoContrast / Equalize have work to do
        b = trial % 10
        m = magnitude(op, b, a.shape[0], a.shape[1])
        if op in SIGNED_OPS and trial % 2:
            m = -m
        ref = np.asarray(_pil_reference(Image.fromarray(a), op, m))
        ours = apply_op(torch.from_numpy(a).permute(2, 0, 1), op, m).permute(1, 2, 0).numpy()
        sharp = _off_edges(op, m, *a.shape[:2])
        assert sharp.mean() > 0.6  # the shear bins put whole rows on edges (m (i + 1/2) = 1/2 mod 1)
        np.testing.assert_array_equal(ours[sharp], ref[sharp], err_msg=f"{op} m={m} shape={a.shape}")


# ------------------------------------------------------------------------------------ the policy
def test_imagenet_policy_table_and_magnitudes():
    assert len(IMAGENET_POLICY) == 25
    assert IMAGENET_POLICY[0] == (("Posterize", 0.4, 8), ("Rotate", 0.6, 9))
    assert IMAGENET_POLICY[18] == (("ShearX", 0.6, 5), ("Equalize", 1.0, None))
    for sub in IMAGENET_POLICY:
        for op, p, b in sub:
            assert op in OPS and 0.0 <= p <= 1.0 and (b is None or 0 <= b <= 9)
    assert [magnitude("Posterize", b, 8, 8) for b in range(10)] == [8, 8, 7, 7, 6, 6, 5, 5, 4, 4]
    assert magnitude("Rotate", 9, 8, 8) == 30.0 and magnitude("ShearX", 5, 8, 8) == pytest.approx(1 / 6)
    assert magnitude("Solarize", 0, 8, 8) == 255.0 and magnitude("Solarize", 9, 8, 8) == 0.0
    assert magnitude("TranslateX", 9, 10, 331) == pytest.approx(150.0)  # 150/331 of the width
    assert magnitude("Color", 9, 8, 8) == pytest.approx(0.9) and magnitude("Invert", None, 8, 8) == 0.0


def _one_at_a_time(x, params):
    policy, uniforms, signs = params
    out = []
    for b in range(x.shape[0]):
        z = x[b]
        for slot in (0, 1):
            op, p, bin_ = IMAGENET_POLICY[int(policy[b])][slot]
            if uniforms[b, slot] <= p:
                m = magnitude(op, bin_, *x.shape[-2:])
                z = apply_op(z, op, m * int(signs[b, slot]) if op in SIGNED_OPS else m)
        out.append(z)
    return torch.stack(out)


def test_batched_policy_equals_the_per_image_reference_and_draws_uniformly():
    x = torch.randint(0, 256, (200, 3, 12, 12), dtype=torch.uint8)
    aa = AutoAugment()
    params = aa.params(x, torch.Generator().manual_seed(3))
    assert torch.equal(aa.apply(x, params), _one_at_a_time(x, params))
    policy, uniforms, signs = aa.params(torch.zeros(25000, 1, 1, 1), torch.Generator().manual_seed(4))
    counts = np.bincount(policy.numpy(), minlength=25)
    assert np.abs(counts - 1000).max() < 5 * np.sqrt(1000)  # uniform over the 25 sub-policies
    assert set(signs.unique().tolist()) == {-1, 1} and 0 <= uniforms.min() and uniforms.max() < 1


def test_autoaugment_is_seeded_and_takes_uint8_only():
    x = torch.randint(0, 256, (6, 3, 10, 10), dtype=torch.uint8)
    aa = AutoAugment()
    a = aa(x, torch.Generator().manual_seed(0))
    assert torch.equal(a, aa(x, torch.Generator().manual_seed(0)))
    assert aa(x[0], torch.Generator().manual_seed(0)).shape == (3, 10, 10)
    with pytest.raises(TypeError, match="uint8"):
        aa(x.float(), torch.Generator())
    with pytest.raises(ValueError, match="op"):
        apply_op(x, "Blur")
    with pytest.raises(ValueError, match="policy"):
        AutoAugment("cifar10")
