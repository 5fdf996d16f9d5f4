"""attnc.torch.flex_attention: torch's FlexAttention surface on attnc's kernels. The callables
are traced into a spec's score_mod and mask_mod (attnc._trace), the spec is compiled once per
distinct trace and cached (attnc.compile), and the call runs through the attnc::attention
operator with the captured tensors as aux inputs. Sequence lengths are run-time sizes, so new
lengths never compile again."""
import collections

import torch

from . import _trace
from ._operator import SPEC_DTYPES, attention

BlockMask = collections.namedtuple("BlockMask", "mask_mod B H Q_LEN KV_LEN")
BlockMask.__doc__ = """create_block_mask's result: the mask_mod and the sizes it was made for.
attnc finds the blocks a mask skips when it compiles the mask_mod, so there is no block table;
torch's own BlockMask is taken too (its mask_mod is what attnc reads)."""


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device=None, BLOCK_SIZE=None, _compile=None):
    """torch.nn.attention.flex_attention.create_block_mask's signature; device and BLOCK_SIZE are
    taken and ignored (attnc's kernels pick their own blocks)."""
    return BlockMask(mask_mod, B, H, Q_LEN, KV_LEN)


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None,
                   enable_gqa=False, return_lse=False, kernel_options=None, *, mask_mod=None):
    """torch.nn.attention.flex_attention.flex_attention on attnc: query [B, H, L, E], key
    [B, H_kv, S, E], value [B, H_kv, S, Ev]. mask_mod= may be given without a block mask;
    kernel_options (Inductor's tile sizes) are taken and ignored. Returns the output, and with
    return_lse the log-sum-exp [B, H, L] too."""
    _check_shapes(query, key, value, enable_gqa)
    if block_mask is not None:
        if mask_mod is not None:
            raise ValueError("flex_attention: give block_mask or mask_mod, not both")
        mask_mod = _mask_mod_of(block_mask)
    score, mask, captures = _trace.trace(score_mod, mask_mod, {"Tq": query.shape[2],
                                                               "Tk": key.shape[2]})
    spec = _spec(query, key, value, scale, return_lse, score, mask, captures)
    aux = {name: _aux_tensor(tensor, query.device) for name, (tensor, _) in captures.aux.items()}
    return attention(query, key, value, spec=spec, **aux)


def _mask_mod_of(block_mask):
    """The mask_mod attnc compiles. A torch BlockMask made from block indices alone
    (BlockMask.from_kv_blocks) keeps its sparsity in the indices and a mask_mod that keeps
    everything: attnc would drop the sparsity, so it is refused."""
    mask_mod = block_mask.mask_mod
    if getattr(mask_mod, "__name__", "") == "noop_mask" and block_mask.sparsity() > 0:
        raise ValueError("flex_attention: this BlockMask holds its sparsity in block indices "
                         "only (its mask_mod keeps everything); attnc compiles the mask_mod: "
                         "make the mask with create_block_mask(mask_mod, ...)")
    return mask_mod


def _check_shapes(query, key, value, enable_gqa):
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if not isinstance(tensor, torch.Tensor) or tensor.dim() != 4:
            raise ValueError("flex_attention: %s must be a 4-d torch tensor [B, H, T, d]" % name)
    heads, kv_heads = query.shape[1], key.shape[1]
    if value.shape[1] != kv_heads or key.shape[2] != value.shape[2]:
        raise ValueError("flex_attention: key %s and value %s differ in heads or length"
                         % (list(key.shape), list(value.shape)))
    if heads != kv_heads and not (enable_gqa and heads % kv_heads == 0):
        raise ValueError("flex_attention: query has %d heads and key %d; they must be equal, or "
                         "enable_gqa=True with a multiple" % (heads, kv_heads))
    if query.dtype not in SPEC_DTYPES or key.dtype != query.dtype or value.dtype != query.dtype:
        raise ValueError("flex_attention: query, key and value must share one dtype of float32, "
                         "float16 and bfloat16; got %s, %s, %s"
                         % (query.dtype, key.dtype, value.dtype))


def _spec(query, key, value, scale, return_lse, score, mask, captures):
    """The spec as text, which attnc.compile looks up without parsing once it has seen it."""
    words = ["variant=sdpa", "heads=%d" % query.shape[1], "kv_heads=%d" % key.shape[1],
             "d_k=%d" % query.shape[3], "d_v=%d" % value.shape[3],
             "dtype=%s" % SPEC_DTYPES[query.dtype], "layout=bhsd",
             "lse=%s" % ("true" if return_lse else "false")]
    if scale is not None:
        words.append("scale=%r" % float(scale))
    if score is not None:
        words.append('score_mod="%s"' % score)
    if mask is not None:
        words.append('mask_mod="%s"' % mask)
    if captures.params:
        words.append('params="%s"' % " ".join("%s=%r" % item for item in captures.params.items()))
    if captures.aux:
        words.append('aux="%s"' % " ".join(declaration for _, declaration in
                                           captures.aux.values()))
    return " ".join(words)


def _aux_tensor(tensor, device):
    """A captured tensor as its aux argument: f32, or i32 for integers and bools, contiguous."""
    element = torch.float32 if tensor.is_floating_point() else torch.int32
    return tensor.to(device=device, dtype=element).contiguous()
