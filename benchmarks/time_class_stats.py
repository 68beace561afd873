"""Seconds for one full-track ClassStats pass (N = 100,000, d = 512, K = 100, float32 batches of 1,000; best of 3).

A minimal, version-independent timing for paired A/B runs against another commit (the ClassStats constructor and
``update``/``sigma_w`` are all it uses), e.g. with a worktree of the other commit at /tmp/base::

    for i in 1 2 3 4 5; do
        PYTHONPATH=src python benchmarks/time_class_stats.py
        PYTHONPATH=/tmp/base/src python benchmarks/time_class_stats.py
    done
"""

import sys
import time

import numpy as np
import torch

from _native import kernels_line, native_blas
from nclab.stats import ClassStats

native_blas()
print(kernels_line(), file=sys.stderr)  # stdout: the one number
rng = np.random.default_rng(0)
N, d, K, B = 100_000, 512, 100, 1000
X = torch.from_numpy(rng.standard_normal((N, d), dtype=np.float32))
y = torch.from_numpy(rng.integers(0, K, N))
best = float("inf")
for _ in range(3):
    t = time.perf_counter()
    stats = ClassStats(K, d)
    for i in range(0, N, B):
        stats.update(X[i : i + B], y[i : i + B])
    stats.sigma_w()
    best = min(best, time.perf_counter() - t)
print(f"{best:.4f}")
