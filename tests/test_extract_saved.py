"""``nclab extract`` of the models users save themselves: a ``torch.save``'d instance of a class defined in their
own script, a state dict with its class, and the run folder of a ``CollapseMonitor`` with the model beside it.
Features are compared with the model's own forward pass on the same samples."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from nclab.cli import app
from nclab.nets.saved import import_class, load_saved_model

runner = CliRunner()

# a user's script: the class lives in it, the training under the main guard (the file runs on import)
SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self, hidden=16):
            super().__init__()
            self.body = nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.ReLU())
            self.fc = nn.Linear(hidden, 10)

        def forward(self, x):
            return self.fc(self.body(x))

    if __name__ == "__main__":
        torch.manual_seed(0)
        net = Net(hidden=int(sys.argv[3]))
        torch.save(net, sys.argv[1])
        torch.save(net.state_dict(), sys.argv[2])
    """
)


@pytest.fixture
def saved(tmp_path):
    """The script, the whole module it pickled (as ``__main__.Net``) and its state dict; hidden width 12."""
    script = tmp_path / "mynet.py"
    script.write_text(SCRIPT)
    module, state = tmp_path / "custom.pt", tmp_path / "weights.pt"
    subprocess.run([sys.executable, str(script), str(module), str(state), "12"], check=True, cwd=tmp_path)
    return script, module, state


def _penultimate(net, x):
    with torch.no_grad():
        return net.body(x).numpy()


def _digits():
    from nclab.data import load

    return load("digits", "test", per_class=3)


def test_a_pickled_script_class_is_refused_naming_the_class_and_the_option(saved, tmp_path):
    _, module, _ = saved
    res = runner.invoke(app, ["extract", str(module), "digits", "-o", str(tmp_path / "f")])
    assert res.exit_code == 2, res.output
    assert "class 'Net'" in res.output and "--model-class" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "f").exists()


def test_a_pickled_script_class_extracts_with_model_class(saved, tmp_path):
    script, module, _ = saved
    out = tmp_path / "f"
    args = ["extract", str(module), "digits", "--split", "test", "--per-class", "3", "-o", str(out)]
    res = runner.invoke(app, [*args, "--model-class", f"{script}:Net"])
    assert res.exit_code == 0, res.output
    ds = _digits()
    net = load_saved_model(module, f"{script}:Net")
    pen = json.loads((out / "manifest.json").read_text())["penultimate"]
    H = np.load(out / f"{pen}.npy")
    np.testing.assert_allclose(H, _penultimate(net, ds.x), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(np.load(out / "W.npy"), net.fc.weight.detach().numpy())


def test_a_state_dict_needs_its_class_and_loads_with_its_arguments(saved, tmp_path):
    script, module, state = saved
    res = runner.invoke(app, ["extract", str(state), "digits", "-o", str(tmp_path / "a")])
    assert res.exit_code == 2 and "state dict" in res.output and "--model-class" in res.output
    # the default width 16 does not fit the saved 12: torch's mismatch, on one line
    res = runner.invoke(
        app, ["extract", str(state), "digits", "-o", str(tmp_path / "b"), "--model-class", f"{script}:Net"]
    )
    assert res.exit_code == 2 and "does not fit Net" in res.output and "size mismatch" in res.output
    out = tmp_path / "c"
    args = ["extract", str(state), "digits", "--split", "test", "--per-class", "3", "-o", str(out)]
    res = runner.invoke(app, [*args, "--model-class", f"{script}:Net", "--model-kwargs", '{"hidden": 12}'])
    assert res.exit_code == 0, res.output
    whole = load_saved_model(module, f"{script}:Net")
    pen = json.loads((out / "manifest.json").read_text())["penultimate"]
    np.testing.assert_allclose(np.load(out / f"{pen}.npy"), _penultimate(whole, _digits().x), rtol=1e-6, atol=1e-7)


def test_import_class_names_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="expected MODULE:CLASS"):
        import_class("torch.nn.Linear")
    with pytest.raises(ValueError, match="has no attribute 'Nope'"):
        import_class("torch.nn:Nope")
    with pytest.raises(ValueError, match=r"not an nn\.Module subclass"):
        import_class("torch:Tensor")
    with pytest.raises(ValueError, match="cannot import"):
        import_class(f"{tmp_path}/missing.py:Net")


def test_a_monitor_run_folder_extracts_its_layers_with_weights(saved, tmp_path):
    from nclab import CollapseMonitor

    script, module, _ = saved
    net = load_saved_model(module, f"{script}:Net")
    ds = _digits()
    run = tmp_path / "mine"
    monitor = CollapseMonitor(net, K=10, layers=["body.1", "penultimate"], out=run)
    monitor.measure([(ds.x, ds.y)], split="train", epoch=0)
    monitor.close()
    res = runner.invoke(app, ["extract", str(run), "digits", "-o", str(tmp_path / "x")])
    assert res.exit_code == 2 and "--weights" in res.output and "monitor run folder" in res.output
    out = tmp_path / "f"
    args = ["extract", str(run), "digits", "--split", "test", "--per-class", "3", "-o", str(out)]
    res = runner.invoke(app, [*args, "--weights", str(module), "--model-class", f"{script}:Net"])
    assert res.exit_code == 0, res.output
    manifest = json.loads((out / "manifest.json").read_text())
    arrays = {k for entry in manifest["files"].values() for k in entry.get("arrays", {})}
    assert "body.1" in arrays  # the layers the monitor measured, without --layers
    with torch.no_grad():
        expected = net.body[1](net.body[0](ds.x)).numpy()
    np.testing.assert_allclose(np.load(out / "body.1.npy"), expected, rtol=1e-6, atol=1e-7)
    # another model (hidden 20) is not the one the run measured: refused naming the parameter
    other = tmp_path / "other.pt"
    subprocess.run([sys.executable, str(script), str(other), str(tmp_path / "o_sd.pt"), "20"], check=True, cwd=tmp_path)
    res = runner.invoke(
        app, [*args[:-2], "-o", str(tmp_path / "g"), "--weights", str(other), "--model-class", f"{script}:Net"]
    )
    assert res.exit_code == 2 and "is not the one" in res.output and "body.1.weight" in res.output


def test_options_that_cannot_apply_are_refused(saved, tmp_path):
    _, module, _ = saved
    res = runner.invoke(app, ["extract", str(module), "digits", "--weights", str(module), "-o", str(tmp_path / "f")])
    assert res.exit_code == 2 and "--weights applies to a monitor" in res.output
    res = runner.invoke(app, ["extract", str(module), "digits", "--model-kwargs", "[1]", "-o", str(tmp_path / "f")])
    assert res.exit_code == 2 and "JSON object" in res.output
