"""The scripts in examples/ run to completion (each asserts its own results and prints ``NAME: ok``); those of a
framework are skipped, naming the extra, when it is not installed."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SRC = Path(__file__).resolve().parents[1] / "src"

#: example -> (packages it needs, the extra that installs them)
NEEDS = {
    "own_loop": ((), None),
    "measure_saved_features": ((), None),
    "lightning_digits": (("lightning",), "lightning"),
    "hf_text": (("transformers", "accelerate"), "hf"),
    "lm_tokens": (("transformers", "tokenizers"), "hf"),
}


def test_every_example_is_listed():
    assert sorted(p.stem for p in EXAMPLES.glob("*.py")) == sorted(NEEDS)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NEEDS))
def test_example_runs(name, tmp_path):
    packages, extra = NEEDS[name]
    missing = [p for p in packages if find_spec(p) is None]
    if missing:
        pytest.skip(f"{name} needs {', '.join(missing)} (pip install nclab[{extra}])")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    # a minute each on a free CPU; the limit leaves room for a loaded machine
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{name}: ok" in done.stdout
