"""Token-level collapse of a small GPT-2 over a text corpus: nclab.integrations.lm.token_collapse.

Everything is local: the corpus is generated text (``toy_corpus``: swap in your own list of strings), the
tokenizer a byte-level BPE trained on it with the ``tokenizers`` package (GPT-2's pre-tokenizer and byte
alphabet), the model a GPT-2 built from its config (random init) and trained here for a few hundred steps. The
last layer is measured before and after training, classes = next tokens (those seen at least ``MIN_COUNT`` times
in the training text), ``W`` = the tied LM head, with NCC decisions on held-out text. Checks: the streamed
statistics equal a brute-force computation from all the hidden states; the held-out NCC accuracy equals nearest
class mean by hand; training makes the last layer more collapsed (NC1 falls, the held-out NCC accuracy rises).

    pip install nclab[hf]
    python examples/lm_tokens.py
"""

from __future__ import annotations

import numpy as np
import torch
import transformers

from nclab.integrations.lm import token_batches, token_collapse, toy_corpus, train_tokenizer
from nclab.stats import ClassStats

SEQ, BATCH, STEPS, MIN_COUNT = 64, 16, 150, 10


def hidden_states(model: torch.nn.Module, batches) -> tuple[np.ndarray, np.ndarray]:
    """Every position's last hidden state (all kept in memory: small here) with its next token, batch by batch as
    the measurement runs them (the same float32 products)."""
    hs, ys = [], []
    model.eval()  # as measured: no dropout (a model built from its config starts in train mode)
    with torch.no_grad():
        for b in batches:
            H = model(input_ids=b["input_ids"], output_hidden_states=True).hidden_states[-1]
            hs.append(H[:, :-1].reshape(-1, H.shape[-1]).double())
            ys.append(b["input_ids"][:, 1:].reshape(-1))
    return torch.cat(hs).numpy(), torch.cat(ys).numpy()


def check(model: torch.nn.Module, res, train, held) -> None:
    """The streamed measurement against a brute force over all the hidden states."""
    index = np.full(model.config.vocab_size, -1)
    index[res.tokens] = np.arange(res.K_present)
    h, t = hidden_states(model, train)
    kept = index[t] >= 0
    stats = ClassStats.from_arrays(h[kept], index[t[kept]], res.K_present)
    assert np.allclose(res.train.stats[res.layer].means, stats.means, rtol=1e-9, atol=1e-9)
    assert res.report["nc1"] == np.float64(res.report["nc1"])  # a number, not a placeholder
    ht, tt = hidden_states(model, held)
    ok = index[tt] >= 0
    d2 = ((ht[ok][:, None, :] - stats.means[None]) ** 2).sum(-1)
    by_hand = float((d2.argmin(1) == index[tt[ok]]).mean())
    assert abs(res.report["heldout_ncc_accuracy"] - by_hand) < 1e-12, (res.report["heldout_ncc_accuracy"], by_hand)


def main() -> None:
    torch.set_num_threads(1)  # a tiny model: more threads only wait on each other
    transformers.set_seed(0)
    tok = train_tokenizer(toy_corpus(3000), vocab_size=512)
    cfg = transformers.GPT2Config(
        vocab_size=len(tok),
        n_positions=SEQ,
        n_embd=64,
        n_layer=2,
        n_head=4,
        bos_token_id=tok.eos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    model = transformers.GPT2LMHeadModel(cfg)
    train = token_batches(tok, toy_corpus(3000, seed=1), seq_len=SEQ, batch_size=BATCH)
    held = token_batches(tok, toy_corpus(600, seed=2), seq_len=SEQ, batch_size=BATCH)

    before = token_collapse(model, train, held, min_count=MIN_COUNT)
    check(model, before, train, held)

    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    batches = list(train)
    for step in range(STEPS):
        ids = batches[step % len(batches)]["input_ids"]
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()

    after = token_collapse(model, train, held, min_count=MIN_COUNT)
    check(model, after, train, held)
    b, a = before.report, after.report
    print(
        f"vocabulary {len(tok)}, classes kept {after.K_present} (seen >= {MIN_COUNT} times), "
        f"{int(a['num_tokens'])} training tokens, {int(a['heldout_num_tokens'])} held-out "
        f"(coverage {a['heldout_coverage']:.3f}); final loss {loss.item():.3f}"
    )
    for key in ("nc1", "cdnv", "etf_gram_error", "uniformity_log_energy", "self_duality", "heldout_ncc_accuracy",
                "heldout_classifier_accuracy", "heldout_ncc_mismatch"):  # fmt: skip
        print(f"  {key:28s} {b[key]:10.4g} -> {a[key]:10.4g}")
    assert a["nc1"] < b["nc1"] / 2, (b["nc1"], a["nc1"])
    assert a["heldout_ncc_accuracy"] > b["heldout_ncc_accuracy"] + 0.1
    assert a["heldout_ncc_mismatch"] < b["heldout_ncc_mismatch"]
    print("lm_tokens: ok")


if __name__ == "__main__":
    main()
