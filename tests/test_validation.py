"""nclab.validation: accepted inputs, messages that name the argument, Literal choices, zero-row policies."""

from typing import Literal

import numpy as np
import pytest
import torch

from nclab.validation import (
    as_rows,
    check_choice,
    check_features,
    check_finite,
    check_int,
    check_labels,
    check_positive,
    unit_rows,
)


# ---------------------------------------------------------------------------------------------- arrays
def test_as_rows_accepts_lists_numpy_and_torch():
    ref = np.array([[1.0, 2.0], [3.0, 4.0]])
    for X in (ref.tolist(), ref.astype(np.float32), torch.tensor(ref, requires_grad=True)):
        A = as_rows(X, name="W")
        assert A.dtype == np.float64
        np.testing.assert_array_equal(A, ref)
    src = ref.copy()
    as_rows(src, name="W")[0, 0] = 99.0  # a copy: the caller's array is untouched
    assert src[0, 0] == 1.0


@pytest.mark.parametrize(
    "X,kwargs,message",
    [
        (np.ones(3), {}, r"Wq must be 2-D .* got shape \(3,\)"),
        (np.ones((1, 3)), {}, "Wq needs at least 2 rows, got 1"),
        (np.ones((2, 0)), {}, "Wq needs at least one column"),
        ([[1.0, np.nan], [0.0, 1.0]], {}, "Wq contains NaN or inf"),
        ([[1.0, np.inf], [0.0, 1.0]], {}, "Wq contains NaN or inf"),
    ],
)
def test_as_rows_errors_name_the_argument(X, kwargs, message):
    with pytest.raises(ValueError, match=message):
        as_rows(X, name="Wq", **kwargs)


def test_check_features_rows_and_dim():
    H = check_features(torch.ones(1, 4), name="feats", d=4)
    assert H.shape == (1, 4)  # one sample is enough
    with pytest.raises(ValueError, match="feats has dimension 4, expected d = 3"):
        check_features(np.ones((5, 4)), name="feats", d=3)
    with pytest.raises(ValueError, match="feats needs at least 1 rows"):
        check_features(np.ones((0, 4)), name="feats")


def test_check_finite_any_shape():
    assert check_finite(3, name="x").shape == ()
    np.testing.assert_array_equal(check_finite(torch.arange(3), name="x"), [0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="bias contains NaN or inf"):
        check_finite([0.0, float("nan")], name="bias")


# ---------------------------------------------------------------------------------------------- labels
def test_check_labels_accepts_integer_arrays_and_tensors():
    for y in ([0, 2, 1], np.array([0, 2, 1], dtype=np.uint8), torch.tensor([0, 2, 1])):
        out = check_labels(y, K=3, name="targets")
        assert out.dtype == np.int64 and out.tolist() == [0, 2, 1]
    assert check_labels([5, 0], K=None).tolist() == [5, 0]  # K unknown: only y >= 0
    assert check_labels(np.array([], dtype=np.int64), K=3).size == 0


def test_check_labels_messages():
    with pytest.raises(TypeError, match=r"targets must have an integer dtype .* float64"):
        check_labels([0.0, 1.0], K=2, name="targets")
    with pytest.raises(TypeError, match=r"targets must have an integer dtype .* bool"):
        check_labels(np.array([True, False]), K=2, name="targets")
    with pytest.raises(ValueError, match=r"targets must be 1-D .* \(2, 2\)"):
        check_labels(np.zeros((2, 2), dtype=int), K=2, name="targets")
    with pytest.raises(ValueError, match="targets must have one label per row: 3 rows, got 2 labels"):
        check_labels([0, 1], K=2, name="targets", num_rows=3)
    with pytest.raises(ValueError, match=r"targets: label 3 is out of range \[0, 3\)"):
        check_labels([0, 3, 1], K=3, name="targets")
    with pytest.raises(ValueError, match=r"targets: label -2 is out of range \[0, 3\)"):
        check_labels([0, -2], K=3, name="targets")


@pytest.mark.parametrize("sentinel", [-100, -1])
def test_check_labels_names_the_ignore_index(sentinel):
    y = torch.tensor([0, sentinel, 1, sentinel])
    with pytest.raises(ValueError, match=rf"y contains 2 label\(s\) {sentinel}, an ignore-index sentinel"):
        check_labels(y, K=2)


# ---------------------------------------------------------------------------------------------- scalars
Mode = Literal["fast", "exact"]


def test_check_choice_literal_and_iterable():
    assert check_choice("exact", Mode, name="mode") == "exact"
    assert check_choice(2, (1, 2), name="exponent") == 2
    with pytest.raises(ValueError, match=r"mode must be one of 'fast', 'exact', got 'slow'"):
        check_choice("slow", Mode, name="mode")
    with pytest.raises(ValueError, match="flag must be one of 1, 2, got True"):
        check_choice(True, (1, 2), name="flag")  # a bool is not the int 1
    with pytest.raises(ValueError, match="mode must be one of"):
        check_choice(np.array([1, 2]), Mode, name="mode")  # no ambiguous truth value


def test_check_int():
    assert check_int(np.int32(4), name="K", low=2) == 4
    assert type(check_int(np.int64(4), name="K")) is int
    assert check_int(5, name="k", low=1, high=5) == 5
    with pytest.raises(TypeError, match=r"K must be an int, got 3.0 \(float\)"):
        check_int(3.0, name="K")
    with pytest.raises(TypeError, match="K must be an int, got True"):
        check_int(True, name="K")
    with pytest.raises(ValueError, match="K must be an int >= 2, got 1"):
        check_int(1, name="K", low=2)
    with pytest.raises(ValueError, match="k must be an int <= 5, got 6"):
        check_int(6, name="k", high=5)
    with pytest.raises(ValueError, match=r"k must be an int in \[1, 5\], got 0"):
        check_int(0, name="k", low=1, high=5)


def test_check_positive():
    assert check_positive(np.float32(0.5), name="lr") == 0.5
    assert check_positive(0, name="lam", strict=False) == 0.0
    with pytest.raises(ValueError, match="lr must be a finite number > 0, got 0"):
        check_positive(0, name="lr")
    with pytest.raises(ValueError, match="lam must be a finite number >= 0, got -1"):
        check_positive(-1, name="lam", strict=False)
    with pytest.raises(ValueError, match="lr must be a finite number > 0, got nan"):
        check_positive(float("nan"), name="lr")
    with pytest.raises(TypeError, match="lr must be a number, got '1'"):
        check_positive("1", name="lr")
    with pytest.raises(TypeError, match="lr must be a number, got True"):
        check_positive(True, name="lr")


# ---------------------------------------------------------------------------------------------- unit rows
X = np.array([[3.0, 4.0], [0.0, 0.0], [0.0, -2.0]])


def test_unit_rows_policies():
    keep = unit_rows(X, zero="keep")
    np.testing.assert_allclose(keep, [[0.6, 0.8], [0.0, 0.0], [0.0, -1.0]], rtol=0, atol=0)
    nan = unit_rows(X, zero="nan")
    assert np.all(np.isnan(nan[1])) and np.array_equal(nan[[0, 2]], keep[[0, 2]])
    with pytest.raises(ValueError, match=r"codes has 1 zero row\(s\) \(1\): a zero row has no direction"):
        unit_rows(X, zero="raise", name="codes")
    with pytest.raises(ValueError, match="zero must be one of 'raise', 'keep', 'nan', got 'skip'"):
        unit_rows(X, zero="skip")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        unit_rows(X)  # type: ignore[call-arg]  # no default policy: every caller states one


def test_unit_rows_atol_and_last_axis():
    tiny = np.array([[1e-20, 0.0], [1.0, 1.0]])
    assert np.isnan(unit_rows(tiny, zero="nan", atol=1e-12)[0]).all()
    np.testing.assert_allclose(unit_rows(tiny, zero="nan")[0], [1.0, 0.0])  # atol = 0: only exact zeros
    batch = np.stack([X, 2 * X])  # (2, 3, 2): every vector along the last axis
    np.testing.assert_allclose(unit_rows(batch, zero="keep")[1], unit_rows(X, zero="keep"))
    norms = np.linalg.norm(unit_rows(np.random.default_rng(0).normal(size=(50, 7)), zero="raise"), axis=1)
    np.testing.assert_allclose(norms, 1.0, rtol=1e-15)


def test_unit_rows_torch_keeps_kind_dtype_and_gradient():
    T = torch.tensor(X, dtype=torch.float16)
    out = unit_rows(T, zero="keep")
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float16
    np.testing.assert_allclose(out.double().numpy(), unit_rows(X, zero="keep"), atol=1e-3)
    assert torch.isnan(unit_rows(torch.tensor(X), zero="nan")[1]).all()
    with pytest.raises(ValueError, match=r"H has 1 zero row\(s\) \(1\)"):
        unit_rows(torch.tensor(X), zero="raise", name="H")
    v = torch.tensor([[3.0, 4.0]], dtype=torch.float64, requires_grad=True)
    unit_rows(v, zero="raise")[0, 0].backward()
    # d(x/||x||)_0 / dx = (e_0 - u_0 u) / ||x|| = ([1, 0] - 0.6 [0.6, 0.8]) / 5
    np.testing.assert_allclose(v.grad.numpy(), [[0.64 / 5, -0.48 / 5]], rtol=1e-14)
