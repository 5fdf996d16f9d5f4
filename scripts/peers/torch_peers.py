"""PyTorch 2.x on the CPU, two ways users run attention there:
  - `Sdpa`: F.scaled_dot_product_attention under sdpa_kernel(FLASH_ATTENTION), its fused CPU
    flash kernel; where that kernel refuses a case, PyTorch's own choice runs and the table says
    which kernel that was (read from the profiler, never assumed);
  - `Flex`: torch.compile(flex_attention) with create_block_mask, the masks, ALiBi and softcap
    written as mask_mod / score_mod, the same functions attnc compiles from expressions
    (FlexAttention's CPU path: Inductor's C++ template, compiled once; Inductor's cache keeps it
    for the next processes);
and attnc's FlexAttention front on the same callables:
  - `AttncFlex`: attnc.torch.flex_attention (the callables traced into a spec, its kernel
    compiled ahead of time and cached on disk), on torch's thread count;
the backward of the first, what training on a CPU runs:
  - `SdpaBackward`: dq, dk, dv of the flash kernel's forward (torch's CPU flash backward);
  - `MhaBackward`: attnc's variant=mha written as a PyTorch user writes the block (projections
    as matmuls, flash SDPA, W_O), the inputs' and weights' gradients by autograd;
and the whole multi-head block attnc's variant=mha fuses:
  - `MultiheadAttention`: nn.MultiheadAttention without biases in inference_mode, its fast path
    (the projections as GEMMs around its fused SDPA).
Queries sit at the last tq of tk positions (attnc's bottom-right alignment); PyTorch's is_causal
is top-left, so it is used only where tq == tk, and a decoding row (tq = 1) needs no mask."""
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import cases
import peer_registry

TORCH_TYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def torch_inputs(case):
    return [torch.from_numpy(x).to(TORCH_TYPES[case["dtype"]]) for x in cases.qkv(case)]


def kernel_that_ran(call):
    """The aten op PyTorch dispatched scaled_dot_product_attention to, from the profiler."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        call()
    names = [e.name for e in profile.events() if e.name.startswith("aten::_scaled_dot_product")]
    return names[-1].removeprefix("aten::") if names else "unknown"


class TorchPeer:
    """What the peers on torch share: its thread count and version."""

    def __init__(self, threads):
        torch.set_num_threads(threads)
        self.version = "torch " + torch.__version__


def require_self_attention(case):
    """PyTorch's is_causal is top-left: the blocks are timed unmasked or square causal."""
    if case["tq"] != case["tk"] or case["mask"] not in ("none", "causal"):
        raise peer_registry.Unsupported("unmasked or square causal only")


class Sdpa(TorchPeer):
    def prepare(self, case):
        q, k, v = torch_inputs(case)
        options = {"enable_gqa": case["heads"] != case["kv_heads"]}
        square = case["tq"] == case["tk"]
        if case["mask"] == "causal" and square:
            options["is_causal"] = True
        elif cases.score_bias(case) is not None:
            options["attn_mask"] = torch.from_numpy(cases.score_bias(case)).to(q.dtype)
        elif case["mask"] != "none" and not (case["mask"] == "causal" and case["tq"] == 1):
            options["attn_mask"] = torch.from_numpy(cases.keep_matrix(case))

        def attention():
            with torch.no_grad():
                return F.scaled_dot_product_attention(q, k, v, **options)

        def flash():
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                return attention()
        try:
            flash()
            return flash, kernel_that_ran(flash)
        except RuntimeError as refusal:
            reason = str(refusal).strip().splitlines()[0][:80]
            return attention, "%s (flash refused: %s)" % (kernel_that_ran(attention), reason)


class SdpaBackward:
    """The backward of `Sdpa`'s call (its flash kernel where it takes the case): dq, dk and dv
    from a random dL/do, the forward run once beforehand and its graph kept, so each timed call
    is the backward alone, as attnc's backward entry is timed (`attnc bench --backward`)."""

    def __init__(self, threads):
        self.forward = Sdpa(threads)
        self.version = self.forward.version

    def prepare(self, case):
        if case["mask"] not in ("none", "causal") or (case["mask"] == "causal"
                                                       and case["tq"] != case["tk"]):
            raise peer_registry.Unsupported("the backward cases are unmasked or square causal")
        q, k, v = (t.requires_grad_() for t in torch_inputs(case))
        options = {"enable_gqa": case["heads"] != case["kv_heads"],
                   "is_causal": case["mask"] == "causal"}
        learned = [q, k, v]
        # A learnable bias [1, H, Tq, Tk] (an additive float attn_mask): the CPU flash kernel
        # has no gradient for it, so PyTorch takes its math path.
        backends = [SDPBackend.FLASH_ATTENTION]
        if case.get("bias"):
            options["attn_mask"] = torch.randn(1, case["heads"], case["tq"], case["tk"],
                                               requires_grad=True)
            learned.append(options["attn_mask"])
            backends = [SDPBackend.MATH]
        with sdpa_kernel(backends):
            o = F.scaled_dot_product_attention(q, k, v, **options)
        grad_o = torch.randn_like(o)

        def backward():
            return torch.autograd.grad(o, learned, grad_o, retain_graph=True)
        return backward, o.grad_fn.name()


class MhaBackward(TorchPeer):
    """The backward of attnc's variant=mha (Q = x_q W_Q per head, K and V likewise with GQA,
    SDPA, Concat(heads) W_O; no biases) as PyTorch eager runs it: the three inputs' and four
    weights' gradients from a random dL/dy, the forward (its flash SDPA) run once beforehand
    and its graph kept, so each timed call is the backward alone, as `attnc bench --backward`
    times attnc's. Cases name `d_model`, `heads`, `kv_heads` and `d`; mask none or causal with
    tq == tk."""

    def prepare(self, case):
        require_self_attention(case)
        torch.manual_seed(0)
        heads, kv_heads, d, model = case["heads"], case["kv_heads"], case["d"], case["d_model"]
        x = [torch.randn(1, case["tq"], model).requires_grad_() for _ in range(3)]
        w = [(torch.randn(model, n * d) * model ** -0.5).requires_grad_()
             for n in (heads, kv_heads, kv_heads)]
        w.append((torch.randn(heads * d, model) * (heads * d) ** -0.5).requires_grad_())

        def split(rows, count):
            return rows.unflatten(-1, (count, d)).transpose(1, 2)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            o = F.scaled_dot_product_attention(
                split(x[0] @ w[0], heads), split(x[1] @ w[1], kv_heads),
                split(x[2] @ w[2], kv_heads), is_causal=case["mask"] == "causal",
                enable_gqa=heads != kv_heads)
        y = o.transpose(1, 2).flatten(2) @ w[3]
        grad_y = torch.randn_like(y)

        def backward():
            return torch.autograd.grad(y, x + w, grad_y, retain_graph=True)
        return backward, "matmuls, %s, autograd" % o.grad_fn.name()


class Flex(TorchPeer):
    def __init__(self, threads):
        super().__init__(threads)
        # Each case's shapes and functions compile anew; past Dynamo's limit (8) FlexAttention
        # would run unfused, materialising the scores: a figure that is not FlexAttention's.
        torch._dynamo.config.recompile_limit = 1024
        warnings.filterwarnings("error", message="flex_attention called without torch.compile")
        self.compiled = torch.compile(flex_attention, dynamic=False)

    def prepare(self, case):
        return flex_call(self.compiled, case), "torch.compile(flex_attention)" + (
            ", create_block_mask" if flex_mask_mod(case) is not None else "")


class AttncFlex:
    def __init__(self, threads):
        import attnc
        import attnc.torch
        torch.set_num_threads(threads)  # attnc::attention runs on torch's thread count
        self.version = "attnc " + attnc.__version__
        self.flex_attention = attnc.torch.flex_attention

    def prepare(self, case):
        return flex_call(self.flex_attention, case), "attnc.torch.flex_attention"


class MultiheadAttention(TorchPeer):
    """Cases name `d_model` and `heads` (d = d_model / heads), self-attention on one input
    x [1, T, d_model]; mask none or causal (tq == tk)."""

    def prepare(self, case):
        require_self_attention(case)
        torch.manual_seed(0)
        block = torch.nn.MultiheadAttention(case["d_model"], case["heads"], bias=False,
                                            batch_first=True).eval()
        x = torch.randn(1, case["tq"], case["d_model"])
        options = {"need_weights": False}
        if case["mask"] == "causal":
            options["attn_mask"] = torch.nn.Transformer.generate_square_subsequent_mask(
                case["tq"])
            options["is_causal"] = True

        def attention():
            with torch.inference_mode():
                return block(x, x, x, **options)
        return attention, "nn.MultiheadAttention (inference_mode fast path)"


def flex_call(flex, case):
    """A call of FLEX (torch's flex_attention compiled, or attnc's) on the case's inputs with
    its mask as a block mask and ALiBi or softcap as a score_mod, the same callables for both."""
    q, k, v = torch_inputs(case)
    options = {"enable_gqa": case["heads"] != case["kv_heads"]}
    mask_mod = flex_mask_mod(case)
    if mask_mod is not None:
        options["block_mask"] = create_block_mask(mask_mod, 1, None, case["tq"], case["tk"],
                                                  device="cpu")
    score_mod = flex_score_mod(case)
    if score_mod is not None:
        options["score_mod"] = score_mod

    def attention():
        with torch.no_grad():
            return flex(q, k, v, **options)
    return attention


def flex_score_mod(case):
    """ALiBi's bias, a bias tensor read at each score, or tanh soft-capping as FlexAttention's
    score_mod, or None."""
    offset = case["tk"] - case["tq"]
    if case["mask"] == "alibi":
        slopes = torch.tensor(cases.alibi_slopes(case["heads"]), dtype=torch.float32)
        return lambda score, b, h, q_idx, kv_idx: score - slopes[h] * (
            q_idx + offset - kv_idx).abs()
    if case["mask"] == "bias":
        bias = torch.from_numpy(cases.score_bias(case))
        return lambda score, b, h, q_idx, kv_idx: score + bias[0, h, q_idx, kv_idx]
    if case["mask"] == "softcap":
        cap = case["softcap"]
        return lambda score, b, h, q_idx, kv_idx: cap * torch.tanh(score / cap)
    return None


def flex_mask_mod(case):
    """cases.keep_function on torch tensors, or None where every key is kept."""
    if case["mask"] in ("none", "bias") or (case["mask"] == "causal" and case["tq"] == 1):
        return None
    keep = cases.keep_function(case, torch.from_numpy)
    return lambda b, h, q_idx, kv_idx: keep(q_idx, kv_idx)
