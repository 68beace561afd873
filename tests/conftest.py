import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def brute_stats(H, y, K):
    """Exact two-pass float64 reference: means, Sigma_W, Sigma_B (balanced / empirical), Sigma_T."""
    H = np.asarray(H, dtype=np.float64)
    N = H.shape[0]
    means = np.stack([H[y == k].mean(axis=0) for k in range(K)])
    D = H - means[y]
    sw = D.T @ D / N
    counts = np.bincount(y, minlength=K)
    mg_bal = means.mean(axis=0)
    mg_emp = H.mean(axis=0)
    Mb = means - mg_bal
    Me = means - mg_emp
    sb_bal = Mb.T @ Mb / K
    sb_emp = (Me * (counts / N)[:, None]).T @ Me
    T = H - mg_emp
    st = T.T @ T / N
    ss = np.array([((H[y == k] - means[k]) ** 2).sum() for k in range(K)])
    return dict(means=means, sw=sw, sb_bal=sb_bal, sb_emp=sb_emp, st=st, counts=counts, ss=ss)
