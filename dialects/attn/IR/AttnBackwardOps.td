//===- AttnBackwardOps.td - the gradients of attention -------------------------===//
//
// The backward pass of attn.attention's softmax form, on buffers, after FlashAttention's
// recipe: the probabilities are recomputed from the forward's log-sum-exp, so no T x T buffer
// exists, and every gradient is a sum in a fixed order (no atomics).
//
//===---------------------------------------------------------------------------===//
#ifndef ATTN_BACKWARD_OPS_TD
#define ATTN_BACKWARD_OPS_TD

def Attn_BackwardOp : Attn_Op<"backward", [AttrSizedOperandSegments, Attn_ScoreOpInterface]> {
  let summary = "Writes dQ, dK and dV of the attention whose scores it recomputes";
  let description = [{
    For the attention of attn.attention (the same attributes, score_mod and mask_mod regions)
    over the domain `offsets` = [0, 0, 0, 0], `sizes` = [B, H, Tq, Tk] (tensors of f32, f16
    or bf16, computed in f32; lse f32), with x_ij = scale q_i.k_j
    the raw score, s_ij = score_mod(x_ij) and K_ij whether mask_mod keeps it:

    ```
    p_ij  = K_ij ? exp(s_ij - lse_i) : 0          (lse: the forward's, so P is the forward's)
    D_i   = sum_c dO_ic O_ic
    dx_ij = p_ij (dO_i . v_j - D_i) score_grad(x_ij)
    dq_i  = scale sum_j dx_ij k_j
    dk_g  = scale sum_(h in group g) sum_i dx_ij q_i      (GQA: summed over the group's heads)
    dv_g  = sum_(h in group g) sum_i p_ij dO_i
    ```

    `score_grad` yields d score_mod / d x at the score (1 when the region is empty: no
    score_mod); the compiler derives it from score_mod (compiler/Expr/ExprDerive.h). A row
    that kept nothing (lse = -inf) has p = 0 and gives nothing. With a `dropout` region
    (its factor z_ij on a probability, as attn.online_update's), dv takes z_ij p_ij and dx
    p_ij (z_ij dO_i . v_j - D_i). With `sinks` (a logit per head with no value, in lse),
    `grad_sinks[h] = -sum_(b, i) exp(sink_h - lse_i) D_i`. With `aux_grads` (the gradients of
    float aux tensors that score_mod reads, zeroed and written whole), the `aux_grad` region
    yields for each read of such a tensor (in `aux_grad_targets` order, each the index of its
    tensor's gradient in `aux_grads`) the read's indices (i32, one per dimension of the tensor,
    clamped into it as the read clamps them) and d score_mod / d (the element read) at the
    score; each element's gradient sums p_ij (z_ij dO_i . v_j - D_i) times those partials over
    the scores that read it. The gradients listed in `aux_grad_direct` are score-shaped,
    [B or 1, H or 1, Tq, Tk] read at [b, h, q_idx, kv_idx] (a bias), and are summed in place
    in their own type; the others are f32. The lowering
    (transform.attn.lower_backward) makes three phases: D per row, dK and dV per key block,
    dQ per query tile.

    Example:

    ```mlir
    attn.backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv
        at [%c0, %c0, %c0, %c0] sizes [%b, %c8, %tq, %tk] seq_q %tq
        {num_heads = 8 : i64, scale = 0.125 : f64}
        : memref<?x8x?x64xf32>, memref<?x2x?x64xf32>, memref<?x2x?x64xf32>,
          memref<?x8x?x64xf32>, memref<?x8x?x64xf32>, memref<?x8x?xf32>,
          memref<?x8x?x64xf32>, memref<?x2x?x64xf32>, memref<?x2x?x64xf32>
    ```
  }];
  let arguments = !con((ins
    Arg<MemRefRankOf<[F32, F16, BF16], [4]>, "query [B, H, Tq, d_k]", [MemRead]>:$query,
    Arg<MemRefRankOf<[F32, F16, BF16], [4]>, "key [B, H_kv, Tk, d_k]", [MemRead]>:$key,
    Arg<MemRefRankOf<[F32, F16, BF16], [4]>, "value [B, H_kv, Tk, d_v]", [MemRead]>:$value,
    Arg<MemRefRankOf<[F32, F16, BF16], [4]>, "the forward's output [B, H, Tq, d_v]", [MemRead]>:$output,
    Arg<MemRefRankOf<[F32, F16, BF16], [4]>, "the output's gradient [B, H, Tq, d_v]", [MemRead]>:$grad_output,
    Arg<MemRefRankOf<[F32], [3]>, "the forward's lse [B, H, Tq]", [MemRead]>:$lse,
    Arg<Variadic<MemRefRankOf<[I8, I32, F16, BF16, F32], [1, 2, 3, 4]>>, "aux tensors",
        [MemRead]>:$aux,
    Arg<Optional<MemRefRankOf<[F32], [1]>>, "attention sinks [H]", [MemRead]>:$sinks,
    Arg<MemRefRankOf<[F32, F16, BF16], [4]>, "dQ [B, H, Tq, d_k]", [MemWrite]>:$grad_query,
    Arg<MemRefRankOf<[F32, F16, BF16], [4]>, "dK [B, H_kv, Tk, d_k]", [MemWrite]>:$grad_key,
    Arg<MemRefRankOf<[F32, F16, BF16], [4]>, "dV [B, H_kv, Tk, d_v]", [MemWrite]>:$grad_value,
    Arg<Optional<MemRefRankOf<[F32], [1]>>, "d sinks [H]", [MemWrite]>:$grad_sinks,
    Arg<Variadic<MemRefRankOf<[F32, F16, BF16], [1, 2, 3, 4]>>,
        "the gradients of float aux tensors", [MemWrite]>:$aux_grads,
    Variadic<Index>:$offsets,
    Variadic<Index>:$sizes,
    Index:$seq_q,
    I64Attr:$num_heads,
    OptionalAttr<DenseI64ArrayAttr>:$aux_grad_targets,
    OptionalAttr<DenseI64ArrayAttr>:$aux_grad_direct), Attn_ScoreAttrs);
  let regions = (region Attn_ExpressionRegion:$score_mod, Attn_ExpressionRegion:$mask_mod,
                 Attn_ExpressionRegion:$score_grad, Attn_ExpressionRegion:$dropout,
                 Attn_ExpressionRegion:$aux_grad);

  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $grad_output `,` $lse
    (`aux` `(` $aux^ `:` type($aux) `)`)?
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    `into` $grad_query `,` $grad_key `,` $grad_value
    (`grad_sinks` `(` $grad_sinks^ `:` type($grad_sinks) `)`)?
    (`aux_grads` `(` $aux_grads^ `:` type($aux_grads) `)`)?
    `at` `[` $offsets `]` `sizes` `[` $sizes `]` `seq_q` $seq_q
    attr-dict `:` type($query) `,` type($key) `,` type($value) `,` type($output) `,`
    type($grad_output) `,` type($lse) `,` type($grad_query) `,` type($grad_key) `,`
    type($grad_value)
    (`score_mod` $score_mod^)? (`mask_mod` $mask_mod^)? (`score_grad` $score_grad^)?
    (`dropout` $dropout^)? (`aux_grad` $aux_grad^)?
  }];
  let extraClassDeclaration = [{
    // What ScoreOpInterface asks of ops that read caches or additive weights: none here.
    ::mlir::TypedValue<::mlir::MemRefType> getBlockTable() { return {}; }
    ::mlir::TypedValue<::mlir::MemRefType> getSeqLens() { return {}; }
    ::mlir::TypedValue<::mlir::MemRefType> getKeyScale() { return {}; }
    ::mlir::TypedValue<::mlir::MemRefType> getScoreWeights() { return {}; }

    // A clone over the domain [offsets, offsets + sizes), made at `b`'s insertion point but
    // outside any listener, so that a rewrite does not see it: a marker the lowerings read a
    // tile's masks and terms from (KeyRange, ScoreTerms). The caller erases it.
    BackwardOp cloneOverDomain(::mlir::OpBuilder& b, ::mlir::ValueRange offsets,
                               ::mlir::ValueRange sizes);

  private:
    ::mlir::LogicalResult verifyAuxGradients();
  public:
  }];
  let hasVerifier = 1;
}

#endif // ATTN_BACKWARD_OPS_TD
