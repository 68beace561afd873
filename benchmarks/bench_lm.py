"""Token-level collapse of a GPT-2-small-shaped model against one eval forward pass over the same tokens (CPU).

A GPT-2 built from its config (d = 768, 12 layers, 12 heads, vocabulary 50,257; random init, no download) reads
``--seqs`` sequences of ``--seq-len`` tokens drawn from a Zipf law over the vocabulary (exponent 1.1, ranks
shuffled over the token ids: real text's shape, a few thousand tokens). Per round, alternating: one eval forward
pass over the batches (``model(input_ids=...)``, ``torch.no_grad``: the floor, the hidden states and logits must
be computed), then one measurement of the last layer, :func:`nclab.integrations.lm.token_collapse` (the next-token
counts, the hooked forward pass with the statistics of the classes present, the NCC decisions on the training
tokens from the kept features, the report with ``W`` = the LM head's kept rows). Figures are medians over rounds;
the ratio is the median of the per-round ratios (target <= 1.3). Then the time of the report's GNC2 alone (the
one-vs-rest margin of the LM head's kept rows, computed when ``K_present > d``) and the ratio without it.
``--profile`` prints the measurement's top functions (cProfile, one extra run).

    python benchmarks/bench_lm.py [--rounds 3] [--seqs 8] [--seq-len 512] [--threads 2] [--held-out] [--profile]

Runs on the BLAS kernels a user's machine selects (``_native.native_blas``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from _native import kernels_line, native_blas

V, D, LAYERS = 50_257, 768, 12


def zipf_ids(n: int, seq_len: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ranks = torch.arange(1, V + 1, dtype=torch.float64)
    p = ranks**-1.1
    draws = torch.multinomial(p / p.sum(), n * seq_len, replacement=True, generator=g)
    return torch.randperm(V, generator=g)[draws].view(n, seq_len)


def main() -> None:
    native_blas()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seqs", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--batch", type=int, default=4, help="sequences per batch")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--held-out", action="store_true", help="also measure NCC on held-out text (one more pass)")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    import transformers

    from nclab.integrations.lm import TokenBatches, token_collapse

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=V, n_positions=1024, n_embd=D, n_layer=LAYERS, n_head=12)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    train = TokenBatches(zipf_ids(args.seqs, args.seq_len, 1), args.batch, (0, 1))
    held = TokenBatches(zipf_ids(max(args.batch, args.seqs // 4), args.seq_len, 2), args.batch, (0, 1))
    tokens = args.seqs * args.seq_len
    print(
        f"GPT-2-small shape (d={D}, {LAYERS} layers, V={V}, random init), {tokens} tokens "
        f"({args.seqs} x {args.seq_len}, batches of {args.batch}), torch threads {torch.get_num_threads()}"
    )
    print(kernels_line(), flush=True)

    def forward() -> tuple[float, float]:
        t, c = time.perf_counter(), time.process_time()
        with torch.no_grad():
            for b in train:
                model(**b)
        return time.perf_counter() - t, time.process_time() - c

    def measure() -> tuple[float, float, object]:
        t, c = time.perf_counter(), time.process_time()
        res = token_collapse(model, train, held if args.held_out else None)
        return time.perf_counter() - t, time.process_time() - c, res

    forward()  # warm-up (allocator, first-call costs)
    fw, ms, ratios, cpu_ratios = [], [], [], []
    res = None
    for r in range(args.rounds):
        f, fc = forward()
        m, mc, res = measure()
        fw.append(f)
        ms.append(m)
        ratios.append(m / f)
        cpu_ratios.append(mc / fc)
        print(
            f"round {r}: forward {f:.2f} s (cpu {fc:.2f} s), measurement {m:.2f} s (cpu {mc:.2f} s), ratio "
            f"{m / f:.3f} (cpu {mc / fc:.3f}); load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
    assert res is not None
    print(
        f"K_present {res.K_present} of {V}; samples {int(res.report['num_tokens'])}; nc1 {res.report['nc1']:.4g}; "
        f"ncc_accuracy {res.report['ncc_accuracy']:.4g}"
    )
    print(
        f"median: forward {statistics.median(fw):.2f} s, measurement {statistics.median(ms):.2f} s, "
        f"ratio {statistics.median(ratios):.3f}, cpu-time ratio {statistics.median(cpu_ratios):.3f} (target <= 1.3)"
    )
    # the report's GNC2 (one-vs-rest margin of W's kept rows, computed when K_present > d): its share of the time
    import warnings

    from nclab.metrics.gnc import gnc2_entries

    W = model.lm_head.weight.detach()[torch.as_tensor(res.tokens)].double().numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        gnc2_entries(W)
        g = time.perf_counter() - t
    f, m = statistics.median(fw), statistics.median(ms)
    print(f"gnc2 of the kept rows alone: {g:.2f} s; measurement without it {m - g:.2f} s, ratio {(m - g) / f:.3f}")
    print(kernels_line())
    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        token_collapse(model, train, held if args.held_out else None)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(35)


if __name__ == "__main__":
    main()
