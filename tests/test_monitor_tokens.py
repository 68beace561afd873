"""Token-level collapse [Wu & Papyan 2024]: a tiny random GPT-2 (config only, no download), classes = next tokens,
K = its vocabulary; the monitor's light report equals a direct computation on the final hidden states."""

from __future__ import annotations

import pytest
import torch

from nclab.metrics import collapse_report, ncc_metrics
from nclab.monitor import CollapseMonitor, next_token_targets
from nclab.stats import ClassStats

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install nclab[hf])")

V = 1000


def test_next_token_collapse_of_a_tiny_gpt2():
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        vocab_size=V, n_positions=32, n_embd=32, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=0
    )
    model = transformers.GPT2LMHeadModel(cfg).eval()
    g = torch.Generator().manual_seed(1)
    # 48 sequences of 32 tokens; every token of the vocabulary is some position's next token (no empty class)
    ids = torch.randint(0, V, (48, 32), generator=g)
    nxt = ids[:44, 1:].reshape(-1)  # the unpadded rows
    nxt[torch.randperm(44 * 31, generator=g)[:V]] = torch.arange(V)
    ids[:44, 1:] = nxt.view(44, 31)
    mask = torch.ones_like(ids)
    mask[-4:, 20:] = 0  # right padding: those positions are no samples
    batches = [{"input_ids": ids[i : i + 16], "attention_mask": mask[i : i + 16]} for i in range(0, 48, 16)]

    monitor = CollapseMonitor(model, V, targets_fn=next_token_targets, track="light")
    assert monitor.classifier.name == "lm_head" and monitor.penultimate == "penultimate"
    res = monitor.measure(batches, epoch=0)

    with torch.no_grad():
        H = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[-1]
    keep = mask[:, 1:].reshape(-1).bool()
    h, y = H[:, :-1].reshape(-1, 32)[keep], ids[:, 1:].reshape(-1)[keep]
    assert res.stats["penultimate"].N == int(keep.sum()) == 48 * 31 - 4 * 12
    stats = ClassStats.from_arrays(h.double().numpy(), y.numpy(), V, track="light")
    assert not stats.empty_classes.size
    W = model.lm_head.weight.detach().double().numpy()
    ref = collapse_report(stats, W=W, ncc=ncc_metrics(stats, h, y, W=W))
    got = res.reports["penultimate"]
    assert "output" not in res.reports  # logits per position are not one per sample: no error row
    assert set(got) == set(ref) and "ncc_mismatch" in got and "self_duality" in got
    for met, v in ref.items():
        assert got[met] == pytest.approx(v, rel=1e-9, abs=1e-12), met
