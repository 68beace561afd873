"""NCCAccumulator(index="hnsw"): the approximate nearest-centre search (optional extra nclab[ann]) against the
exact pass, the missing-extra error, and the refusal to combine exact and approximate passes."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch.multiprocessing as mp

from nclab.metrics.ncc import ncc_metrics
from nclab.stats import ClassStats, NCCAccumulator
from tests._distributed import free_port, gloo_group

try:
    import faiss  # noqa: F401

    HAVE_FAISS = True
except ImportError:
    HAVE_FAISS = False
needs_faiss = pytest.mark.skipif(not HAVE_FAISS, reason="needs the optional extra nclab[ann] (faiss-cpu)")


def _many_classes(K: int = 2000, d: int = 64, n: int = 2, noise: float = 0.35, seed: int = 0):
    """K random means N(0, I_d) (near-equidistant, as at collapse), n samples per class at ``noise`` per axis."""
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(K, d))
    y = np.repeat(np.arange(K), n)
    H = means[y] + noise * rng.normal(size=(K * n, d))
    return means, H, y, rng


def _brute_force(H: np.ndarray, means: np.ndarray) -> np.ndarray:
    return np.argmin(((H[:, None, :] - means[None, :, :]) ** 2).sum(-1), axis=1)


def test_exact_is_the_default_and_matches_brute_force(rng):
    means = rng.normal(size=(50, 8))
    y = rng.integers(0, 50, 600)
    H = means[y] + 0.8 * rng.normal(size=(600, 8))
    default = NCCAccumulator.from_means(means)
    assert default.index == "exact"
    explicit = NCCAccumulator.from_means(means, index="exact")
    np.testing.assert_array_equal(default.ncc_predict(H).numpy(), _brute_force(H, means))
    np.testing.assert_array_equal(explicit.ncc_predict(H).numpy(), _brute_force(H, means))
    out = default.update(H, y).compute()
    assert out["ncc_index"] == "exact"
    assert out["ncc_accuracy"] == np.mean(_brute_force(H, means) == y)


def test_index_is_validated_by_name():
    with pytest.raises(ValueError, match="index must be one of 'exact', 'hnsw', got 'faiss'"):
        NCCAccumulator.from_means(np.eye(3), index="faiss")


def test_missing_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss now raises ImportError
    with pytest.raises(ImportError, match=r"nclab\[ann\]"):
        NCCAccumulator.from_means(np.eye(3), index="hnsw")
    with pytest.raises(ImportError, match=r"nclab\[ann\]"):
        ncc_metrics(ClassStats.from_arrays(np.eye(3), np.arange(3)), np.eye(3), np.arange(3), index="hnsw")
    NCCAccumulator.from_means(np.eye(3))  # the exact pass never needs it


def test_nclab_imports_without_faiss():
    code = (
        "import sys; sys.modules['faiss'] = None\n"
        "import numpy as np, nclab, nclab.stats, nclab.metrics\n"
        "acc = nclab.stats.NCCAccumulator.from_means(np.eye(3)).update(np.eye(3), np.arange(3))\n"
        "print(acc.compute()['ncc_accuracy'])"
    )
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "1.0"


@needs_faiss
def test_hnsw_agrees_with_exact_at_many_classes():
    # K = 2,000, d = 64, N = 4,000: measured 100% equal predictions (also at N = 10,000); at efConstruction = 80
    # three classes were unreachable in the graph (99.86% agreement before they were re-scored for every sample)
    means, H, y, rng = _many_classes()
    W, b = rng.normal(size=means.shape), rng.normal(size=len(means))
    exact = NCCAccumulator.from_means(means, W=W, b=b)
    approx = NCCAccumulator.from_means(means, W=W, b=b, index="hnsw")
    pe, pa = exact.ncc_predict(H).numpy(), approx.ncc_predict(H).numpy()
    assert np.mean(pe == pa) >= 0.999
    ea, aa = exact.update(H, y).compute(), approx.update(H, y).compute()
    assert aa["ncc_index"] == "hnsw" and ea["ncc_index"] == "exact"
    assert abs(aa["ncc_accuracy"] - ea["ncc_accuracy"]) <= 1e-3
    assert abs(aa["ncc_mismatch"] - ea["ncc_mismatch"]) <= 1e-3
    # the classifier part is exact in both
    assert aa["classifier_accuracy"] == ea["classifier_accuracy"]
    assert aa["ncc_mismatch_nobias"] == pytest.approx(np.mean(np.argmax(H @ W.T, axis=1) != pa), abs=0)


@needs_faiss
def test_hnsw_ties_go_to_lowest_index():
    # classes 0 and 1 share a mean: the graph returns only one of them, the other is re-scored for every sample
    H = np.array([[1.0, 0], [1.0, 0], [1.0, 0], [1.0, 0], [-1.0, 0], [-1.0, 0]])
    y = np.array([0, 0, 1, 1, 2, 2])
    acc = NCCAccumulator(ClassStats.from_arrays(H, y), index="hnsw").update(H, y)
    np.testing.assert_array_equal(acc.ncc_predict(H).numpy(), [0, 0, 0, 0, 2, 2])
    assert acc.compute()["ncc_accuracy"] == pytest.approx(4 / 6)


@needs_faiss
def test_exact_and_hnsw_passes_refuse_to_merge_and_save_their_index(tmp_path):
    means, H, y, _ = _many_classes(K=40, d=6, n=5)
    exact = NCCAccumulator.from_means(means).update(H, y)
    approx = NCCAccumulator.from_means(means, index="hnsw").update(H, y)
    with pytest.raises(ValueError, match="index='hnsw' vs index='exact'"):
        approx.merge(exact)
    with pytest.raises(ValueError, match="index='exact' vs index='hnsw'"):
        exact.merge(approx)
    back = NCCAccumulator.load(approx.save(tmp_path / "ncc.npz"))
    assert back.index == "hnsw"
    np.testing.assert_array_equal(back.ncc_predict(H).numpy(), approx.ncc_predict(H).numpy())
    with pytest.raises(ValueError, match="index='exact'"):
        exact.load_state_dict(approx.state_dict())


def test_state_saved_before_the_index_option_loads_as_exact(tmp_path):
    means, H, y, _ = _many_classes(K=5, d=3, n=4)
    acc = NCCAccumulator.from_means(means).update(H, y)
    sd = acc.state_dict()
    del sd["index"]
    fresh = NCCAccumulator.from_means(means).load_state_dict(sd)
    np.testing.assert_array_equal(fresh.per_class()["ncc_correct"], acc.per_class()["ncc_correct"])


def test_state_with_more_correct_than_samples_in_a_class_is_rejected():
    means, H, y, _ = _many_classes(K=5, d=3, n=4)
    acc = NCCAccumulator.from_means(means).update(H, y)
    sd = acc.state_dict()
    sd["state"] = dict(sd["state"])
    correct = sd["state"]["ncc_correct"].copy()
    correct[2] = sd["state"]["class_counts"][2] + 1  # 5 correct of 4 samples
    sd["state"]["ncc_correct"] = correct
    with pytest.raises(ValueError, match="class 2 has ncc_correct 5 > class_counts 4"):
        NCCAccumulator.from_means(means).load_state_dict(sd)


def _mixed_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    means, H, y, _ = _many_classes(K=6, d=3, n=4)
    with gloo_group(rank, world, port):
        acc = NCCAccumulator.from_means(means, index="exact" if rank == 0 else "hnsw").update(H, y)
        try:
            acc.all_reduce()
            msg = "no error"
        except ValueError as err:
            msg = str(err)
        # the counts are untouched by the refused reduction
        msg += f"|{acc.N}"
        with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as fh:
            fh.write(msg)


@needs_faiss
@pytest.mark.distributed
def test_all_reduce_refuses_ranks_with_different_indexes(tmp_path):
    mp.spawn(_mixed_worker, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)
    for rank in range(2):
        msg, n = (tmp_path / f"rank{rank}.txt").read_text().split("|")
        assert "the ranks disagree on index (index='exact' on rank 0; index='hnsw' on rank 1)" in msg
        assert int(n) == 24
