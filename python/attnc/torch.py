"""attnc in PyTorch.

    import attnc.torch
    o = attnc.torch.attention(q, k, v, spec="heads=8 kv_heads=2 d_k=64 mask=causal")
    o = attnc.torch.attention(q, k, v, spec="heads=8 d_k=64 mask=padding", lengths=lengths)

    # FlexAttention's surface, compiled ahead of time by attnc:
    def rel_bias(score, b, h, q_idx, kv_idx):
        return score + bias[h, q_idx - kv_idx + 128]
    mask = attnc.torch.create_block_mask(lambda b, h, q, kv: q >= kv, B, H, L, S)
    o = attnc.torch.flex_attention(q, k, v, score_mod=rel_bias, block_mask=mask)

`attention` is the operator attnc::attention (torch.compile and torch.export keep it);
`flex_attention` traces its callables into a spec (attnc._trace) and runs it through the same
operator."""
from ._flex import BlockMask, create_block_mask, flex_attention
from ._operator import attention
from ._trace import TraceError

__all__ = ["BlockMask", "TraceError", "attention", "create_block_mask", "flex_attention"]
