"""attnc.torch.flex_attention against torch's own flex_attention (eager, on the CPU) for the
kinds of functions attention-gym collects, on odd shapes: Tq != Tk, Tq = 1, GQA, sizes off every
tile, rows every key of which is masked; and the errors of callables attnc cannot express."""
import os
import threading

import numpy
import pytest
import torch
from torch.nn.attention import flex_attention as torch_flex

import attnc
import attnc.torch

B, H, H_KV, D = 2, 4, 2, 16
generator = torch.Generator().manual_seed(0)
SLOPES = torch.rand(H, generator=generator)
TABLE = torch.randn(H, 2 * 64 + 1, generator=generator)
BUCKETS = torch.randn(H, 17, generator=generator)
PREFIX = torch.tensor([5, 20], dtype=torch.int32)
WINDOWS = torch.tensor([3, 8, 16, 70], dtype=torch.int32)
GATE = torch.randn(H, generator=generator)
CAP, WINDOW, GLOBAL, STRIDE = 20.0, 12, 3, 4


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def window(b, h, q_idx, kv_idx):
    return (q_idx - kv_idx <= WINDOW) & (kv_idx - q_idx <= WINDOW)


def prefix_lm(b, h, q_idx, kv_idx):
    return (kv_idx < PREFIX[b]) | (q_idx >= kv_idx)


def dilated(b, h, q_idx, kv_idx):
    return ((q_idx - kv_idx) % 2 == 0) & causal(b, h, q_idx, kv_idx)


def strided(b, h, q_idx, kv_idx):
    return (kv_idx % STRIDE == STRIDE - 1) | (torch.abs(q_idx - kv_idx) < 2)


def global_tokens(b, h, q_idx, kv_idx):
    return (kv_idx < GLOBAL) | (q_idx < GLOBAL) | (q_idx >= kv_idx)


def per_head_window(b, h, q_idx, kv_idx):
    return (q_idx - kv_idx < WINDOWS[h]) & (q_idx >= kv_idx)


def nothing_before_40(b, h, q_idx, kv_idx):
    """Rows below 40 keep no key at all: their output is 0 and their lse -inf."""
    return (kv_idx <= q_idx) & (q_idx >= 40)


def alibi(score, b, h, q_idx, kv_idx):
    return score + SLOPES[h] * (kv_idx - q_idx)


def softcap(score, b, h, q_idx, kv_idx):
    return CAP * torch.tanh(score / CAP)


def relative_distance(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx) * 0.05


def bias_table(score, b, h, q_idx, kv_idx):
    return score + TABLE[h, q_idx - kv_idx + 64]


def t5_buckets(score, b, h, q_idx, kv_idx):
    return score + BUCKETS[h, torch.clamp(q_idx - kv_idx, -8, 8) + 8]


def where_masked(score, b, h, q_idx, kv_idx):
    return torch.where(q_idx >= kv_idx, score, -float("inf"))


def affine(score, b, h, q_idx, kv_idx):
    return score * 0.5 + 1


def distance_penalty(score, b, h, q_idx, kv_idx):
    return score - (q_idx - kv_idx).abs() * 0.1


def gated(score, b, h, q_idx, kv_idx):
    return score + torch.log(torch.sigmoid(GATE[h]))


def softcap_alibi(score, b, h, q_idx, kv_idx):
    return softcap(alibi(score, b, h, q_idx, kv_idx), b, h, q_idx, kv_idx)


def clamped(score, b, h, q_idx, kv_idx):
    return torch.clamp(score, min=-1.0, max=1.5) + torch.maximum(score, score * 0.1)


NUMPY_SCALE = numpy.float32(0.75)


def bool_arithmetic(score, b, h, q_idx, kv_idx):
    """Bools promoted as torch promotes them, a numpy scalar captured, constants made alike."""
    penalty = torch.full_like(score, 2.0) * (q_idx < kv_idx) + score.new_zeros(())
    return score * NUMPY_SCALE - penalty + torch.zeros_like(q_idx)


CASES = [  # (score_mod, mask_mod)
    (None, causal), (None, window), (None, prefix_lm), (None, dilated), (None, strided),
    (None, global_tokens), (None, per_head_window), (None, nothing_before_40),
    (None, torch_flex.and_masks(causal, window)), (None, torch_flex.or_masks(prefix_lm, strided)),
    (alibi, None), (softcap, None), (relative_distance, None), (bias_table, None),
    (t5_buckets, None), (where_masked, None), (affine, None), (distance_penalty, None),
    (gated, None), (clamped, None), (bool_arithmetic, None), (softcap_alibi, causal),
    (bias_table, window),
    (alibi, per_head_window),
]


def torch_reference(q, k, v, score_mod, mask_mod, **options):
    block_mask = None if mask_mod is None else torch_flex.create_block_mask(
        mask_mod, q.shape[0], q.shape[1], q.shape[2], k.shape[2], device="cpu")
    return torch_flex.flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask,
                                     enable_gqa=q.shape[1] != k.shape[1], **options)


def qkv(seq_q, seq_k, heads=H, kv_heads=H_KV, d=D, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(B, n, t, d, generator=generator).to(dtype)
            for n, t in ((heads, seq_q), (kv_heads, seq_k), (kv_heads, seq_k))]


def name_of(case):
    return "-".join(getattr(f, "__name__", "none") for f in case)


@pytest.mark.parametrize("score_mod, mask_mod", CASES, ids=map(name_of, CASES))
@pytest.mark.parametrize("seq_q, seq_k", [(53, 53), (37, 90), (1, 67)])
def test_matches_torchs_flex_attention(score_mod, mask_mod, seq_q, seq_k):
    q, k, v = qkv(seq_q, seq_k)
    o, lse = attnc.torch.flex_attention(q, k, v, score_mod=score_mod, mask_mod=mask_mod,
                                        enable_gqa=True, return_lse=True)
    expected_o, expected_lse = torch_reference(q, k, v, score_mod, mask_mod, return_lse=True)
    torch.testing.assert_close(o, expected_o, atol=3e-5, rtol=1e-4)
    torch.testing.assert_close(lse, expected_lse, atol=3e-5, rtol=1e-4)


def eager_attention(q, k, v, score_mod, mask_mod):
    """FlexAttention's semantics in plain torch ops over the whole score matrix, for autograd:
    torch's flex_attention has no backward on CPUs (pytorch #169646). A row with no key left
    gives 0, as flex_attention's does."""
    batch, heads, seq_q, d = q.shape
    group = heads // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-1, -2) / d ** 0.5
    b, h = torch.arange(batch).view(-1, 1, 1, 1), torch.arange(heads).view(1, -1, 1, 1)
    q_idx = torch.arange(seq_q).view(1, 1, -1, 1)
    kv_idx = torch.arange(k.shape[2]).view(1, 1, 1, -1)
    if score_mod is not None:
        scores = score_mod(scores, b, h, q_idx, kv_idx)
    if mask_mod is not None:
        scores = scores.masked_fill(~mask_mod(b, h, q_idx, kv_idx), -float("inf"))
    alive = (scores > -float("inf")).any(dim=-1, keepdim=True)
    weights = torch.softmax(torch.where(alive, scores, 0.0), dim=-1)
    return torch.where(alive, weights, 0.0) @ v


@pytest.mark.parametrize("score_mod, mask_mod", CASES, ids=map(name_of, CASES))
@pytest.mark.parametrize("seq_q, seq_k", [(37, 53), (1, 20)])
def test_gradients_match_torchs_autograd(score_mod, mask_mod, seq_q, seq_k):
    """torch's eager autograd of the same attention against attnc's backward entry."""
    gradients = []
    for run in (attnc.torch.flex_attention, eager_attention):
        q, k, v = (t.requires_grad_() for t in qkv(seq_q, seq_k))
        options = {"enable_gqa": True} if run is attnc.torch.flex_attention else {}
        o = run(q, k, v, score_mod=score_mod, mask_mod=mask_mod, **options)
        o.backward(torch.cos(torch.arange(o.numel(), dtype=o.dtype)).reshape(o.shape))
        gradients.append((q.grad, k.grad, v.grad))
    for got, want in zip(*gradients):
        torch.testing.assert_close(got, want, atol=5e-5, rtol=1e-4)


def test_gradients_of_captured_tables():
    """A captured tensor that requires a gradient gets it, as torch's autograd gives it."""
    grads = []
    for run in (attnc.torch.flex_attention, eager_attention):
        table = TABLE.clone().requires_grad_()
        q, k, v = qkv(29, 41)
        options = {"enable_gqa": True} if run is attnc.torch.flex_attention else {}
        o = run(q, k, v, score_mod=lambda score, b, h, q_idx, kv_idx:
                score + table[h, q_idx - kv_idx + 64], mask_mod=None, **options)
        o.pow(2).sum().backward()
        grads.append(table.grad)
    torch.testing.assert_close(grads[0], grads[1], atol=5e-5, rtol=1e-4)


def test_a_block_mask_and_a_scale_as_torch_takes_them():
    q, k, v = qkv(40, 40, heads=4, kv_heads=4)
    block_mask = attnc.torch.create_block_mask(causal, B, 4, 40, 40, device="cpu")
    torch_mask = torch_flex.create_block_mask(causal, B, 4, 40, 40, device="cpu")
    expected = torch_flex.flex_attention(q, k, v, block_mask=torch_mask, scale=0.3)
    for mask in (block_mask, torch_mask):
        torch.testing.assert_close(attnc.torch.flex_attention(q, k, v, block_mask=mask,
                                                              scale=0.3), expected)


def test_bf16(score_mod=softcap_alibi, mask_mod=causal):
    q, k, v = qkv(45, 45, d=32, dtype=torch.bfloat16)
    o = attnc.torch.flex_attention(q, k, v, score_mod=score_mod, mask_mod=mask_mod,
                                   enable_gqa=True)
    assert o.dtype == torch.bfloat16
    expected = torch_reference(*(t.float() for t in (q, k, v)), score_mod, mask_mod)
    torch.testing.assert_close(o.float(), expected, atol=2e-2, rtol=2e-2)


def test_new_lengths_never_compile_again():
    documents = lambda length: torch.arange(length).repeat(B, 1) // 10

    def run(length):
        doc = documents(length)
        same_document = lambda b, h, q_idx, kv_idx: doc[b, q_idx] == doc[b, kv_idx]
        q, k, v = qkv(length, length, seed=length)
        torch.testing.assert_close(
            attnc.torch.flex_attention(q, k, v, mask_mod=same_document, enable_gqa=True),
            torch_reference(q, k, v, None, same_document), atol=3e-5, rtol=1e-4)

    run(30)
    compiled = len(os.listdir(attnc.cache_dir()))
    for length in (47, 64):
        run(length)
    assert len(os.listdir(attnc.cache_dir())) == compiled


def test_threads_trace_their_own_callables():
    """Each thread's trace has its own captures: two threads tracing at once, each with its own
    bias table, each get their own result."""
    tables = [torch.randn(H, 2 * 64 + 1, generator=generator) for _ in range(2)]
    q, k, v = qkv(21, 21)
    expected, results = [], [None, None]

    def mod_for(table):
        return lambda score, b, h, q_idx, kv_idx: score + table[h, q_idx - kv_idx + 64]

    for table in tables:
        expected.append(torch_reference(q, k, v, mod_for(table), None))

    def run(index):
        for _ in range(20):
            results[index] = attnc.torch.flex_attention(q, k, v, score_mod=mod_for(
                tables[index]), enable_gqa=True)

    workers = [threading.Thread(target=run, args=(index,)) for index in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for result, want in zip(results, expected):
        torch.testing.assert_close(result, want, atol=3e-5, rtol=1e-4)


def test_the_traced_spec_names_what_the_callable_captured():
    from attnc import _trace
    score, mask, captures = _trace.trace(softcap_alibi, prefix_lm, {"Tq": 9, "Tk": 9})
    assert "f_CAP * tanh" in score and "f_SLOPES[clamp(h, 0, 4 - 1)]" in score
    assert mask == "((kv_idx < f_PREFIX[clamp(b, 0, 2 - 1)]) || (q_idx >= kv_idx))"
    assert captures.params == {"f_CAP": CAP}


@pytest.mark.parametrize("score_mod, message", [
    (lambda s, b, h, q, kv: torch.sin(s), "torch.sin is not in attnc's expression language"),
    (lambda s, b, h, q, kv: s if q > kv else 0, "a branch on a traced value"),
    (lambda s, b, h, q, kv: s + TABLE, r"a captured tensor of shape \[4, 129\] used as a value"),
    (lambda s, b, h, q, kv: s + TABLE[h], r"shape \[4, 129\] read as \[h\]"),
    (lambda s, b, h, q, kv: s + (q & kv), "'&' of int and int: attnc has no bitwise operators"),
    (lambda s, b, h, q, kv: s ** 3, r"x \*\* 3"),
    (lambda s, b, h, q, kv: s + ~q, "~ or logical_not of an int"),
    (lambda s, b, h, q, kv: s + (q ^ kv), "'\\^': attnc's expressions have no bitwise"),
    (lambda s, b, h, q, kv: s * s.shape[0], r"score.shape of a traced value"),
    (lambda s, b, h, q, kv: q > kv, "score_mod returned a bool"),
])
def test_what_attnc_cannot_express_is_named(score_mod, message):
    with pytest.raises(attnc.torch.TraceError, match=message):
        attnc.torch.flex_attention(*qkv(5, 5), score_mod=score_mod, enable_gqa=True)


@pytest.mark.parametrize("call, message", [
    (lambda q, k, v: attnc.torch.flex_attention(q, k, v), "query has 4 heads and key 2"),
    (lambda q, k, v: attnc.torch.flex_attention(q[0], k, v), "query must be a 4-d torch tensor"),
    (lambda q, k, v: attnc.torch.flex_attention(q.double(), k.double(), v.double(),
                                                enable_gqa=True), "one dtype of float32"),
    (lambda q, k, v: attnc.torch.flex_attention(
        q, k, v, block_mask=attnc.torch.create_block_mask(causal, B, H, 5, 5), mask_mod=causal,
        enable_gqa=True), "block_mask or mask_mod, not both"),
])
def test_bad_calls_are_value_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call(*qkv(5, 5))
