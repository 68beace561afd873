"""Collapse while fine-tuning a Hugging Face sequence classifier: nclab.integrations.hf.CollapseCallback.

A tiny BERT built from a config (random weights, no download) learns a synthetic 4-topic text task: each
sequence mixes words of its topic with words shared by all topics, padded to a fixed length. The callback,
attached to the Trainer, measures the pooled representation (the input of ``classifier``:
``tanh(dense(h_[CLS]))``) on the training set and the Trainer's ``eval_dataset`` before training and after each
epoch, logs the values through ``Trainer.log`` (every ``report_to`` logger, ``trainer.state.log_history``) and
writes the run table. Checks: under 2% training error, NC1 falls by over an order of magnitude, the held-out NCC
accuracy tracks the network's, and the logged values are the table's.

    pip install nclab[hf]
    python examples/hf_text.py [RUN_DIR]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch
import transformers
from torch.utils.data import Dataset

import nclab
from nclab.integrations.hf import CollapseCallback

K, VOCAB, T, EPOCHS = 4, 64, 12, 12


class Topics(Dataset):
    """Sequence of class c: ``[CLS]`` (token 1), then words drawn with probability 0.4 from topic c's 12 words and
    else from 12 shared words, then padding (token 0) from a random length on."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.y = torch.arange(n) % K
        topic = 16 + self.y[:, None] * 12 + torch.randint(0, 12, (n, T), generator=g)
        shared = 4 + torch.randint(0, 12, (n, T), generator=g)
        ids = torch.where(torch.rand(n, T, generator=g) < 0.4, topic, shared)
        ids[:, 0] = 1
        lengths = torch.randint(5, T + 1, (n,), generator=g)
        self.mask = (torch.arange(T)[None, :] < lengths[:, None]).long()
        self.ids = ids * self.mask

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "attention_mask": self.mask[i], "labels": self.y[i]}


def main(out: Path) -> None:
    torch.set_num_threads(1)  # a tiny model: more threads only wait on each other
    transformers.set_seed(0)
    config = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=T,
        num_labels=K,
        pad_token_id=0,
    )
    model = transformers.BertForSequenceClassification(config)
    train, held = Topics(256, seed=1), Topics(128, seed=2)
    args = transformers.TrainingArguments(
        output_dir=str(out / "hf"),
        num_train_epochs=EPOCHS,
        per_device_train_batch_size=32,
        per_device_eval_batch_size=64,
        learning_rate=2e-3,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=train, eval_dataset=held)
    CollapseCallback(K, out=out / "collapse").attach(trainer)
    trainer.remove_callback(transformers.trainer_callback.PrinterCallback)  # it prints every logged dict
    trainer.train()

    value = {(r.epoch, r.split, r.layer, r.metric): r.value for r in nclab.read_metrics(out / "collapse")}
    first, last = value[(0, "train", "penultimate", "nc1")], value[(EPOCHS, "train", "penultimate", "nc1")]
    ncc_error = 1 - value[(EPOCHS, "test", "penultimate", "ncc_accuracy")]
    net_error = value[(EPOCHS, "test", "output", "error")]
    train_error = value[(EPOCHS, "train", "output", "error")]
    print(f"NC1 {first:.3g} -> {last:.3g}; training error {train_error:.3f}")
    print(f"held-out error: network {net_error:.3f}, NCC {ncc_error:.3f}")
    assert train_error < 0.02, train_error
    assert last < first / 10, (first, last)
    assert abs(ncc_error - net_error) < 0.05, (ncc_error, net_error)

    logged = [e for e in trainer.state.log_history if "collapse/train/penultimate/nc1" in e]
    assert [e["epoch"] for e in logged] == [float(e) for e in range(EPOCHS + 1)]
    assert logged[-1]["collapse/train/penultimate/nc1"] == last
    print("hf_text: ok")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="nclab-hf-")))
