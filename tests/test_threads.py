"""Thread-count contexts (nclab._threads): limits apply inside the block and are restored after, also nested."""

from __future__ import annotations

import pytest

threadpoolctl = pytest.importorskip("threadpoolctl")

from nclab._threads import blas_threads  # noqa: E402


def _blas_limits() -> list[int]:
    import scipy.linalg  # noqa: F401  -- scipy's own OpenBLAS is one of the libraries limited

    return sorted(info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas")


def test_blas_threads_nested_same_limit_is_a_no_op_and_restores_the_outer_state():
    outer = _blas_limits()
    with blas_threads(1):
        assert set(_blas_limits()) == {1}
        with blas_threads(1):  # the measurement inside a training run: nothing to change
            assert set(_blas_limits()) == {1}
        assert set(_blas_limits()) == {1}  # the inner block did not restore the outer limits early
        with blas_threads(2):
            assert set(_blas_limits()) == {2}
        assert set(_blas_limits()) == {1}
    assert _blas_limits() == outer


def test_scipy_blas_threads_limits_scipys_own_pool_only_and_restores_it():
    from nclab._threads import scipy_blas_threads

    def by_package() -> dict[str, list[int]]:
        import scipy.linalg  # noqa: F401

        out: dict[str, list[int]] = {"numpy": [], "scipy": []}
        for info in threadpoolctl.threadpool_info():
            if info["user_api"] == "blas":
                for pkg in out:
                    if f"{pkg}.libs" in info["filepath"] or f"/{pkg}/" in info["filepath"]:
                        out[pkg].append(info["num_threads"])
        return out

    before = by_package()
    if not before["scipy"] or not before["numpy"]:
        pytest.skip("numpy and scipy do not each bundle their own BLAS here (one shared library: nothing to limit)")
    with blas_threads(2):
        with scipy_blas_threads(1):
            inside = by_package()
            assert set(inside["scipy"]) == {1}
            assert set(inside["numpy"]) == {2}  # numpy's pool, which runs the loss's products, keeps its threads
        assert set(by_package()["scipy"]) == {2}
    assert by_package() == before
