//===- AttnLinearOps.td - linear attention as chunked products -------------------===//
//
// Linear attention (docs/spec.md: o_i = phi(q_i)^T S_i / phi(q_i)^T z_i) has no softmax: its
// kernel is feature maps, attn.matmul products and a prefix over chunks of rows.
//
//   rows  phi(q), phi(k) and [v, 1]        attn.feature_rows (FAVOR+: then attn.matmul with
//                                           omega and attn.favor_features)
//   head  P_0 = sum_j phi(k_j) [v_j, 1]^T  over the keys every query row sees (attn.matmul)
//   state P_c = P_0 + sum_{c' < c} D_c'    D_c the sums of chunk c's keys (attn.matmul,
//                                           attn.chunk_prefix)
//   rows  n_i = phi(q_i)^T P_c + sum_{u <= i in c} (phi(q_i) . phi(k_u)) [v_u, 1]
//                                          (attn.matmul, the second with `causal`, `accumulate`)
//   out   o_i = n_i[:d_v] / n_i[d_v]       attn.normalize_rows; attn.linear_weights
//
// The last column of [v, 1] carries z, so one product gives numerator and denominator. Row
// buffers are chunked: [N B, H, C, F] holds row n C + t of batch b at [n B + b, h, t], so a
// chunk's products are attn.matmul's batches; without chunks N = 1 and C is the sequence.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTN_LINEAR_OPS_TD
#define ATTN_LINEAR_OPS_TD

def Attn_FeatureRowsOp : Attn_Op<"feature_rows"> {
  let summary = "Rows of a feature map into chunked f32 rows, zero outside the sequence";
  let description = [{
    For out [N B, H, C, F] and x [B, H, T, d]: `out[n B + b, h, t] = phi(x[b, h, j])` with
    `j = first + n C + t` where `0 <= j < min(T, limit[b])` (`limit`: the padding mask's
    lengths), else 0. `map`: `elu1` (elu(x) + 1, F = d), `relu` (F = d) or `value` (the row
    with a 1 appended, F = d + 1: a value row [v, 1], and FAVOR+'s input rows, whose last
    column says which rows exist).

    ```mlir
    attn.feature_rows %k into %phi rows from %offset limit %lengths {map = "elu1"}
        : memref<?x2x?x16xbf16>, memref<?x2x64x16xf32>, memref<?xi32>
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[AnyFloat], [4]>, "rows [B, H, T, d]", [MemRead]>:$x,
    Arg<MemRefRankOf<[F32], [4]>, "chunked features [N B, H, C, F]", [MemWrite]>:$out,
    Index:$first,
    Arg<Optional<MemRefRankOf<[I32], [1]>>, "lengths [B]", [MemRead]>:$limit,
    StrAttr:$map
  );
  let assemblyFormat = [{
    $x `into` $out `rows` `from` $first (`limit` $limit^)? attr-dict `:` type($x) `,`
    type($out) (`,` type($limit)^)?
  }];
  let hasVerifier = 1;
}

def Attn_FavorFeaturesOp : Attn_Op<"favor_features"> {
  let summary = "FAVOR+'s positive random features from rows and their projections";
  let description = [{
    For rows [.., d + 1] (attn.feature_rows' `value` map: a row and whether it exists) and
    projected [.., F] (the rows times omega^T):

    ```
    out[.., f] = rows[.., d] exp(sqrt(s) projected[.., f] - s |rows[.., :d]|^2 / 2) / sqrt(F)
    ```

    with s = `scale`: Performer's phi of x' = sqrt(s) x (Semantics/Favor.h), 0 for a row that
    does not exist.
    `out` may be `projected`.

    ```mlir
    attn.favor_features %rows, %projected into %projected {scale = 0.25 : f64}
        : memref<?x2x64x17xf32>, memref<?x2x64x32xf32>, memref<?x2x64x32xf32>
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[F32], [4]>, "rows [.., d + 1]", [MemRead]>:$rows,
    Arg<MemRefRankOf<[F32], [4]>, "projected [.., F]", [MemRead]>:$projected,
    Arg<MemRefRankOf<[F32], [4]>, "features [.., F]", [MemWrite]>:$out,
    F64Attr:$scale
  );
  let assemblyFormat = [{
    $rows `,` $projected `into` $out attr-dict `:` type($rows) `,` type($projected) `,`
    type($out)
  }];
  let hasVerifier = 1;
}

def Attn_ChunkPrefixOp : Attn_Op<"chunk_prefix"> {
  let summary = "Chunk sums to the exclusive prefix over chunks, in place, from an initial sum";
  let description = [{
    For sums [N B, H, F, E] and initial [B, H, F, E]:
    `sums[n B + b] <- initial[b] + sum_{n' < n} sums[n' B + b]`, the state every row of chunk n
    starts from.

    ```mlir
    attn.chunk_prefix %sums from %head : memref<?x2x16x17xf32>, memref<?x2x16x17xf32>
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[F32], [4]>, "chunk sums [N B, H, F, E]", [MemRead, MemWrite]>:$sums,
    Arg<MemRefRankOf<[F32], [4]>, "initial [B, H, F, E]", [MemRead]>:$initial
  );
  let assemblyFormat = "$sums `from` $initial attr-dict `:` type($sums) `,` type($initial)";
  let hasVerifier = 1;
}

def Attn_NormalizeRowsOp : Attn_Op<"normalize_rows"> {
  let summary = "Chunked rows [n, z] to n / z: linear attention's output";
  let description = [{
    For total [N B, H, C, E] and out [B, H, T, E - 1]: `out[b, h, i, e] = r[e] / r[E - 1]`
    with `r = total[(i / C) B + b, h, i mod C]`, and 0 where `r[E - 1]` is 0 (no key, or
    features all zero); rounded to out's type.

    ```mlir
    attn.normalize_rows %total into %o : memref<?x2x64x17xf32>, memref<?x2x?x16xbf16>
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[F32], [4]>, "chunked rows [N B, H, C, E]", [MemRead]>:$total,
    Arg<MemRefRankOf<[AnyFloat], [4]>, "output [B, H, T, E - 1]", [MemWrite]>:$out
  );
  let assemblyFormat = "$total `into` $out attr-dict `:` type($total) `,` type($out)";
  let hasVerifier = 1;
}

def Attn_LinearWeightsOp : Attn_Op<"linear_weights"> {
  let summary = "Linear attention's weights: phi(q_i) . phi(k_j) / z_i";
  let description = [{
    For queries [N B, H, C, F] (chunked phi(q)), keys [B, H_kv, Tk, F] (phi(k), zero past a
    batch's length), total [N B, H, C, E] (the rows [n, z]) and out [B, H, Tq, Tk]:
    `out[b, h, i, j] = phi(q_i) . phi(k_j) / z_i` for the keys row i sees, else 0, and 0 where
    z_i is 0. With `causal_offset`, row i sees j <= i + offset; without, every key. Head h reads
    KV head h / (H / H_kv).

    ```mlir
    attn.linear_weights %phi_q, %phi_k, %total into %w causal_offset %offset
        : memref<?x2x64x16xf32>, memref<?x1x?x16xf32>, memref<?x2x64x17xf32>,
          memref<?x2x?x?xf32>
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[F32], [4]>, "chunked phi(q) [N B, H, C, F]", [MemRead]>:$queries,
    Arg<MemRefRankOf<[F32], [4]>, "phi(k) [B, H_kv, Tk, F]", [MemRead]>:$keys,
    Arg<MemRefRankOf<[F32], [4]>, "chunked rows [N B, H, C, E]", [MemRead]>:$total,
    Arg<MemRefRankOf<[AnyFloat], [4]>, "weights [B, H, Tq, Tk]", [MemWrite]>:$out,
    Optional<Index>:$causal_offset
  );
  let assemblyFormat = [{
    $queries `,` $keys `,` $total `into` $out (`causal_offset` $causal_offset^)? attr-dict `:`
    type($queries) `,` type($keys) `,` type($total) `,` type($out)
  }];
  let hasVerifier = 1;
}

#endif // ATTN_LINEAR_OPS_TD
