//===- AttnOps.td - attn dialect operations ----------------------------------===//
#ifndef ATTN_OPS_TD
#define ATTN_OPS_TD

include "AttnBase.td"
include "AttnInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// The masks and score modifiers every attention op carries, with the same meaning everywhere:
// see attn.attention.
defvar Attn_ScoreAttrs = (ins
  F64Attr:$scale,
  DefaultValuedAttr<StrAttr, "\"bottom_right\"">:$causal_align
);

// A spec's score_mod or mask_mod, or dropout's factor, as a region: empty when the spec has
// none, else one block taking (score: f32, b, h, g, q_idx, kv_idx, qpos, Tq, Tk: i32) and
// yielding the modified score (f32), whether to keep it (i1) or the factor on its probability
// (f32), with scalar arith and math ops and attn.aux_load.
// Lowerings apply it elementwise to vectors of scores. The block ends in gpu.yield, not an
// attn terminator: the MLIR library (built by clang) resolves an op trait's TypeID by a type
// name that gcc, which builds this dialect, spells differently, so its verifier would not see
// the terminator trait of an attn op.
def Attn_ExpressionRegion : Region<CPred<"$_self.getBlocks().size() <= 1">,
                                   "an empty region or one block">;

def Attn_AttentionOp : Attn_Op<"attention",
                              [Pure, AttrSizedOperandSegments, AttrSizedResultSegments]> {
  let summary = "Scaled dot-product attention with masks and score modifiers";
  let description = [{
    For query head h (key/value head g = h / (H / H_kv)), query row i and key j:

    ```
    s_ij  = score_mod(scale * q_i . k_j)      // the score_mod region (identity when empty)
    keep  = mask_mod(i, j)                    // the mask_mod region (true when empty)
    lse_i = log sum_{j kept} exp(s_ij)
    o_i   = sum_{j kept} d_ij exp(s_ij - lse_i) v_j
    ```

    where d_ij is the `dropout` region's factor (1 when the region is empty): it weights the
    probabilities where they multiply v, not in lse.

    A row with no kept key gives `o_i = 0` and `lse_i = -inf`. Query row i sits at position
    `i + (Tk - Tq)` among the keys with `causal_align = "bottom_right"` (the default), at `i`
    with `"top_left"` (the region's `qpos`). Shapes are `[B, H, Tq, d_k]`, `[B, H_kv, Tk, d_k]`,
    `[B, H_kv, Tk, d_v]` for q, k, v and `[B, H, Tq, d_v]` for the output; `lse` is `[B, H, Tq]`
    in f32.

    Example:

    ```mlir
    %o = attn.attention %q, %k, %v {scale = 0.125 : f64}
        : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x64xf32>
        -> tensor<2x8x?x64xf32>
        mask_mod {
        ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %p: i32, %tq: i32, %tk: i32):
          %causal = arith.cmpi sle, %j, %p : i32
          gpu.yield %causal : i1
        }
    ```

    The regions are a spec's whole definition of its scores (docs/spec.md, Expressions): its
    built-in modifiers (softcap, ALiBi, the bias tensor) then its score_mod make `score_mod`,
    and its built-in masks (causal, padding, window, the tensor mask, the sparsity patterns)
    with its mask_mod make `mask_mod`, as Spec/BuiltinExpressions writes them. The lowerings
    classify key blocks from `mask_mod` alone (KeyRange.h, ExpressionBounds.h). The aux tensors
    the regions read are the `aux` operands, read by attn.aux_load (i8 ones are unsigned bytes,
    such as the tensor mask and the block_layout a block_sparse mask reads; f16 and bf16 ones,
    such as the bias in the spec's dtype, are read as such and widened by the region).

    `weights`, when present, holds p_ij = exp(s_ij - m_i) / L_i where the masks keep (i, j) and
    0 elsewhere ([B, heads, Tq, Tk] in f32): the probabilities before dropout, with m_i the
    row's largest kept score and L_i = sum_j exp(s_ij - m_i) over its kept keys (with a sink,
    below, both take it in), so that lse_i = m_i + log L_i.

    `rope` ("half" or "interleaved") rotates q_i at its position (above) and k_j at j before
    the product, pair p of the first `rope_dims` dims (default d_k) by the angle
    pos * rope_theta^(-2p / rope_dims) (attn.rope). With `query_ends` ([B] i32, a KV cache's
    seq_lens) it rotates q_i of batch b at i + query_ends[b] - Tq, the end of its sequence,
    and not the keys: a cache holds them rotated already.

    `sinks` ([heads] f32), when present, holds each head's attention sink: a logit that joins
    every row's softmax denominator with no value, so
    `o_i = sum_{j kept} d_ij exp(s_ij - lse_i) v_j` with
    `lse_i = log(exp(sinks[h]) + sum_{j kept} exp(s_ij))` (a row with no kept key gives `o_i = 0`,
    `lse_i = sinks[h]`).

    `pages(block_table, seq_lens)`, when present, makes key and value a paged KV cache viewed
    as [pages, H_kv, page_size, d]: key j of batch b is row j mod page_size of page
    block_table[b, j / page_size] (block_table [B, Tk / page_size] i32, so Tk is its width
    times page_size), for j < seq_lens[b] ([B] i32); the masks (mask_mod) keep no later key.

    `scales(key_scale, value_scale)`, when present, makes key and value a quantized cache (i8
    or f8E4M3FN elements): row j of KV head g is key_scale[., g, j] times its elements' values
    (the scales shaped as key and value without d: [B, H_kv, Tk], or [pages, H_kv, page_size]
    with pages).

    `score_weights` ([H_kv, H / H_kv, d_k], a float type), when present, makes the score Bahdanau's
    additive one: `s_ij = score_mod(scale * sum_c w[g, h mod (H / H_kv), c] tanh(q_i[c] +
    k_j[c]))`, q and k the hidden rows (W1 q and W2 k: the key then has one head per query
    head, [B, H, Tk, d_k], and only the value is shared by a KV group). The weights are
    grouped by KV head so that the ops after this one, which may lack the value, know the
    groups.
  }];

  let arguments = !con((ins
    RankedTensorOf<[AnyFloat]>:$query,
    RankedTensorOf<[AnyFloat, I8]>:$key,
    RankedTensorOf<[AnyFloat, I8]>:$value,
    Variadic<RankedTensorOf<[I8, I32, F16, BF16, F32]>>:$aux,
    Optional<RankedTensorOf<[F32]>>:$sinks,
    Optional<RankedTensorOf<[I32]>>:$block_table,
    Optional<RankedTensorOf<[I32]>>:$seq_lens,
    Optional<RankedTensorOf<[F32]>>:$key_scale,
    Optional<RankedTensorOf<[F32]>>:$value_scale,
    Optional<RankedTensorOf<[I32]>>:$query_ends,
    Optional<RankedTensorOf<[F32, F16, BF16]>>:$score_weights), Attn_ScoreAttrs, (ins
    OptionalAttr<StrAttr>:$rope,
    DefaultValuedAttr<F64Attr, "10000.0">:$rope_theta,
    OptionalAttr<I64Attr>:$rope_dims));
  let results = (outs
    RankedTensorOf<[AnyFloat]>:$output,
    Optional<RankedTensorOf<[F32]>>:$lse,
    Optional<RankedTensorOf<[F32]>>:$weights
  );
  let regions = (region Attn_ExpressionRegion:$score_mod, Attn_ExpressionRegion:$mask_mod,
                 Attn_ExpressionRegion:$dropout);

  let assemblyFormat = [{
    $query `,` $key `,` $value
    (`aux` `(` $aux^ `:` type($aux) `)`)?
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    (`pages` `(` $block_table^ `,` $seq_lens `:` type($block_table) `,` type($seq_lens) `)`)?
    (`scales` `(` $key_scale^ `,` $value_scale `:` type($key_scale) `,` type($value_scale) `)`)?
    (`query_ends` `(` $query_ends^ `:` type($query_ends) `)`)?
    (`score_weights` `(` $score_weights^ `:` type($score_weights) `)`)?
    attr-dict `:` type($query) `,` type($key) `,` type($value)
    `->` type($output) (`,` type($lse)^)? (`weights` type($weights)^)?
    (`score_mod` $score_mod^)? (`mask_mod` $mask_mod^)? (`dropout` $dropout^)?
  }];

  let hasVerifier = 1;
}

def Attn_AuxLoadOp
    : Attn_Op<"aux_load", [Pure, ParentOneOf<["AttentionOp", "OnlineUpdateOp", "WeightsOp",
                                         "BackwardOp"]>]> {
  let summary = "Reads an element of an aux tensor of the enclosing attention op";
  let description = [{
    In a score_mod or mask_mod region: element `[indices]` of the enclosing op's aux operand
    number `aux`, of its element type. The spec proved the indices inside the tensor; lowerings
    clamp them all the same, since they also evaluate the region for rows past Tq.

    ```mlir
    %doc = attn.aux_load 0[%b, %q_idx] : i32
    ```
  }];
  let arguments = (ins I64Attr:$aux, Variadic<I32>:$indices);
  let results = (outs AnyTypeOf<[I8, I32, F16, BF16, F32]>:$result);
  let assemblyFormat = "$aux `[` $indices `]` attr-dict `:` type($result)";
  let hasVerifier = 1;
}

include "AttnOnlineOps.td"
include "AttnOperandOps.td"
include "AttnLinearOps.td"
include "AttnBackwardOps.td"

#endif // ATTN_OPS_TD
