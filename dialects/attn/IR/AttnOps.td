//===- AttnOps.td - attn dialect operations ----------------------------------===//
#ifndef ATTN_OPS_TD
#define ATTN_OPS_TD

include "AttnBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// The masks and score modifiers every attention op carries, with the same meaning everywhere:
// see attn.attention.
defvar Attn_ScoreAttrs = (ins
  F64Attr:$scale,
  DefaultValuedAttr<StrArrayAttr, "{}">:$masks,
  DefaultValuedAttr<StrAttr, "\"bottom_right\"">:$causal_align,
  OptionalAttr<I64Attr>:$window_left,
  OptionalAttr<I64Attr>:$window_right,
  DefaultValuedAttr<F64Attr, "0.0">:$softcap,
  UnitAttr:$alibi
);

def Attn_AttentionOp : Attn_Op<"attention", [Pure, AttrSizedOperandSegments]> {
  let summary = "Scaled dot-product attention with masks and score modifiers";
  let description = [{
    For query head h (key/value head g = h / (H / H_kv)), query row i and key j:

    ```
    s_ij  = modifiers(scale * q_i . k_j)      // softcap, then ALiBi, then the bias tensor
    keep  = masks(i, j)                       // constraints intersect, patterns unite
    lse_i = log sum_{j kept} exp(s_ij)
    o_i   = sum_{j kept} exp(s_ij - lse_i) v_j
    ```

    A row with no kept key gives `o_i = 0` and `lse_i = -inf`. Query row i sits at position
    `i + (Tk - Tq)` among the keys with `causal_align = "bottom_right"` (the default), at `i`
    with `"top_left"`. `masks` lists the spec's patterns: `causal`, `padding` (key lengths in
    `lengths`), `window` (`window_left`, `window_right`), `tensor` (the `mask` operand,
    nonzero keeps). Shapes are `[B, H, Tq, d_k]`, `[B, H_kv, Tk, d_k]`, `[B, H_kv, Tk, d_v]`
    for q, k, v and `[B, H, Tq, d_v]` for the output; `lse` is `[B, H, Tq]` in f32.

    Example:

    ```mlir
    %o = attn.attention %q, %k, %v {masks = ["causal"], scale = 0.125 : f64}
        : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x64xf32>
        -> tensor<2x8x?x64xf32>
    ```
  }];

  let arguments = !con((ins
    RankedTensorOf<[AnyFloat]>:$query,
    RankedTensorOf<[AnyFloat]>:$key,
    RankedTensorOf<[AnyFloat]>:$value,
    Optional<RankedTensorOf<[I32]>>:$lengths,
    Optional<RankedTensorOf<[I8, I1]>>:$mask,
    Optional<RankedTensorOf<[AnyFloat]>>:$bias), Attn_ScoreAttrs);
  let results = (outs
    RankedTensorOf<[AnyFloat]>:$output,
    Optional<RankedTensorOf<[F32]>>:$lse
  );

  let assemblyFormat = [{
    $query `,` $key `,` $value
    (`lengths` `(` $lengths^ `:` type($lengths) `)`)?
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`bias` `(` $bias^ `:` type($bias) `)`)?
    attr-dict `:` type($query) `,` type($key) `,` type($value)
    `->` type($output) (`,` type($lse)^)?
  }];

  let hasVerifier = 1;
}

include "AttnOnlineOps.td"

#endif // ATTN_OPS_TD
