"""Features on disk: export a model's penultimate features with nclab.extract_features, then measure them with
``nclab measure`` (what you would do for features of a model trained elsewhere, or too large to keep in memory).

``extract_features`` streams one batch at a time to memory-mapped ``.npy`` files (features, labels, and the
classifier ``W``, ``b`` it found); ``nclab measure`` streams them back. Checks: the exported files have the
expected shapes, and every metric ``nclab measure`` reports equals the one ``CollapseMonitor.measure`` computes
on the live model (same float32 features, float64 accumulation; 1e-9 relative).

    python examples/measure_saved_features.py [OUT_DIR]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from nclab import CollapseMonitor, extract_features
from nclab.data import load


def main(out: Path) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)  # tiny matrices: more threads only wait on each other
    train = load("digits", "train", per_class=30)
    loader = DataLoader(TensorDataset(train.x.flatten(1), train.y), batch_size=64)
    model = nn.Sequential(nn.Linear(64, 48), nn.ReLU(), nn.Linear(48, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(30):
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

    paths = extract_features(model, loader, out=out, K=10)
    h = np.load(paths["penultimate"], mmap_mode="r")  # read lazily from disk, never whole
    assert h.shape == (len(train.y), 32) and h.dtype == np.float32
    assert np.load(paths["W"]).shape == (10, 32)
    cmd = [sys.executable, "-m", "nclab", "measure", str(paths["penultimate"]), str(paths["labels"])]
    cmd += ["-w", str(paths["W"]), "-b", str(paths["b"]), "-f", "json"]
    saved = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)

    live = CollapseMonitor(model, 10).measure(loader).reports["penultimate"]
    shared = sorted(set(saved) & set(live))
    assert {"nc1", "self_duality", "ncc_mismatch", "ncc_accuracy"} <= set(shared), shared
    for key in shared:
        a, b = saved[key], live[key]
        assert (np.isnan(a) and np.isnan(b)) or abs(a - b) <= 1e-9 * max(abs(b), 1e-12), (key, a, b)
    print(f"{len(shared)} metrics agree, e.g. NC1 {live['nc1']:.4g}, NC3 self_duality {live['self_duality']:.4g}")
    print("measure_saved_features: ok")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="nclab-features-")))
