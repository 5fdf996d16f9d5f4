//===- AttnOperandOps.td - the products that make a variant's operands ----------===//
//
// Variants other than sdpa feed the attention operands it does not take as they are: mha's
// projections of its inputs (and W_O of its output), additive's W1 q and W2 k, bilinear's q W,
// Linformer's E K and F V. Each is a batched matrix product on buffers, written into a
// workspace buffer before the attention reads it (or, for W_O, after the attention wrote its
// input). Linear attention is made of such products (AttnLinearOps.td).
//
//===---------------------------------------------------------------------------===//
#ifndef ATTN_OPERAND_OPS_TD
#define ATTN_OPERAND_OPS_TD

def Attn_MatmulOp : Attn_Op<"matmul", [AttrSizedOperandSegments]> {
  let summary = "A batched matrix product into a buffer: out[b, h] = lhs[b, h] rhs[b, h]";
  let description = [{
    For batch b, head h, row t and column c of `out` [B, H, T, C]:

    ```
    out[b, h, t, c] = sum_{r < n_b} (lhs[b', h', t, r] + PE(t + offset, r)) * rhs[b'', h'', r, c]
    ```

    with `R` the contraction extent (lhs's last dim, rhs's third), `n_b = min(R, max(limit[b],
    0))` with `limit` (Linformer's padded keys) and `R` without. A batch dim of static size 1
    broadcasts (b' = 0); a head dim of H_x heads serves H / H_x consecutive heads of `out`
    (h' = h / (H / H_x): GQA's rule). `PE` is the sinusoidal encoding of mha (`sinusoid`
    given: `PE(p, m) = sin(p w_m)` for even m, `cos(p w_m)` for odd m, `w_m =
    10000^(-(m - m mod 2) / M)`, M lhs's last dim), else 0. With `causal` the sum runs over
    `r <= t` only (lhs taken as 0 past its diagonal: linear attention's products within a
    chunk); with `accumulate` the sum is added to out's elements. Products and sums are f32;
    the result is rounded to `out`'s type.

    The backward's products of mha's weights (dW = X^T dY, summed over every batch entry and
    position) take two more attributes:
    - `lhs_transposed`: lhs is [B|1, H_l, R, T] and read transposed, its element for row t
      and step r being `lhs[b', h', r, t] + PE(r + offset, t)` (PE at lhs's own position);
    - `batch_sum`: out is [1, H, T, C] and the sum also runs over the factors' batches (which
      agree), `out[0, h, t, c] = sum_b sum_{r < n_b} ...`, in order of b, then r: every
      element one ordered sum, so the result is the same at any thread count.

    Example:

    ```mlir
    attn.matmul %q, %w into %projected : memref<?x8x?x64xf32>, memref<1x8x64x64xf32>,
        memref<?x8x?x64xf32>
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[AnyFloat], [4]>, "lhs [B|1, H_l, T, R]", [MemRead]>:$lhs,
    Arg<MemRefRankOf<[AnyFloat], [4]>, "rhs [B|1, H_r, R, C]", [MemRead]>:$rhs,
    Arg<MemRefRankOf<[AnyFloat], [4]>, "out [B, H, T, C]", [MemWrite]>:$out,
    Optional<MemRefRankOf<[I32], [1]>>:$limit,
    Optional<Index>:$sinusoid,
    UnitAttr:$causal,
    UnitAttr:$accumulate,
    UnitAttr:$lhs_transposed,
    UnitAttr:$batch_sum
  );
  let assemblyFormat = [{
    $lhs `,` $rhs `into` $out (`limit` $limit^)? (`sinusoid` $sinusoid^)? attr-dict `:`
    type($lhs) `,` type($rhs) `,` type($out) (`,` type($limit)^)?
  }];
  let hasVerifier = 1;
}

#endif // ATTN_OPERAND_OPS_TD
