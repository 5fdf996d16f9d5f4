"""attnc.torch.attention, the attnc::attention operator: eager against torch's SDPA and the f64
reference, torch.compile(fullgraph=True) with changing lengths, torch.export, and gradients
through the backward entry."""
import os
import subprocess
import sys

import numpy
import pytest
import torch
import torch.nn.functional as F

import attnc
import attnc.torch

GQA_CAUSAL = "heads=4 kv_heads=2 d_k=16 mask=causal"
SAVED = ("q_proj", "k_proj", "v_proj", "o_heads")  # mha's outputs under save_projections


def qkv(seq_q, seq_k, heads=4, kv_heads=2, d=16, dtype=torch.float32, batch=2, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, heads, seq_q, d, generator=generator).to(dtype),
            torch.randn(batch, kv_heads, seq_k, d, generator=generator).to(dtype),
            torch.randn(batch, kv_heads, seq_k, d, generator=generator).to(dtype))


def test_eager_matches_torchs_sdpa():
    q, k, v = qkv(37, 37)
    o = attnc.torch.attention(q, k, v, spec=GQA_CAUSAL)
    assert isinstance(o, torch.Tensor) and o.dtype == torch.float32 and o.shape == q.shape
    torch.testing.assert_close(o, F.scaled_dot_product_attention(
        q, k, v, is_causal=True, enable_gqa=True), atol=2e-5, rtol=1e-4)


def test_odd_shapes_and_named_inputs_match_the_reference():
    """Tq != Tk (bottom-right causal, the first rows fully masked), padding lengths by name,
    lse as a second output."""
    spec = "heads=4 kv_heads=2 d_k=16 mask=causal+padding lse=true"
    q, k, v = qkv(19, 7)
    lengths = torch.tensor([7, 4], dtype=torch.int32)
    o, lse = attnc.torch.attention(q, k, v, spec=spec, lengths=lengths)
    expected = attnc.compile(spec, backend="reference")(q, k, v, lengths=lengths)
    torch.testing.assert_close(o, expected.o, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(lse, expected.lse, atol=2e-5, rtol=1e-4)


def test_bf16_tensors_give_bf16_outputs():
    q, k, v = qkv(33, 33, d=32, dtype=torch.bfloat16)
    o = attnc.torch.attention(q, k, v, spec="heads=4 kv_heads=2 d_k=32 dtype=bf16")
    assert o.dtype == torch.bfloat16
    torch.testing.assert_close(o.float(), F.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), enable_gqa=True), atol=2e-2, rtol=2e-2)


def test_the_kernels_refusals_reach_the_caller():
    q, k, v = qkv(5, 5)
    with pytest.raises(attnc.TensorError, match="'q'.*f64"):
        attnc.torch.attention(q.double(), k, v, spec=GQA_CAUSAL)


def test_torch_compile_keeps_the_operator_and_lengths_never_recompile():
    def block(q, k, v):
        return attnc.torch.attention(torch.tanh(q), k, v, spec=GQA_CAUSAL) * 2

    compiled = torch.compile(block, fullgraph=True, dynamic=True)
    for seq in (17, 23, 40):  # none equal to d (16): Dynamo would tie the two sizes
        q, k, v = qkv(seq, seq, seed=seq)
        with torch._dynamo.config.patch(error_on_recompile=seq != 17):
            torch.testing.assert_close(compiled(q, k, v), block(q, k, v))
    compiled_for_host = [entry for entry in os.listdir(attnc.cache_dir())
                         if entry.startswith(attnc.Spec(GQA_CAUSAL).hash + "-auto-host")]
    assert len(compiled_for_host) == 1


def test_torch_export_exports_the_operator():
    class Block(torch.nn.Module):
        def forward(self, q, k, v):
            return attnc.torch.attention(q, k, v, spec=GQA_CAUSAL)

    q, k, v = qkv(8, 8)
    exported = torch.export.export(Block(), (q, k, v))
    assert "attnc.attention" in str(exported.graph)
    q, k, v = qkv(8, 8, seed=1)
    torch.testing.assert_close(exported.module()(q, k, v), Block()(q, k, v))


def test_an_eager_call_runs_without_importing_dynamo():
    """A custom op's first call imports torch._dynamo (over a second); an eager call nothing
    observes runs the kernel directly."""
    source = ("import sys, torch, attnc.torch\n"
              "q = torch.rand(1, 4, 8, 16); k = torch.rand(1, 2, 8, 16)\n"
              "attnc.torch.attention(q, k, k, spec=%r)\n"
              "print('torch._dynamo' in sys.modules)" % GQA_CAUSAL)
    result = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr


def test_the_profiler_sees_the_operator():
    q, k, v = qkv(8, 8)
    with torch.profiler.profile() as profile:
        attnc.torch.attention(q, k, v, spec=GQA_CAUSAL)
    assert "attnc::attention" in {event.name for event in profile.events()}


def test_gradients_match_torchs_sdpa_and_lse_stays_hidden():
    """A gradient asked compiles the spec with backward=true (and lse=true, which the caller
    does not see); q's, k's and v's gradients are torch's, GQA's summed over each group."""
    q, k, v = (t.requires_grad_() for t in qkv(23, 23))
    o = attnc.torch.attention(q, k, v, spec=GQA_CAUSAL)
    assert isinstance(o, torch.Tensor)
    grad_o = torch.randn_like(o)
    o.backward(grad_o)
    mine = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).backward(grad_o)
    for got, want in zip(mine, (q.grad, k.grad, v.grad)):
        torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)


def test_gradients_under_torch_compile():
    """attnc::attention_backward is an operator with a fake implementation too, so the joint
    graph traces; the gradients are eager attnc's."""
    def loss(q, k, v):
        return (attnc.torch.attention(q, k, v, spec=GQA_CAUSAL) ** 2).sum()

    compiled = torch.compile(loss, fullgraph=True)
    for length in (11, 16):
        inputs = [t.requires_grad_() for t in qkv(length, length, seed=length)]
        compiled(*inputs).backward()
        got = [t.grad for t in inputs]
        inputs = [t.detach().requires_grad_() for t in inputs]
        loss(*inputs).backward()
        for a, b in zip(got, (t.grad for t in inputs)):
            torch.testing.assert_close(a, b)


def test_a_cache_runs_forward_in_grad_mode_and_its_backward_says_why_not():
    """A decode step run with gradients on still runs on the fast kernel; only its backward is
    refused, naming the key (a KV cache is inference's)."""
    spec = "heads=2 d_k=8 kv_cache=contiguous"
    q, k, v = qkv(1, 9, heads=2, kv_heads=2, d=8)
    seq_lens = torch.tensor([9, 4], dtype=torch.int32)
    o = attnc.torch.attention(q.requires_grad_(), k, v, spec=spec, seq_lens=seq_lens)
    torch.testing.assert_close(o.detach(), attnc.torch.attention(
        q.detach(), k, v, spec=spec, seq_lens=seq_lens))
    with pytest.raises(attnc.SpecError, match="backward=true"):
        o.sum().backward()


def test_gradients_of_named_tensors_and_the_refused_lse_gradient():
    spec = "heads=2 d_k=8 bias=true sinks=true lse=true"
    q, k, v = qkv(5, 7, heads=2, kv_heads=2, d=8)
    bias = torch.randn(2, 2, 5, 7, requires_grad=True)
    sinks = torch.randn(2, requires_grad=True)
    o, lse = attnc.torch.attention(q, k, v, spec=spec, bias=bias, sinks=sinks)
    (o * o).sum().backward()
    assert bias.grad.shape == bias.shape and sinks.grad.shape == sinks.shape
    expected = attnc.compile(spec + " backward=true", backend="reference").backward(
        q, k, v, bias=bias.detach(), sinks=sinks.detach(), o=o.detach(), lse=lse.detach(),
        grad_o=2 * o.detach())
    torch.testing.assert_close(bias.grad, expected.grad_bias)
    torch.testing.assert_close(sinks.grad, expected.grad_sinks)
    o, lse = attnc.torch.attention(q, k, v, spec=spec, bias=bias, sinks=sinks)
    with pytest.raises(RuntimeError, match="takes dL/do only"):
        lse.sum().backward()


def test_the_mlir_backward_is_the_same_at_any_thread_count():
    """Each gradient element is one task's sum in a fixed order, so its bits do not depend on
    the threads: with few (batch, KV head) pairs (the keys split into chunks, each with its own
    copy of dQ, summed in order), with many, and with a broadcast bias and a table (the bias's
    columns summed in place by one task each, the table's copies summed in task order)."""
    table = (' aux="rel:f32[heads,33]" '
             'score_mod="score + rel[h, clamp(kv_idx - qpos, -16, 16) + 16]"')
    for batch, heads, kv_heads, modifiers in ((1, 2, 1, "mask=causal sinks=true"),
                                              (4, 4, 2, "dropout=0.1 seed=3"),
                                              (3, 4, 2, "bias=true mask=causal" + table)):
        spec = "heads=%d kv_heads=%d d_k=16 %s" % (heads, kv_heads, modifiers)
        kernel = attnc.compile(spec + " lse=true backward=true", backend="mlir")
        q, k, v = qkv(77, 91, heads=heads, kv_heads=kv_heads, batch=batch)
        named = {"sinks": torch.randn(heads)} if "sinks" in spec else {}
        if "bias" in spec:
            named.update(bias=torch.randn(1, 1, 77, 91), rel=torch.randn(heads, 33))
        o, lse = kernel(q, k, v, **named)
        grad_o = torch.randn_like(o)
        runs = [kernel.backward(q, k, v, o=o, lse=lse, grad_o=grad_o, threads=threads, **named)
                for threads in (1, 2, 3)]
        for name, first, *others in zip(kernel.gradients, *runs):
            for other in others:
                assert torch.equal(first, other), (spec, name)


def mha_in_torch(x_q, x_k, x_v, w_q, w_k, w_v, w_o, heads, kv_heads):
    """attnc's mha (docs/spec.md) in PyTorch: Q = x_q W_Q per head, causal SDPA with GQA, then
    Concat(heads) W_O."""
    def split(rows, count):
        return rows.unflatten(-1, (count, -1)).transpose(1, 2)

    o = F.scaled_dot_product_attention(split(x_q @ w_q, heads), split(x_k @ w_k, kv_heads),
                                       split(x_v @ w_v, kv_heads), is_causal=True,
                                       enable_gqa=True)
    return o.transpose(1, 2).flatten(2) @ w_o


def test_the_mha_backward_matches_torch_autograd_and_any_thread_count():
    """mha's backward on the MLIR kernel (the projections recomputed and taken back, the
    weights' gradients each one ordered sum over (b, t)) against torch's autograd in f64 of the
    same module, bit-identical at 1, 2 and 3 threads."""
    heads, kv_heads, d_model = 4, 2, 40
    kernel = attnc.compile("variant=mha heads=%d kv_heads=%d d_k=16 d_model=%d mask=causal "
                           "lse=true backward=true" % (heads, kv_heads, d_model), backend="mlir")
    generator = torch.Generator().manual_seed(5)
    inputs = [torch.randn(3, 45, d_model, generator=generator) for _ in range(3)]
    weights = {name: torch.randn(d_model if name != "w_o" else heads * 16,
                                 (heads if name in ("w_q", "w_o") else kv_heads) * 16
                                 if name != "w_o" else d_model, generator=generator) * 0.2
               for name in ("w_q", "w_k", "w_v", "w_o")}
    o, lse = kernel(*inputs, **weights)
    grad_o = torch.randn(o.shape, generator=generator)
    runs = [kernel.backward(*inputs, o=o, lse=lse, grad_o=grad_o, threads=threads, **weights)
            for threads in (1, 2, 3)]
    for name, first, *others in zip(kernel.gradients, *runs):
        for other in others:
            assert torch.equal(first, other), name

    leaves = [t.double().requires_grad_() for t in inputs + list(weights.values())]
    expected = mha_in_torch(*leaves, heads, kv_heads)
    torch.testing.assert_close(o.double(), expected.detach(), atol=1e-4, rtol=1e-4)
    expected.backward(grad_o.double())
    names = ["grad_q", "grad_k", "grad_v"] + ["grad_" + name for name in weights]
    for name, leaf in zip(names, leaves):
        torch.testing.assert_close(getattr(runs[0], name).double(), leaf.grad, atol=1e-4,
                                   rtol=1e-4, msg=name)


def test_mha_trains_through_the_operator_on_the_mlir_backward():
    """loss.backward() through attnc.torch.attention of an mha spec, its weights passed by name:
    the inputs' and weights' gradients are the f64 autograd's of the same block. The forward
    runs with save_projections (the caller still gets y alone) and the backward reads them."""
    heads, d_model = 2, 16
    spec = "variant=mha heads=%d d_k=8 d_model=%d mask=causal" % (heads, d_model)
    assert attnc._operator._for_training(spec, "cpu")[2], "mha on the CPU saves projections"
    generator = torch.Generator().manual_seed(9)
    inputs = [torch.randn(2, 9, d_model, generator=generator).requires_grad_() for _ in range(3)]
    weights = {name: (torch.randn(d_model, d_model, generator=generator) * 0.3).requires_grad_()
               for name in ("w_q", "w_k", "w_v", "w_o")}
    y = attnc.torch.attention(*inputs, spec=spec, **weights)
    assert torch.is_tensor(y) and y.shape == (2, 9, d_model)
    y.square().sum().backward()
    leaves = [t.detach().double().requires_grad_() for t in inputs + list(weights.values())]
    mha_in_torch(*leaves, heads, heads).square().sum().backward()
    for ours, theirs in zip(inputs + list(weights.values()), leaves):
        torch.testing.assert_close(ours.grad.double(), theirs.grad, atol=1e-4, rtol=1e-4)


def test_mha_saved_projections_are_what_its_backward_reads():
    """save_projections=true: the forward also returns Q, K, V (before RoPE) and the heads'
    output, as torch computes them, and the backward reads them: with them its gradients are
    torch's f64 autograd's; with a saved tensor altered they change (nothing recomputed)."""
    heads, kv_heads, d_model, d = 4, 2, 24, 8
    kernel = attnc.compile("variant=mha heads=%d kv_heads=%d d_k=%d d_model=%d mask=causal "
                           "rope=true lse=true backward=true save_projections=true"
                           % (heads, kv_heads, d, d_model), backend="mlir")
    generator = torch.Generator().manual_seed(11)
    inputs = [torch.randn(2, 13, d_model, generator=generator) for _ in range(3)]
    weights = {name: torch.randn(d_model if name != "w_o" else heads * d,
                                 (heads if name in ("w_q", "w_o") else kv_heads) * d
                                 if name != "w_o" else d_model, generator=generator) * 0.3
               for name in ("w_q", "w_k", "w_v", "w_o")}
    out = kernel(*inputs, **weights)
    for name, x, w in (("q_proj", inputs[0], "w_q"), ("k_proj", inputs[1], "w_k"),
                       ("v_proj", inputs[2], "w_v")):
        torch.testing.assert_close(getattr(out, name), x @ weights[w], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.o_heads @ weights["w_o"], out.o, atol=1e-5, rtol=1e-5)

    grad_o = torch.randn(out.o.shape, generator=generator)
    forward = {name: getattr(out, name) for name in ("o", "lse") + SAVED}
    grads = kernel.backward(*inputs, grad_o=grad_o, **forward, **weights)
    reference = attnc.compile("variant=mha heads=%d kv_heads=%d d_k=%d d_model=%d mask=causal "
                            "rope=true lse=true backward=true" % (heads, kv_heads, d, d_model),
                            backend="reference")
    expected = reference.backward(*inputs, grad_o=grad_o, o=out.o, lse=out.lse, **weights)
    for name in kernel.gradients:
        torch.testing.assert_close(getattr(grads, name), getattr(expected, name), atol=1e-4,
                                   rtol=1e-4, msg=name)
    for name in SAVED:
        altered = dict(forward, **{name: forward[name] * 1.5})
        changed = kernel.backward(*inputs, grad_o=grad_o, **altered, **weights)
        assert not torch.allclose(changed.grad_w_o if name == "o_heads" else changed.grad_q,
                                  grads.grad_w_o if name == "o_heads" else grads.grad_q), name


def test_tensors_that_require_gradients_run_forward_in_every_dtype():
    """DLPack refuses a tensor that requires a gradient: the kernel's inputs are detached."""
    for dtype, spec in ((torch.float32, GQA_CAUSAL), (torch.bfloat16, GQA_CAUSAL.replace(
            "d_k=16", "d_k=32 dtype=bf16"))):
        q, k, v = (t.requires_grad_() for t in qkv(9, 9, d=16 if dtype == torch.float32 else 32,
                                                    dtype=dtype))
        o = attnc.torch.attention(q, k, v, spec=spec)
        assert o.requires_grad and o.dtype == dtype
        torch.testing.assert_close(o.detach().float(), F.scaled_dot_product_attention(
            q.detach().float(), k.detach().float(), v.detach().float(), is_causal=True,
            enable_gqa=True), atol=2e-2, rtol=2e-2)


def test_numpy_kernels_return_torch_for_torch():
    q, k, v = qkv(6, 6)
    o = attnc.compile(GQA_CAUSAL)(q, k, v)
    assert isinstance(o, torch.Tensor)
    numpy.testing.assert_array_equal(o.numpy(), attnc.compile(GQA_CAUSAL)(
        q.numpy(), k.numpy(), v.numpy()))
