"""Joint gradient descent on (W, b, H) of the unconstrained-features MSE, logging the [Han et al. 2022] decomposition.

An extension suggested by [Han et al. 2022] (not in the paper): when does the central-path approximation
``L_perp << L_LS`` hold along plain joint training? Objective (rows ``H (N, d)``, class-major balanced labels):

    J = (1/(2n)) ||H W^T + 1 b^T - Y||_F^2 + (lam/2)(||W||_F^2 + ||b||^2) + (lam_H/(2n)) ||H||_F^2,

the first two terms being the [Han et al. 2022] L (``lam`` is its lambda) and the last a per-sample feature penalty. W
and
b take steps ``lr``; each feature row takes ``lr * N`` (its gradient carries a 1/N, so a common step would freeze
the features). Every ``record_every`` steps the decomposition of L (with the same ``lam``) is logged.

The [Han et al. 2022] C (classes), N (samples per class) and P (dimension) are K, n and d here; N = K n rows in total.
"""

from __future__ import annotations

import numpy as np

from nclab.theory.central_path import class_major_labels
from nclab.theory.mse import mse_decomposition
from nclab.validation import check_int

__all__ = ["joint_gd"]


def joint_gd(
    K: int,
    n: int,
    d: int,
    steps: int,
    *,
    lr: float = 0.1,
    lam: float = 1e-3,
    lam_H: float = 1e-3,
    init_scale: float = 1.0,
    record_every: int = 10,
    seed: int = 0,
) -> list[dict[str, float]]:
    """Run full-batch joint GD from a Gaussian init; returns rows ``{"step", "train_error", "J", *decomposition}``."""
    check_int(steps, name="steps", low=1)
    check_int(record_every, name="record_every", low=1)
    rng = np.random.default_rng(seed)
    y = class_major_labels(K, n)
    N = K * n
    Y = np.eye(K)[y]
    H = init_scale * rng.normal(size=(N, d))
    W = init_scale * rng.normal(size=(K, d)) / np.sqrt(d)
    b = np.zeros(K)
    rows = []
    for step in range(steps + 1):
        R = H @ W.T + b - Y
        if step % record_every == 0 or step == steps:
            dec = mse_decomposition(H, y, W, b, lam)
            J = dec["L"] + 0.5 * lam_H * float(np.sum(H * H)) / N
            err = float(np.mean(np.argmax(H @ W.T + b, axis=1) != y))
            rows.append({"step": float(step), "train_error": err, "J": J, **dec})
        if step == steps:
            break
        gW = R.T @ H / N + lam * W
        gb = R.mean(axis=0) + lam * b
        gH = R @ W / N + lam_H * H / N
        W -= lr * gW
        b -= lr * gb
        H -= lr * N * gH
    return rows
