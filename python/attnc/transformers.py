"""attnc as a transformers attention implementation. Importing this module registers "attnc"
with transformers' AttentionInterface (the attention) and AttentionMaskInterface (the masks it
is given: sdpa's, a bool keep-mask [B, 1, Tq, Tk] or none), so

    import attnc.transformers
    model = AutoModel.from_pretrained(name, attn_implementation="attnc")

runs the model's attention in attnc kernels: causal masks for decoders, padding from
attention_mask, GQA, the model's scale and softcap. Each distinct attention (heads, head dims,
dtype, mask kind) compiles once; sequence lengths and batch sizes never compile again."""
import torch
import transformers
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from ._operator import SPEC_DTYPES, attention

NAME = "attnc"


def attnc_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                    is_causal=None, **kwargs):
    """transformers' attention interface: query [B, H, Tq, d], key and value [B, H_kv, Tk, d]
    in, the output [B, Tq, H, d] and no weights out."""
    _refuse_what_attnc_lacks(module, query, dropout, kwargs)
    keys = ["heads=%d" % query.shape[1], "kv_heads=%d" % key.shape[1], "d_k=%d" % query.shape[3],
            "d_v=%d" % value.shape[3], "dtype=%s" % SPEC_DTYPES[query.dtype], "layout=bshd"]
    if scaling is not None:
        keys.append("scale=%r" % float(scaling))
    if kwargs.get("softcap") is not None:
        keys.append("softcap=%r" % float(kwargs["softcap"]))
    named = {}
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    if attention_mask is not None:
        keys.append("mask=tensor")
        named["mask"] = _keep_mask(attention_mask[..., :key.shape[2]])  # as sdpa slices it
    elif causal and query.shape[2] > 1:  # as sdpa's is_causal: no cache before the rows
        keys += ["mask=causal", "causal_align=top_left"]
    output = attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                       spec=" ".join(keys), **named)
    return output, None


def _refuse_what_attnc_lacks(module, query, dropout, kwargs):
    if query.dtype not in SPEC_DTYPES:
        raise ValueError("attnc attention: the model runs in %s; attnc's kernels take float32, "
                         "float16 and bfloat16" % query.dtype)
    if module.training and dropout > 0:
        raise ValueError("attnc attention: dropout %g while training; attnc's dropout draws its "
                         "mask from the spec's seed, the same mask at every step, where "
                         "transformers draws a new one each step: train with the model's "
                         "attention dropout at 0, or another attn_implementation" % dropout)
    for name in ("position_bias", "s_aux"):
        if kwargs.get(name) is not None:
            raise ValueError("attnc attention: the model passes %s, which the attnc "
                             "implementation does not take yet" % name)


def _keep_mask(mask):
    """transformers' mask as attnc's: nonzero keeps a score. A bool mask keeps where True; an
    additive float mask keeps where it is 0 and must be 0 or hugely negative everywhere."""
    if mask.dtype == torch.bool:
        return mask.to(torch.uint8)
    keep = mask == 0
    if not (keep | (mask <= torch.finfo(mask.dtype).min / 2)).all():
        raise ValueError("attnc attention: an additive mask with biases other than 0 and -inf; "
                         "attnc takes keep-masks")
    return keep.to(torch.uint8)


transformers.AttentionInterface.register(NAME, attnc_attention)
AttentionMaskInterface.register(NAME, sdpa_mask)
