"""Token-level collapse of a causal language model over a text corpus [Wu & Papyan 2024]: classes are next tokens.

::

    tokenizer = train_tokenizer(texts, vocab_size=512)          # byte-level BPE, trained here: no download
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=len(tokenizer), ...))
    train = token_batches(tokenizer, train_texts, seq_len=64, batch_size=16)
    held = token_batches(tokenizer, held_texts, seq_len=64, batch_size=16)
    res = token_collapse(model, train, held, min_count=5)
    res.report["nc1"], res.report["heldout_ncc_accuracy"], res.K_present

The sample of a position ``t`` is the last layer's hidden state there (the input of the LM head), labelled by the
token at ``t + 1`` (:func:`~nclab.monitor.next_token_targets`); ``W`` is the LM head (GPT-2: the tied input
embedding). A measurement is three streamed passes, as the staged pipeline of [Wu & Papyan 2024]:

1. the next-token counts of the training text (token ids only, no model);
2. the class statistics of the classes kept -- the tokens seen at least ``min_count`` times as a next token
   (:doc:`/conventions`, "Classes of a language model") -- with :class:`~nclab.CollapseMonitor` (NC1, CDNV, the
   uniformity kernels, the ETF error, NC3 / NC4 with the kept rows of ``W``; the NCC decisions on the training
   tokens), float64 accumulation;
3. the NCC decisions on the held-out text against the training class means (its tokens of kept classes).

The kept classes are re-indexed ``0 .. K_present - 1`` before the statistics see them (:attr:`TokenCollapse.tokens`
maps back to token ids), so the statistics, the pairwise kernels and the NCC search are over ``K_present``
classes, not the whole vocabulary, and the classifier metrics keep ``W``'s rows of those classes.

Under ``torch.distributed`` (``torchrun``) :func:`token_batches` gives each rank every ``world``-th batch, the
counts are all-reduced (integers), the statistics and the NCC counts are all-reduced by the monitor (float64 sums
re-expressed about a common shift; integer counts): every rank holds the result of one process measuring the
whole corpus.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

try:
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError("nclab.integrations.lm needs transformers and tokenizers: pip install nclab[hf]") from err

from nclab.measure import is_distributed, ncc_pass
from nclab.monitor import CollapseMonitor, MonitorResult, next_token_targets

__all__ = [
    "FINAL_NORMS",
    "TokenBatches",
    "TokenCollapse",
    "final_layer",
    "next_token_counts",
    "token_batches",
    "token_collapse",
    "toy_corpus",
    "train_tokenizer",
]

#: The module whose output is the LM head's input (the last layer's hidden state), per architecture family, as
#: :func:`final_layer` looks for it.
FINAL_NORMS: tuple[str, ...] = (
    "transformer.ln_f",  # GPT-2, GPT-J, GPT-Neo
    "model.norm",  # Llama, Mistral, Qwen, Gemma
    "gpt_neox.final_layer_norm",  # GPT-NeoX, Pythia
    "model.decoder.final_layer_norm",  # OPT
)

EOS = "<|endoftext|>"


def toy_corpus(n_sentences: int, *, seed: int = 0) -> list[str]:
    """A small English-like corpus from a fixed grammar (a stand-in for your own text in the examples and tests):
    ``n_sentences`` short stories of one to three sentences, the same for the same ``seed``.

    Parameters
    ----------
    n_sentences : int
        How many texts.
    seed : int, default=0
        The random seed.

    Returns
    -------
    list of str

    Examples
    --------
    >>> texts = toy_corpus(3, seed=1)
    >>> len(texts), texts == toy_corpus(3, seed=1), texts[0].endswith(".")
    (3, True, True)
    """
    rng = random.Random(seed)
    names = ["Tom", "Lily", "Max", "Sue", "Ben", "Mia", "the dog", "the cat", "a bird", "the old man", "Grandma",
             "a little fox", "the baker", "Zoe", "the tiny frog", "Captain Jo"]  # fmt: skip
    verbs = ["saw", "liked", "found", "wanted", "made", "lost", "took", "painted", "hid", "shared", "carried",
             "fixed", "dropped", "borrowed", "polished", "whispered to"]  # fmt: skip
    things = ["a red ball", "the big tree", "a small box", "the blue car", "a warm cake", "the green hat",
              "a shiny stone", "the little boat", "a long stick", "the happy song", "a paper kite", "the golden key",
              "a muddy boot", "the purple umbrella", "a squeaky trumpet", "the marmalade jar"]  # fmt: skip
    places = ["in the park", "at home", "by the river", "near the school", "under the bed", "in the garden",
              "behind the barn", "on the windy hill", "inside the lighthouse"]  # fmt: skip
    feelings = ["happy", "sad", "tired", "excited", "scared", "proud", "grumpy", "bewildered"]

    def pick(words: list[str]) -> str:  # Zipf-like: the first words are common, the last ones rare
        return rng.choices(words, weights=[1.0 / (i + 1) for i in range(len(words))])[0]

    out = []
    for _ in range(n_sentences):
        who = pick(names)
        parts = [f"{who} {pick(verbs)} {pick(things)} {pick(places)}."]
        if rng.random() < 0.6:
            parts.append(f"{who} was very {pick(feelings)}.")
        if rng.random() < 0.4:
            parts.append(f"Then {pick(names)} {pick(verbs)} {pick(things)}.")
        out.append(" ".join(p[0].upper() + p[1:] for p in parts))
    return out


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> transformers.PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer as GPT-2's (same pre-tokenizer and byte alphabet, ``<|endoftext|>`` as its
    end-of-text token), trained on ``texts`` with the ``tokenizers`` package: no file is downloaded.

    Parameters
    ----------
    texts : iterable of str
        The training text.
    vocab_size : int
        The vocabulary size to reach (at least 257: the 256 bytes and ``<|endoftext|>``); a small corpus may
        stop below it (``len(tokenizer)`` says).

    Returns
    -------
    transformers.PreTrainedTokenizerFast
        With ``eos_token`` set (``len(tokenizer)`` is the vocabulary size for ``GPT2Config(vocab_size=...)``).

    Examples
    --------
    >>> tok = train_tokenizer(toy_corpus(200), vocab_size=300)
    >>> ids = tok("The dog saw a red ball.")["input_ids"]
    >>> tok.decode(ids), len(tok) <= 300, tok.eos_token
    ('The dog saw a red ball.', True, '<|endoftext|>')
    """
    if vocab_size < 257:
        raise ValueError(f"vocab_size must be at least 257 (256 bytes and {EOS}), got {vocab_size}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS, unk_token=EOS)


class TokenBatches:
    """Re-iterable batches ``{"input_ids": (B, T)}`` of a tokenized corpus (:func:`token_batches`); ``len`` is the
    number of batches of this rank's shard.

    Parameters
    ----------
    ids : torch.Tensor of shape (n, T), int64
        The corpus as ``n`` sequences of ``T`` tokens.
    batch_size : int
        Sequences per batch (the last batch may be shorter).
    shard : (rank, world)
        This rank's batches: those whose index is ``rank`` modulo ``world``.

    Examples
    --------
    >>> ids = torch.arange(20).view(5, 4)
    >>> [b["input_ids"][:, 0].tolist() for b in TokenBatches(ids, 2, (0, 1))]
    [[0, 4], [8, 12], [16]]
    >>> [b["input_ids"][:, 0].tolist() for b in TokenBatches(ids, 2, (1, 2))], TokenBatches(ids, 2, (1, 2)).num_tokens
    ([[8, 12]], 8)
    """

    def __init__(self, ids: torch.Tensor, batch_size: int, shard: tuple[int, int]) -> None:
        self.ids, self.batch_size = ids, batch_size
        self.rank, self.world = shard
        starts = range(0, ids.shape[0], batch_size)
        self._starts = [s for i, s in enumerate(starts) if i % self.world == self.rank]

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        for s in self._starts:
            yield {"input_ids": self.ids[s : s + self.batch_size]}

    def __len__(self) -> int:
        return len(self._starts)

    @property
    def num_tokens(self) -> int:
        """Tokens in this rank's batches (positions, not samples: each sequence's last has no next token)."""
        return sum(int(b["input_ids"].numel()) for b in self)


def token_batches(
    tokenizer: Any,
    texts: Iterable[str],
    *,
    seq_len: int,
    batch_size: int,
    shard: bool | tuple[int, int] = True,
) -> TokenBatches:
    """A corpus as batches of a causal LM: every text tokenized, followed by the end-of-text token, all of them
    concatenated and cut into sequences of ``seq_len`` tokens (GPT-2's packing; the last partial sequence is
    dropped), ``batch_size`` sequences per batch.

    Parameters
    ----------
    tokenizer : callable
        A Hugging Face tokenizer (``tokenizer(text)["input_ids"]``, ``eos_token_id``).
    texts : iterable of str
        The corpus.
    seq_len, batch_size : int
        Tokens per sequence, sequences per batch.
    shard : bool or (rank, world), default=True
        Under ``torch.distributed`` (``True``): each rank gets every ``world``-th batch, so the ranks together
        read the corpus once; ``False``: every batch; ``(rank, world)``: that shard. A rank left without a batch
        is refused.

    Returns
    -------
    TokenBatches
        Re-iterable (the measurement reads it more than once).

    Examples
    --------
    >>> tok = train_tokenizer(toy_corpus(100), vocab_size=300)
    >>> batches = token_batches(tok, toy_corpus(40, seed=2), seq_len=16, batch_size=4)
    >>> first = next(iter(batches))["input_ids"]
    >>> tuple(first.shape), len(batches) == len(list(batches))
    ((4, 16), True)
    >>> len(token_batches(tok, toy_corpus(40, seed=2), seq_len=16, batch_size=4, shard=(1, 2))) == len(batches) // 2
    True
    """
    for name, v in (("seq_len", seq_len), ("batch_size", batch_size)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 2 - (name == "batch_size"):
            raise ValueError(f"{name} must be an int >= {2 - (name == 'batch_size')}, got {v!r}")
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("the tokenizer has no eos_token_id: set tokenizer.eos_token (texts are joined by it)")
    stream: list[int] = []
    for text in texts:
        stream.extend(tokenizer(text)["input_ids"])
        stream.append(eos)
    n = len(stream) // seq_len
    if n == 0:
        raise ValueError(f"the corpus has {len(stream)} tokens: fewer than one sequence of seq_len={seq_len}")
    ids = torch.tensor(stream[: n * seq_len], dtype=torch.long).view(n, seq_len)
    if shard is True:
        where = (torch.distributed.get_rank(), torch.distributed.get_world_size()) if is_distributed() else (0, 1)
    elif shard is False:
        where = (0, 1)
    else:
        where = (int(shard[0]), int(shard[1]))
        if not 0 <= where[0] < where[1]:
            raise ValueError(f"shard must be (rank, world) with 0 <= rank < world, got {shard!r}")
    batches = TokenBatches(ids, batch_size, where)
    if not len(batches):
        raise ValueError(
            f"rank {where[0]} of {where[1]} gets no batch: the corpus makes {-(-n // batch_size)} batches of "
            f"{batch_size} sequences of {seq_len} tokens; use fewer ranks, smaller batches or more text"
        )
    return batches


def _input_ids(batch: Any) -> torch.Tensor:
    inputs = batch[0] if isinstance(batch, (tuple, list)) else batch
    return inputs["input_ids"] if isinstance(inputs, Mapping) else inputs


def next_token_counts(batches: Iterable[Any], K: int) -> torch.Tensor:
    """How often each token ``0 .. K - 1`` is a next token in ``batches`` (positions ``1 .. T - 1`` of each
    sequence whose ``attention_mask`` is set): pass 1 of :func:`token_collapse`, from the token ids alone.
    All-reduced under ``torch.distributed``.

    Parameters
    ----------
    batches : iterable
        Mappings with ``input_ids (B, T)`` (and optionally ``attention_mask``), or ``(inputs, labels)`` pairs.
    K : int
        The vocabulary size.

    Returns
    -------
    torch.Tensor of shape (K,), int64

    Examples
    --------
    >>> next_token_counts([{"input_ids": torch.tensor([[0, 2, 2], [1, 1, 3]])}], 4).tolist()
    [0, 1, 2, 1]
    """
    counts = torch.zeros(K, dtype=torch.long)
    for batch in batches:
        ids = _input_ids(batch)
        nxt = ids[:, 1:]
        inputs = batch[0] if isinstance(batch, (tuple, list)) else batch
        mask = inputs.get("attention_mask") if isinstance(inputs, Mapping) else None
        nxt = nxt.reshape(-1) if mask is None else nxt[mask[:, 1:].bool()]
        if nxt.numel() and (int(nxt.min()) < 0 or int(nxt.max()) >= K):
            raise ValueError(f"token ids must lie in [0, {K}) (the vocabulary), got {int(nxt.min())}..{int(nxt.max())}")
        counts += torch.bincount(nxt.cpu(), minlength=K)
    if is_distributed():
        dist = torch.distributed
        backend_device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else None
        t = counts if backend_device is None else counts.to(backend_device)
        dist.all_reduce(t)
        counts = t.cpu()
    return counts


def final_layer(model: nn.Module) -> str:
    """The name of the module whose output is the LM head's input in a Hugging Face causal LM (the first of
    :data:`FINAL_NORMS` the model has).

    Parameters
    ----------
    model : torch.nn.Module
        A Hugging Face causal LM.

    Returns
    -------
    str
        The module's name in ``model.named_modules()``.

    Raises
    ------
    ValueError
        None of them: pass ``layer=`` to :func:`token_collapse` (the module that outputs the last hidden state).

    Examples
    --------
    >>> cfg = transformers.GPT2Config(vocab_size=50, n_positions=8, n_embd=8, n_layer=1, n_head=2)
    >>> final_layer(transformers.GPT2LMHeadModel(cfg))
    'transformer.ln_f'
    """
    names = dict(model.named_modules())
    for name in FINAL_NORMS:
        if name in names:
            return name
    raise ValueError(
        f"{type(model).__name__} has none of the final-norm modules {list(FINAL_NORMS)}: pass layer= (the name of "
        "the module whose output is the LM head's input, the last hidden state)"
    )


class _KeptNextTokens:
    """A ``targets_fn``: next-token samples whose token is kept, labelled by the kept token's index."""

    def __init__(self, index: torch.Tensor) -> None:
        self.index = index  # (V,) int64: the class of each token id, -1 when not kept

    def __call__(self, features: torch.Tensor, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        h, y = next_token_targets(features, batch)
        index = self.index if self.index.device == y.device else self.index.to(y.device)
        self.index = index
        z = index[y]
        keep = z >= 0
        return h[keep], z[keep]


@dataclass
class TokenCollapse:
    """One token-level measurement (:func:`token_collapse`).

    Parameters
    ----------
    report : dict of str to float
        The last layer's collapse report over the kept classes (the training text), with the held-out NCC
        decisions as ``heldout_ncc_accuracy``, ``heldout_ncc_mismatch``, ``heldout_classifier_accuracy`` and
        ``heldout_coverage`` (the fraction of held-out next tokens whose class is kept) when held-out text was
        given; plus ``K_present``, ``present_min_count`` (the rule) and ``num_tokens`` (training samples of kept
        classes).
    tokens : numpy.ndarray of int64, shape (K_present,)
        The token id of each kept class, in class order.
    counts : numpy.ndarray of int64, shape (V,)
        Next-token counts of the training text over the vocabulary.
    min_count : int
        The rule: a class is kept when seen at least ``min_count`` times.
    layer : str
        The measured module.
    train : MonitorResult
        The monitor's training measurement (its statistics in ``train.stats[layer]``).
    warnings : list of str
        What the monitor said while measuring (e.g. the class-count imbalance of a text).

    Examples
    --------
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <...>
    >>> cfg = transformers.GPT2Config(vocab_size=12, n_positions=8, n_embd=8, n_layer=1, n_head=2)
    >>> model = transformers.GPT2LMHeadModel(cfg)
    >>> ids = torch.tensor([[1, 2, 3, 1, 2, 3, 1, 2], [3, 1, 2, 3, 1, 2, 3, 9]])
    >>> res = token_collapse(model, [{"input_ids": ids}], min_count=2)
    >>> res.tokens.tolist(), res.K_present, res.counts[[1, 2, 3, 9]].tolist(), res.layer
    ([1, 2, 3], 3, [4, 5, 4, 1], 'transformer.ln_f')
    """

    report: dict[str, float]
    tokens: np.ndarray
    counts: np.ndarray
    min_count: int
    layer: str
    train: MonitorResult
    warnings: list[str] = field(default_factory=list)

    @property
    def K_present(self) -> int:
        return int(self.tokens.shape[0])


def token_collapse(
    model: nn.Module,
    train: Iterable[Any],
    held_out: Iterable[Any] | None = None,
    *,
    min_count: int = 1,
    layer: str | None = None,
    **monitor_options: Any,
) -> TokenCollapse:
    """Token-level collapse of a causal LM's last layer over a text corpus, streamed (see the module docstring).

    Parameters
    ----------
    model : torch.nn.Module
        A Hugging Face causal LM (``GPT2LMHeadModel`` ...): called as ``model(**batch)``; its LM head
        (``get_output_embeddings()``) is ``W``, ``K`` = its rows (the vocabulary).
    train, held_out : re-iterable batches
        :func:`token_batches` (or any re-iterable of mappings with ``input_ids`` and optionally
        ``attention_mask``). ``held_out`` is optional: without it there are no ``heldout_*`` values.
    min_count : int, default=1
        The samples a class needs in the training text to be measured (:doc:`/conventions`); the others are
        left out of every metric, and their held-out tokens out of the held-out NCC decisions.
    layer : str, optional
        The module whose output is the LM head's input (default :func:`final_layer`).
    **monitor_options
        Passed on to :class:`~nclab.CollapseMonitor` (``track``, ``conventions``, ``cache_mb``, ``sinks``, ``out``,
        ...).

    Returns
    -------
    TokenCollapse

    Raises
    ------
    ValueError
        Fewer than two classes reach ``min_count``; a model without an LM head (``get_output_embeddings()``).

    Examples
    --------
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <...>
    >>> tok = train_tokenizer(toy_corpus(300), vocab_size=300)
    >>> cfg = transformers.GPT2Config(vocab_size=len(tok), n_positions=32, n_embd=16, n_layer=1, n_head=2)
    >>> model = transformers.GPT2LMHeadModel(cfg)
    >>> train = token_batches(tok, toy_corpus(200, seed=1), seq_len=32, batch_size=8)
    >>> held = token_batches(tok, toy_corpus(60, seed=2), seq_len=32, batch_size=8)
    >>> res = token_collapse(model, train, held, min_count=5)
    >>> res.K_present == int((res.counts >= 5).sum()), 0 < res.report["heldout_ncc_accuracy"] <= 1
    (True, True)
    """
    if not isinstance(min_count, int) or isinstance(min_count, bool) or min_count < 1:
        raise ValueError(f"min_count must be an int >= 1, got {min_count!r}")
    weight, bias = _lm_head(model)
    V = int(weight.shape[0])
    layer = final_layer(model) if layer is None else layer
    counts = next_token_counts(train, V)
    tokens = torch.nonzero(counts >= min_count).flatten()
    if tokens.numel() < 2:
        raise ValueError(
            f"only {tokens.numel()} token(s) occur at least min_count={min_count} times as a next token in the "
            f"training text ({int(counts.sum())} next tokens): lower min_count or measure more text"
        )
    index = torch.full((V,), -1, dtype=torch.long)
    index[tokens] = torch.arange(tokens.numel())
    keep = tokens.numpy()
    with torch.no_grad():  # the kept rows only: never a float64 copy of the whole (V, d) head
        rows = tokens.to(weight.device)
        W = weight[rows].double().cpu().numpy()
        b = None if bias is None else bias[rows].double().cpu().numpy()
    monitor_options.setdefault("targets_fn", _KeptNextTokens(index))
    # One place to switch to the monitor's own class selection once it has one: CollapseMonitor(model, V,
    # classes="present", min_count=min_count, ...) with layers="penultimate" and the LM head as classifier.
    monitor = CollapseMonitor(model, int(tokens.numel()), layers=[layer], classifier=(W, b), **monitor_options)
    res = monitor.measure(train, split="train", epoch=0)
    report = dict(res.reports.get(layer, {}))
    msgs = list(res.warnings)
    stats = res.stats[layer]
    report["K_present"] = float(tokens.numel())
    report["present_min_count"] = float(min_count)
    report["num_tokens"] = float(stats.N)
    if held_out is not None:
        assert monitor.train_stats is not None
        plan = monitor.plan()
        ncc = ncc_pass(model, monitor.batches(held_out), plan, monitor.train_stats, None, msgs)
        acc = ncc[layer]
        if plan.distributed:
            acc.all_reduce()
        out = acc.compute()
        held_counts = next_token_counts(held_out, V)
        total = int(held_counts.sum())
        report["heldout_coverage"] = float(held_counts[tokens].sum()) / total if total else float("nan")
        for key in ("ncc_accuracy", "ncc_mismatch", "ncc_mismatch_nobias", "classifier_accuracy"):
            if key in out:
                report[f"heldout_{key}"] = float(out[key])
        report["heldout_num_tokens"] = float(out["num_samples"])
    monitor.close()
    return TokenCollapse(report, keep.astype(np.int64), counts.numpy(), min_count, layer, res, msgs)


def _lm_head(model: nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The weight ``(V, d)`` and bias (or ``None``) of a Hugging Face causal LM's head (``get_output_embeddings()``)."""
    get = getattr(model, "get_output_embeddings", None)
    module = get() if callable(get) else None
    weight = getattr(module, "weight", None)
    if not isinstance(module, nn.Module) or not isinstance(weight, torch.Tensor) or weight.ndim != 2:
        raise ValueError(
            f"{type(model).__name__} has no LM head (get_output_embeddings() with a 2-D weight): measure a causal "
            "LM (GPT2LMHeadModel, AutoModelForCausalLM), or CollapseMonitor(model, K, targets_fn=next_token_targets)"
        )
    bias = getattr(module, "bias", None)
    return weight, bias if isinstance(bias, torch.Tensor) else None
