#!/usr/bin/env bash
# The package as a user gets it: build the wheel, install it into a fresh virtual environment, and run the command
# and a small measurement from a folder outside the source tree (so that nothing is imported from src/).
# Usage: .ci/wheel_check.sh [PYTHON]   (default .venv/bin/python; it needs the `build` package: pip install --group dev)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

"$PY" -m build --wheel --outdir "$WORK/dist" . >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
WHEEL=$(ls "$WORK"/dist/nclab-*.whl)
echo "built $(basename "$WHEEL")"

"$PY" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
# the CPU build of torch first (as the Makefile does): plain `torch` would pull GBs of CUDA packages
"$VPY" -m pip install -q torch==2.13.0
"$VPY" -m pip install -q "$WHEEL"

cd "$WORK"
WANT="nclab $(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$OLDPWD/src/nclab/__init__.py")"
GOT=$("$WORK/venv/bin/nclab" --version)
[ "$GOT" = "$WANT" ] || { echo "error: nclab --version printed '$GOT', expected '$WANT'" >&2; exit 1; }
echo "$GOT"

"$VPY" - "$WHEEL" <<'PYCODE'
import importlib.resources
import sys
import zipfile

import numpy as np

import nclab
from nclab import ClassStats
from nclab.metrics import nc1

# the installed copy, not the source tree
assert "site-packages" in nclab.__file__, nclab.__file__
assert importlib.resources.files("nclab").joinpath("py.typed").is_file(), "py.typed is not installed"

# metadata: license, and a long description whose images and links work on a package index
with zipfile.ZipFile(sys.argv[1]) as wheel:
    meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    text = wheel.read(meta).decode()
    assert "License-Expression: MIT" in text, "no License-Expression"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in wheel.namelist()), "LICENSE not in the wheel"
    assert 'src="docs/' not in text and "](docs/" not in text, "relative links in the long description"
    # publishable: no placeholder address, no development tool among the requirements or extras
    assert "Project-URL" not in text, "project URLs in the metadata (no public home is registered)"
    assert "Provides-Extra: dev" not in text and "Provides-Extra: docs" not in text, "a dev/docs extra is published"
    for tool in ("pytest", "ruff", "mypy", "build", "sphinx", "hypothesis"):
        assert f"Requires-Dist: {tool}" not in text, f"the development tool {tool} is in the metadata"
    # the package ships no code that runs git (the reproductions page generator lives in scripts/)
    for name in wheel.namelist():
        if name.endswith(".py"):
            source = wheel.read(name).decode()
            assert not ("subprocess" in source and '"git"' in source), f"{name} runs git"

# a tiny measurement against a brute-force NC1 = tr(Sigma_W Sigma_B^+) / K
rng = np.random.default_rng(0)
K, n, d = 4, 50, 8
y = np.repeat(np.arange(K), n)
H = 3 * rng.normal(size=(K, d))[y] + rng.normal(size=(K * n, d))
stats = ClassStats(K, d)
stats.update(H, y)
mu = np.stack([H[y == k].mean(axis=0) for k in range(K)])
centred, M = H - mu[y], mu - mu.mean(axis=0)
reference = np.trace(centred.T @ centred / len(H) @ np.linalg.pinv(M.T @ M / K)) / K
assert abs(nc1(stats) - reference) <= 1e-10 * reference, (nc1(stats), reference)
print(f"nc1 {nc1(stats):.6f} (brute force {reference:.6f}) from {nclab.__file__}")
PYCODE
echo "wheel check: ok"
