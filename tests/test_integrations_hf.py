"""Hugging Face callback: tiny randomly initialised sequence classifiers (from a config, no download) trained a
few steps by ``transformers.Trainer`` on synthetic tokens; the logged rows exist and the last ones equal a
direct CollapseMonitor.measure of the final model."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from nclab.io.run_table import read_metrics

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install nclab[hf])")

K, VOCAB, T = 3, 40, 8


class Tokens(Dataset):
    """Class c: tokens drawn from its own third of the vocabulary (so a few steps already separate the classes),
    right-padded with 0 to T at a random length."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.y = torch.arange(n) % K
        band = (VOCAB - 1) // K
        self.ids = 1 + (self.y[:, None] * band + torch.randint(0, band, (n, T), generator=g))
        lengths = torch.randint(3, T + 1, (n,), generator=g)
        self.mask = (torch.arange(T)[None, :] < lengths[:, None]).long()
        self.ids = self.ids * self.mask

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "attention_mask": self.mask[i], "labels": self.y[i]}


def _model(family: str):
    torch.manual_seed(0)
    if family == "gpt2":
        cfg = transformers.GPT2Config(
            vocab_size=VOCAB, n_positions=T, n_embd=16, n_layer=1, n_head=2, num_labels=K, pad_token_id=0
        )
        return transformers.GPT2ForSequenceClassification(cfg)
    cfg = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=T,
        num_labels=K,
        pad_token_id=0,
    )
    return transformers.BertForSequenceClassification(cfg)


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_callback_rows_equal_a_direct_measurement(tmp_path, family):
    pytest.importorskip("accelerate", reason="transformers.Trainer needs accelerate (pip install nclab[hf])")
    from nclab.integrations.hf import CollapseCallback
    from nclab.monitor import CollapseMonitor

    train, held = Tokens(48, seed=1), Tokens(24, seed=2)
    eval_dl = DataLoader(held, batch_size=12)
    model = _model(family)
    cb = CollapseCallback(K, eval_data=eval_dl, out=tmp_path / "run")
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"),
        num_train_epochs=2,
        per_device_train_batch_size=12,
        learning_rate=5e-3,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=train, callbacks=[cb])
    trainer.train()

    logged = [e for e in trainer.state.log_history if any(k.startswith("collapse/") for k in e)]
    assert [(e["epoch"], e["step"]) for e in logged] == [(0.0, 0), (1.0, 4), (2.0, 8)]  # both splits per entry
    table = read_metrics(tmp_path / "run")
    assert sorted({(r.epoch, r.split) for r in table}) == [(e, s) for e in (0, 1, 2) for s in ("test", "train")]

    direct = CollapseMonitor(model, K, targets_fn=cb.monitor.targets_fn)
    ref_train = direct.measure(DataLoader(train, batch_size=16), epoch=2)
    ref_test = direct.measure(eval_dl, split="test", epoch=2)
    got = {(r.split, r.layer, r.metric): r.value for r in table if r.epoch == 2}
    last = logged[-1]
    for res in (ref_train, ref_test):
        assert res.rows
        for r in res.rows:
            assert got[(r.split, r.layer, r.metric)] == pytest.approx(r.value, rel=1e-10, abs=1e-12), r
            assert last[f"collapse/{r.split}/{r.layer}/{r.metric}"] == pytest.approx(r.value, rel=1e-10, abs=1e-12)
    pen = ref_train.reports["penultimate"]
    assert {"nc1", "self_duality", "ncc_mismatch"} <= set(pen)
    # the classifier found is the one the family's head applies last (see nclab.integrations.hf)
    assert cb.monitor.classifier.name == ("score" if family == "gpt2" else "classifier")
    assert ("error" in ref_train.reports.get("output", {})) == (family == "bert")
    # the pooled feature has the hidden size, one sample per sequence
    s = ref_train.stats["penultimate"]
    assert s.counts.sum() == len(train) and s.d == 16


def test_last_token_pooling_matches_the_models_own_pooling():
    """GPT-2 pools its logits at the last non-padding token; pooling the input of ``score`` the same way and
    applying ``score`` gives the model's logits."""
    from nclab.integrations.hf import last_token_pooling

    model = _model("gpt2").eval()
    data = Tokens(6, seed=3)
    batch = {"input_ids": data.ids, "attention_mask": data.mask}
    seen = {}
    handle = model.score.register_forward_pre_hook(lambda m, inp: seen.update(h=inp[0]))
    with torch.no_grad():
        logits = model(**batch).logits
    handle.remove()
    pooled, y = last_token_pooling(0)(seen["h"], (batch, data.y))
    assert pooled.shape == (6, 16) and torch.equal(y, data.y)
    torch.testing.assert_close(model.score(pooled), logits, rtol=1e-6, atol=1e-6)


def test_missing_transformers_names_the_extra(monkeypatch):
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # what an environment without it imports
    monkeypatch.delitem(sys.modules, "nclab.integrations.hf", raising=False)
    with pytest.raises(ImportError, match=r"pip install nclab\[hf\]"):
        importlib.import_module("nclab.integrations.hf")


def test_nclab_imports_without_transformers():
    import subprocess
    import sys

    code = "import sys; sys.modules['transformers'] = None; import nclab.integrations; print(nclab.CollapseMonitor)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert "CollapseMonitor" in out.stdout


def _args(tmp_path, **kw):
    base = dict(
        output_dir=str(tmp_path / "hf"),
        num_train_epochs=2,
        per_device_train_batch_size=12,
        per_device_eval_batch_size=12,
        learning_rate=5e-3,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        eval_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    return transformers.TrainingArguments(**{**base, **kw})


def test_attached_callback_reaches_report_to_tensorboard_and_measures_eval_from_epoch_0(tmp_path, monkeypatch):
    """ux-2 task 4: through ``Trainer.log``, HF's own TensorBoard run holds every collapse value (keys as the
    Lightning callback's, under HF's ``train/`` namespace, at the Trainer's step), and the Trainer's
    eval_dataset is measured from epoch 0 without ``eval_data=``."""
    pytest.importorskip("accelerate", reason="transformers.Trainer needs accelerate (pip install nclab[hf])")
    pytest.importorskip("tensorboard", reason="tensorboard is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from nclab.integrations.hf import CollapseCallback
    from nclab.io.sinks import tag

    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "hf-tb"))
    train, held = Tokens(48, seed=1), Tokens(24, seed=2)
    trainer = transformers.Trainer(
        model=_model("bert"), args=_args(tmp_path, report_to=["tensorboard"]), train_dataset=train, eval_dataset=held
    )
    cb = CollapseCallback(K, out=tmp_path / "run").attach(trainer)
    assert cb.trainer is trainer and sum(c is cb for c in trainer.callback_handler.callbacks) == 1
    assert cb.attach(trainer) is cb and sum(c is cb for c in trainer.callback_handler.callbacks) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # attached: nothing is missing, nothing to warn about
        trainer.train()

    table = read_metrics(tmp_path / "run")
    assert sorted({(r.epoch, r.split) for r in table}) == [(e, s) for e in (0, 1, 2) for s in ("test", "train")]
    acc = EventAccumulator(str(tmp_path / "hf-tb"))
    acc.Reload()
    collapse = {t for t in acc.Tags()["scalars"] if "collapse/" in t}
    assert collapse == {f"train/{tag(r)}" for r in table}
    steps = {0: 0, 1: 4, 2: 8}  # 48 samples / 12 per step: 4 steps per epoch
    for r in table:
        (event,) = [e for e in acc.Scalars(f"train/{tag(r)}") if e.step == steps[r.epoch]]
        assert event.value == pytest.approx(r.value, rel=1e-6, abs=1e-7)  # event files hold float32
    # log_history has one entry per measured epoch, both splits, with the Trainer's epoch and step
    logged = [e for e in trainer.state.log_history if "collapse/train/penultimate/nc1" in e]
    assert [(e["epoch"], e["step"]) for e in logged] == [(0.0, 0), (1.0, 4), (2.0, 8)]
    assert logged[0]["collapse/test/output/error"] == next(
        r.value for r in table if (r.epoch, r.split, r.layer, r.metric) == (0, "test", "output", "error")
    )


def test_plain_callbacks_form_says_once_what_is_missing(tmp_path):
    """``Trainer(callbacks=[cb])`` without ``attach``: one warning naming the report_to loggers and the held-out
    split, and the table still has every training epoch (the held-out split from the first evaluation on)."""
    pytest.importorskip("accelerate", reason="transformers.Trainer needs accelerate (pip install nclab[hf])")
    pytest.importorskip("tensorboard", reason="tensorboard is not installed")
    from nclab.integrations.hf import CollapseCallback

    train, held = Tokens(48, seed=1), Tokens(24, seed=2)
    cb = CollapseCallback(K, out=tmp_path / "run")
    args = _args(tmp_path, report_to=["tensorboard"], eval_strategy="epoch")
    trainer = transformers.Trainer(
        model=_model("bert"), args=args, train_dataset=train, eval_dataset=held, callbacks=[cb]
    )
    with pytest.warns(UserWarning) as record:
        trainer.train()
        trainer.train()  # a second run with the same callback: no second warning
    said = [str(w.message) for w in record if "not attached" in str(w.message)]
    assert len(said) == 1
    assert "report_to loggers (tensorboard)" in said[0] and "callback.attach(trainer)" in said[0]
    assert "held-out split" in said[0]
    table = read_metrics(tmp_path / "run")
    # the eval dataloader exists once the Trainer's first evaluation (end of epoch 1, after on_epoch_end) ran
    assert sorted({(r.epoch, r.split) for r in table}) == [
        (0, "train"),
        (1, "train"),
        (2, "test"),
        (2, "train"),
        (3, "test"),
        (3, "train"),
        (4, "test"),
        (4, "train"),
    ]


def test_attach_refuses_what_is_not_a_trainer():
    from nclab.integrations.hf import CollapseCallback

    with pytest.raises(TypeError, match=r"trainer must be a transformers\.Trainer, got dict"):
        CollapseCallback(K).attach({})


def test_log_step_epoch_puts_the_tables_epochs_on_the_loggers_axis(tmp_path, monkeypatch):
    """``log_step="epoch"``: HF's TensorBoard run holds the collapse values at the table's epochs (0, 1, 2), not at
    the global steps (0, 4, 8); the Trainer's own step is restored after each measurement."""
    pytest.importorskip("accelerate", reason="transformers.Trainer needs accelerate (pip install nclab[hf])")
    pytest.importorskip("tensorboard", reason="tensorboard is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from nclab.integrations.hf import CollapseCallback
    from nclab.io.sinks import tag

    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "hf-tb"))
    trainer = transformers.Trainer(
        model=_model("bert"), args=_args(tmp_path, report_to=["tensorboard"]), train_dataset=Tokens(48, seed=1)
    )
    CollapseCallback(K, out=tmp_path / "run", log_step="epoch").attach(trainer)
    trainer.train()
    assert trainer.state.global_step == 8
    table = read_metrics(tmp_path / "run")
    acc = EventAccumulator(str(tmp_path / "hf-tb"))
    acc.Reload()
    for r in table:
        events = acc.Scalars(f"train/{tag(r)}")
        assert sorted(e.step for e in events) == [0, 1, 2]  # the table's epochs, not the global steps 0, 4, 8
        (event,) = [e for e in events if e.step == r.epoch]
        assert event.value == pytest.approx(r.value, rel=1e-6, abs=1e-7)
    logged = [e for e in trainer.state.log_history if "collapse/train/penultimate/nc1" in e]
    assert [(e["epoch"], e["step"]) for e in logged] == [(0.0, 0), (1.0, 1), (2.0, 2)]
    with pytest.raises(ValueError, match="log_step"):
        CollapseCallback(K, log_step="steps")
