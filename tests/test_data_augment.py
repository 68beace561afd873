"""nclab.data.augment and nclab.data.mixing: each transform against its definition (coordinates encoded in the
pixels, hand-computed boxes, closed-form distributions), determinism under a seed, per-sample randomness."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nclab.data.augment import (
    CenterCrop,
    Compose,
    Normalize,
    RandomCrop,
    RandomErasing,
    RandomHorizontalFlip,
    RandomResizedCrop,
    RandomRotation,
    Resize,
    ToFloat,
    cifar_train_transform,
    imagenet_eval_transform,
    imagenet_train_transform,
    resize_image,
)
from nclab.data.mixing import DropPath, MixupCutmix, drop_path, smooth_one_hot
from nclab.data.rng import item_generator


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def coords(B, H, W):
    """Float images whose channel 0 holds row + 1 and channel 1 column + 1 (0 = padding)."""
    r = torch.arange(1, H + 1, dtype=torch.float32).view(H, 1).expand(H, W)
    c = torch.arange(1, W + 1, dtype=torch.float32).view(1, W).expand(H, W)
    return torch.stack([r, c]).expand(B, 2, H, W).clone()


# ------------------------------------------------------------------------------------------ RandomCrop
def test_random_crop_with_padding_moves_pixels_by_at_most_p():
    B, H, W, p = 400, 8, 8, 3
    x = coords(B, H, W)
    t = RandomCrop(8, padding=p)
    params = t.params(x, gen(1))
    out = t.apply(x, params)
    assert out.shape == (B, 2, 8, 8)
    rows = torch.arange(8).view(1, 8, 1)
    cols = torch.arange(8).view(1, 1, 8)
    di = params[:, 0].view(B, 1, 1) - p  # the crop is a translation by (top - p, left - p)
    dj = params[:, 1].view(B, 1, 1) - p
    inside = (rows + di >= 0) & (rows + di < H) & (cols + dj >= 0) & (cols + dj < W)
    src_r, src_c = out[:, 0] - 1, out[:, 1] - 1
    assert torch.equal(src_r[inside], (rows + di).expand(B, 8, 8)[inside].float())
    assert torch.equal(src_c[inside], (cols + dj).expand(B, 8, 8)[inside].float())
    assert (out[:, :, :, :][~inside.unsqueeze(1).expand(B, 2, 8, 8)] == 0).all()  # padding elsewhere
    moved = (src_r - rows).abs()[inside]
    assert moved.max() <= p and (src_c - cols).abs()[inside].max() <= p
    # every offset 0 .. 2p is drawn (uniform over the 7 x 7 positions), per sample
    assert set(params[:, 0].tolist()) == set(range(2 * p + 1)) == set(params[:, 1].tolist())


def test_random_crop_without_padding_at_full_size_is_identity_and_keeps_dtype():
    x = torch.randint(0, 256, (5, 3, 6, 7), dtype=torch.uint8)
    out = RandomCrop((6, 7))(x, gen())
    assert out.dtype == torch.uint8 and torch.equal(out, x)
    single = RandomCrop(4, padding=1)(x[0], gen())
    assert single.shape == (3, 4, 4)
    with pytest.raises(ValueError, match="larger than the padded image"):
        RandomCrop(9)(x, gen())


# ------------------------------------------------------------------------------------------ flip
def test_flip_twice_is_identity_and_flips_exactly_the_drawn_samples():
    x = torch.randn(64, 3, 5, 4)
    t = RandomHorizontalFlip(1.0)
    assert torch.equal(t(t(x, gen(0)), gen(1)), x)
    half = RandomHorizontalFlip(0.5)
    which = half.params(x, gen(3))
    out = half.apply(x, which)
    assert torch.equal(out[which], x[which].flip(-1))
    assert torch.equal(out[~which], x[~which])
    assert torch.equal(RandomHorizontalFlip(0.0)(x, gen()), x)


def test_flip_probability_is_p():
    n, p = 20000, 0.3
    frac = RandomHorizontalFlip(p).params(torch.zeros(n, 1, 1, 1), gen(5)).float().mean().item()
    assert abs(frac - p) < 4 * math.sqrt(p * (1 - p) / n)


# ------------------------------------------------------------------------------------------ rotation
def test_rotation_by_90_degrees_is_rot90_counter_clockwise():
    x = torch.randn(3, 2, 6, 6)
    for interp in ("nearest", "bilinear"):
        out = RandomRotation((90, 90), interpolation=interp)(x, gen())
        torch.testing.assert_close(out, torch.rot90(x, 1, (-2, -1)), atol=1e-5, rtol=0)
    assert torch.equal(RandomRotation(0)(x, gen()), x)


def test_rotation_moves_a_dot_along_the_circle():
    # a 3x3 bright block at offset (+6, 0) from the centre of a 21x21 image; after rotating by t counter-
    # clockwise (y down) its centre of mass is at (6 cos t, -6 sin t)
    x = torch.zeros(1, 1, 21, 21)
    x[0, 0, 9:12, 15:18] = 1.0
    t = RandomRotation((-15, 15), interpolation="bilinear")
    for angle in (-15.0, -7.0, 4.0, 15.0):
        out = t.apply(x, torch.tensor([angle], dtype=torch.float64))[0, 0]
        ii, jj = torch.meshgrid(torch.arange(21.0), torch.arange(21.0), indexing="ij")
        m = out.sum()
        cy, cx = (out * ii).sum() / m - 10, (out * jj).sum() / m - 10
        a = math.radians(angle)
        assert abs(cx - 6 * math.cos(a)) < 0.05 and abs(cy + 6 * math.sin(a)) < 0.05
    angles = t.params(torch.zeros(2000, 1, 1, 1), gen(2))
    assert angles.min() >= -15 and angles.max() <= 15 and angles.min() < -14 and angles.max() > 14
    assert abs(angles.mean()) < 4 * 15 / math.sqrt(3 * 2000)


def test_rotation_of_uint8_rounds_back_and_fills_corners():
    x = torch.full((1, 1, 9, 9), 200, dtype=torch.uint8)
    out = RandomRotation((45, 45), fill=7.0)(x, gen())
    assert out.dtype == torch.uint8
    assert out[0, 0, 4, 4] == 200 and out[0, 0, 0, 0] == 7  # centre kept, corner from outside


# ------------------------------------------------------------------------------------------ resized crops
def test_random_resized_crop_boxes_follow_the_definition():
    H, W = 40, 60
    t = RandomResizedCrop(16, scale=(0.2, 0.9), ratio=(0.5, 2.0))
    boxes = t.params(torch.zeros(600, 1, H, W), gen(4))
    i, j, h, w = boxes.T.double()
    assert (i >= 0).all() and (j >= 0).all() and (i + h <= H).all() and (j + w <= W).all()
    # the rounding of w and h to integers moves the area by at most (w + h) / 2 + 1/4 pixels
    area = h * w
    slack = (w + h) / 2 + 0.25
    assert (area >= 0.2 * H * W - slack).all() and (area <= 0.9 * H * W + slack).all()
    ratio = w / h
    assert (ratio >= 0.5 * (1 - 1 / h) / (1 + 0.5 / h) - 1e-9).all()
    assert (ratio <= 2.0 * (1 + 0.5 / w) / (1 - 0.5 / h) + 1e-9).all()
    assert len(set(map(tuple, boxes.tolist()))) > 500  # per-sample boxes


def test_random_resized_crop_output_is_the_resized_box():
    x = torch.rand(5, 3, 30, 20)
    t = RandomResizedCrop((12, 10))
    params = t.params(x, gen(8))
    out = t.apply(x, params)
    for b, (i, j, h, w) in enumerate(params.tolist()):
        ref = F.interpolate(x[b : b + 1, :, i : i + h, j : j + w], size=(12, 10), mode="bilinear", antialias=True)
        torch.testing.assert_close(out[b : b + 1], ref, rtol=0, atol=0)


def test_random_resized_crop_full_box_and_fallback():
    x = torch.zeros(3, 1, 10, 10)
    full = RandomResizedCrop(10, scale=(1.0, 1.0), ratio=(1.0, 1.0)).params(x, gen())
    assert full.tolist() == [[0, 0, 10, 10]] * 3
    # ratio 2 cannot fit the whole square: every try fails, the central box w = 10, h = round(10 / 2) is used
    fb = RandomResizedCrop(10, scale=(1.0, 1.0), ratio=(2.0, 2.0)).params(x, gen())
    assert fb.tolist() == [[2, 0, 5, 10]] * 3


def test_resize_shorter_side_and_center_crop():
    x = torch.full((2, 3, 30, 45), 0.25)
    out = Resize(20)(x)
    assert out.shape == (2, 3, 20, 30)
    torch.testing.assert_close(out, torch.full_like(out, 0.25))  # antialiasing keeps constants
    assert Resize(20)(torch.zeros(1, 1, 45, 31)).shape == (1, 1, 29, 20)  # int(20 * 45 / 31) = 29
    z = torch.arange(63.0).view(1, 1, 7, 9)
    assert torch.equal(CenterCrop(3)(z), z[..., 2:5, 3:6])  # top round(2.0), left round(3.0)
    padded = CenterCrop((9, 9))(z)
    assert padded.shape == (1, 1, 9, 9) and (padded[..., 0, :] == 0).all() and torch.equal(padded[..., 1:8, :], z)
    u8 = torch.randint(0, 256, (1, 3, 16, 16), dtype=torch.uint8)
    assert resize_image(u8, (8, 8)).dtype == torch.uint8


def test_eval_transform_is_deterministic_and_normalises():
    x = torch.full((3, 40, 50), 255, dtype=torch.uint8)
    out = imagenet_eval_transform(16, 20)(x)
    assert out.shape == (3, 16, 16)
    expected = torch.tensor([(1 - 0.485) / 0.229, (1 - 0.456) / 0.224, (1 - 0.406) / 0.225])
    torch.testing.assert_close(out[:, 5, 5], expected)


def test_to_float_and_normalize_by_hand():
    x = torch.tensor([[[0, 51, 255]]], dtype=torch.uint8)
    f = ToFloat()(x)
    assert f.dtype == torch.float32 and torch.equal(f, torch.tensor([[[0.0, 0.2, 1.0]]]))
    assert ToFloat()(f) is f
    out = Normalize([0.5], [0.25])(f)
    torch.testing.assert_close(out, torch.tensor([[[-2.0, -1.2, 2.0]]]))
    with pytest.raises(TypeError, match="ToFloat first"):
        Normalize([0.5], [0.25])(x)
    with pytest.raises(ValueError, match="1 channel"):
        Normalize([0.5], [0.25])(torch.zeros(3, 2, 2))


# ------------------------------------------------------------------------------------------ erasing
def test_random_erasing_erases_one_box_of_the_drawn_size():
    B, H, W = 300, 20, 30
    x = torch.randn(B, 3, H, W)
    t = RandomErasing(1.0, scale=(0.05, 0.2), ratio=(0.5, 2.0), value=9.0)
    params = t.params(x, gen(6))
    out = t.apply(x, params)
    for b, (i, j, h, w, _) in enumerate(params):
        a = h * w
        assert 0.05 * H * W - (h + w) / 2 - 0.25 <= a <= 0.2 * H * W + (h + w) / 2 + 0.25
        assert 0 <= i and i + h <= H and 0 <= j and j + w <= W and h < H and w < W
        mask = torch.zeros(H, W, dtype=torch.bool)
        mask[i : i + h, j : j + w] = True
        assert (out[b][:, mask] == 9.0).all()
        assert torch.equal(out[b][:, ~mask], x[b][:, ~mask])


def test_random_erasing_pixel_noise_is_standard_normal_and_p_is_the_rate():
    x = torch.zeros(400, 3, 16, 16)
    out = RandomErasing(1.0, value="pixel")(x, gen(7))
    erased = out[out != 0]
    assert erased.numel() > 10000
    assert abs(erased.mean()) < 0.05 and abs(erased.std() - 1) < 0.05
    n = 4000
    hit = [p is not None for p in RandomErasing(0.25).params(torch.zeros(n, 1, 8, 8), gen(9))]
    assert abs(np.mean(hit) - 0.25) < 4 * math.sqrt(0.25 * 0.75 / n)
    assert torch.equal(RandomErasing(0.0)(x, gen()), x)
    with pytest.raises(TypeError, match="floating"):
        RandomErasing(1.0)(torch.zeros(1, 1, 8, 8, dtype=torch.uint8), gen())


# ------------------------------------------------------------------------------------------ determinism
def test_pipelines_are_deterministic_under_a_seed_and_random_per_sample():
    x = torch.randint(0, 256, (1, 3, 24, 24), dtype=torch.uint8).expand(16, 3, 24, 24).contiguous()  # one image
    pipes = [
        imagenet_train_transform(16, erasing=0.25),
        cifar_train_transform((0.5, 0.5, 0.5), (0.25, 0.25, 0.25), size=24, rotation=15),
    ]
    for t in pipes:
        a, b, c = t(x, gen(11)), t(x, gen(11)), t(x, gen(12))
        assert torch.equal(a, b) and not torch.equal(a, c)
        assert not any(torch.equal(a[0], a[k]) for k in range(1, 16))  # 16 copies, 16 different draws
    g = item_generator(0, 0, 5)
    assert torch.equal(torch.rand(4, generator=g), torch.rand(4, generator=item_generator(0, 0, 5)))
    assert not torch.equal(
        torch.rand(4, generator=item_generator(0, 0, 6)), torch.rand(4, generator=item_generator(0, 0, 5))
    )
    assert not torch.equal(
        torch.rand(4, generator=item_generator(0, 1, 5)), torch.rand(4, generator=item_generator(0, 0, 5))
    )


def test_params_depend_on_the_generator_only():
    t = Compose([RandomCrop(8, padding=2), RandomHorizontalFlip()])
    a = torch.randn(6, 3, 8, 8)
    b = a.double() * 3
    crop = t.transforms[0]
    assert torch.equal(crop.params(a, gen(3)), crop.params(b, gen(3)))


# ------------------------------------------------------------------------------------------ mixup / cutmix
def test_mixup_mixes_with_the_reversed_batch_and_targets_follow():
    K, B = 4, 6
    x = torch.randn(B, 2, 3, 3)
    y = torch.tensor([0, 1, 2, 3, 1, 2])
    mix = MixupCutmix(K, label_smoothing=0.0)
    out, T = mix.apply(x, y, [(0.3, None)] * B)
    torch.testing.assert_close(out, 0.3 * x + 0.7 * x.flip(0))
    ref = 0.3 * F.one_hot(y, K).float() + 0.7 * F.one_hot(y.flip(0), K).float()
    torch.testing.assert_close(T, ref)
    # how a loss consumes it: soft cross-entropy = lam CE(y) + (1 - lam) CE(y reversed)
    logits = torch.randn(B, K)
    expected = 0.3 * F.cross_entropy(logits, y) + 0.7 * F.cross_entropy(logits, y.flip(0))
    torch.testing.assert_close(F.cross_entropy(logits, T), expected)


def test_cutmix_pastes_the_box_and_lam_is_the_kept_fraction():
    K, B, H, W = 3, 4, 10, 12
    x = torch.randn(B, 1, H, W)
    y = torch.tensor([0, 1, 2, 0])
    mix = MixupCutmix(K, mixup_alpha=0.0, cutmix_alpha=1.0, label_smoothing=0.1)
    for seed in range(20):
        params = mix.params(x, gen(seed))
        lam, box = params[0]
        assert all(p == params[0] for p in params)  # batch mode: one box for all
        y0, y1, x0, x1 = box
        assert 0 <= y0 <= y1 <= H and 0 <= x0 <= x1 <= W
        assert lam == pytest.approx(1 - (y1 - y0) * (x1 - x0) / (H * W))
        out, T = mix.apply(x, y, params)
        inside = torch.zeros(H, W, dtype=torch.bool)
        inside[y0:y1, x0:x1] = True
        assert torch.equal(out[:, :, inside], x.flip(0)[:, :, inside])
        assert torch.equal(out[:, :, ~inside], x[:, :, ~inside])
        s = smooth_one_hot(y, K, 0.1)
        torch.testing.assert_close(T, lam * s + (1 - lam) * s.flip(0))
        torch.testing.assert_close(T.sum(1), torch.ones(B))
    torch.testing.assert_close(smooth_one_hot(torch.tensor([1]), 4, 0.2), torch.tensor([[0.05, 0.85, 0.05, 0.05]]))


def test_mixup_lambda_is_beta_and_switch_prob_is_the_cutmix_rate():
    x = torch.zeros(2, 1, 4, 4)
    mix = MixupCutmix(2, mixup_alpha=1.0, cutmix_alpha=0.0)
    lams = np.array([mix.params(x, gen(s))[0][0] for s in range(3000)])
    assert abs(lams.mean() - 0.5) < 4 * math.sqrt(1 / 12 / 3000)  # Beta(1, 1) = U(0, 1)
    assert abs(lams.var() - 1 / 12) < 0.01
    both = MixupCutmix(2, switch_prob=0.5)
    cut = np.mean([both.params(x, gen(s))[0][1] is not None for s in range(3000)])
    assert abs(cut - 0.5) < 4 * math.sqrt(0.25 / 3000)
    off = MixupCutmix(2, prob=0.0, label_smoothing=0.0)
    out, T = off(x, torch.tensor([0, 1]), gen())
    assert torch.equal(out, x) and T.tolist() == [[1.0, 0.0], [0.0, 1.0]]


def test_mixup_elem_mode_draws_per_sample_and_is_seeded():
    x, y = torch.randn(8, 1, 4, 4), torch.arange(8) % 3
    mix = MixupCutmix(3, mode="elem")
    p = mix.params(x, gen(1))
    assert len({lam for lam, _ in p}) > 1
    a, b = mix(x, y, gen(1)), mix(x, y, gen(1))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    with pytest.raises(TypeError, match="floating"):
        mix(x.to(torch.uint8), y, gen())


# ------------------------------------------------------------------------------------------ drop path
def test_drop_path_zeroes_whole_samples_and_keeps_the_expectation():
    x = torch.ones(20000, 3)
    out = drop_path(x, 0.2, generator=gen(2))
    kept = out[:, 0] != 0
    assert torch.equal(out[kept], torch.full_like(out[kept], 1 / 0.8))
    assert (out[~kept] == 0).all()
    assert abs((~kept).float().mean() - 0.2) < 4 * math.sqrt(0.16 / 20000)
    assert abs(out.mean() - 1.0) < 0.02
    assert drop_path(x, 0.2, training=False) is x
    m = DropPath(0.5).eval()
    assert m(x) is x
    with pytest.raises(ValueError, match="0, 1"):
        drop_path(x, 1.0)


# ------------------------------------------------------------------------------------------ on a GPU
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_transforms_on_cuda_match_the_cpu_with_the_same_generator():
    from nclab.data.autoaugment import AutoAugment

    x8 = torch.randint(0, 256, (64, 3, 24, 24), dtype=torch.uint8)
    xf = torch.randn(64, 3, 24, 24)
    exact = [
        (RandomCrop(20, padding=4), x8),
        (RandomHorizontalFlip(), x8),
        (RandomRotation(15), x8),  # nearest: the same source pixel unless a point sits within float error of an edge
        (AutoAugment(), x8),
        (RandomErasing(1.0, value=0.0), xf),
        (Normalize([0.5] * 3, [0.25] * 3), xf),
    ]
    for t, x in exact:
        cpu = t(x, gen(3))
        gpu = t(x.cuda(), gen(3))
        assert gpu.is_cuda
        mismatch = (gpu.cpu().float() - cpu.float()).abs()
        assert mismatch.max() <= 1e-5 or (mismatch > 0).float().mean() < 1e-3, (t, mismatch.max())
    out = RandomResizedCrop(16)(x8.cuda(), gen(4))
    torch.testing.assert_close(out.cpu().float(), RandomResizedCrop(16)(x8, gen(4)).float(), atol=1, rtol=0)
    xm, T = MixupCutmix(10)(xf.cuda(), torch.arange(64).cuda() % 10, gen(5))
    assert xm.is_cuda and T.is_cuda
    # a generator on the GPU draws its parameters there
    g = torch.Generator(device="cuda").manual_seed(0)
    assert RandomCrop(20, padding=4)(x8.cuda(), g).is_cuda
    assert drop_path(xf.cuda(), 0.3, generator=g).is_cuda
