"""
Token-level collapse of a language model
========================================

A causal language model is a classifier at every position: the last layer's hidden state at position ``t`` is
the feature, the token at ``t + 1`` its class, the LM head (GPT-2: the tied input embedding) the classifier
``W``, and ``K`` is the vocabulary [Wu & Papyan 2024]. Real text leaves most of a vocabulary unseen and many
tokens rare, so the classes measured are the tokens seen at least ``min_count`` times as a next token in the
training text, with ``W``'s rows of those classes (NC3 and NC4 stay).

Here a two-layer GPT-2 built from its config (random init, nothing downloaded) learns a small generated corpus
through a byte-level BPE tokenizer trained on it with the ``tokenizers`` package, and
:func:`nclab.integrations.lm.token_collapse` measures its last layer at a few steps: NC1 over the kept classes,
self-duality (NC3) with the LM head, and the nearest-class-centre decisions on held-out text.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch
import transformers

from nclab.integrations.lm import token_batches, token_collapse, toy_corpus, train_tokenizer

torch.manual_seed(0)
torch.set_num_threads(1)
tok = train_tokenizer(toy_corpus(2000), vocab_size=400)
cfg = transformers.GPT2Config(
    vocab_size=len(tok), n_positions=48, n_embd=48, n_layer=2, n_head=4,
    bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id,
)  # fmt: skip
model = transformers.GPT2LMHeadModel(cfg)
train = token_batches(tok, toy_corpus(1500, seed=1), seq_len=48, batch_size=16)
held = token_batches(tok, toy_corpus(300, seed=2), seq_len=48, batch_size=16)

steps, measured, min_count = 120, [0, 10, 30, 60, 120], 50
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
batches = list(train)
results = {}
for step in range(steps + 1):
    if step in measured:
        results[step] = token_collapse(model, train, held, min_count=min_count)
    if step == steps:
        break
    model.train()
    ids = batches[step % len(batches)]["input_ids"]
    loss = model(input_ids=ids, labels=ids).loss
    opt.zero_grad()
    loss.backward()
    opt.step()

last = results[steps]
seen = int((last.counts > 0).sum())
print(f"vocabulary {len(tok)}: {seen} tokens occur as a next token, {last.K_present} at least {min_count} times")
print(f"training tokens measured {int(last.report['num_tokens'])}, held-out {int(last.report['heldout_num_tokens'])}")

# %%
# The classes a text gives: next-token counts fall off like a power law, and the rule ``min_count`` decides
# which tokens are classes (left); training collapses the last layer onto the kept classes' means, aligns those
# means with the LM head's rows (NC3) and makes the nearest-class-centre rule agree with the head on held-out
# text (right).
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 3.8))
counts = np.sort(last.counts[last.counts > 0])[::-1]
ax0.loglog(np.arange(1, counts.size + 1), counts, ".-")
ax0.axhline(min_count, color="k", ls="--", lw=1, label=f"min_count = {min_count}")
ax0.set(xlabel="token rank", ylabel="next-token count", title="classes of the training text")
ax0.legend()
curves = {
    "nc1": "NC1",
    "self_duality": "NC3 (self-duality)",
    "heldout_ncc_mismatch": "NC4 on held-out text",
    "heldout_ncc_accuracy": "held-out NCC accuracy",
}
for key, label in curves.items():
    ax1.plot(measured, [results[s].report[key] for s in measured], "o-", label=label)
ax1.set(xlabel="training step", yscale="log", title="last layer, kept classes")
ax1.legend(fontsize=8)
fig.tight_layout()
plt.show()
