//===- AttnOnlineOps.td - the online-softmax form of attention ---------------===//
//
// attn.attention decomposed into the running state of the online softmax, on buffers:
//
//   m_i = max_j s_ij                      (running row maximum, -inf while nothing was kept)
//   l_i = sum_j exp(s_ij - m_i - c)       (running normaliser)
//   a_i = sum_j exp(s_ij - m_i - c) v_j   (running unnormalised output)
//
// with c = ln 2^31 >= ln Tk, so that l_i <= 1 and |a_i| <= max |v_j| never overflow f32, or
// c = 0 in a lowering that rounds the probabilities to f16 (compiler/Variants/OnlineSoftmax.h). online_init sets the state, online_update folds in a
// range of keys, online_finalize writes o_i = a_i / l_i and lse_i = m_i + c + log l_i. The ops act on a sub-domain of the attention,
// given by offsets and sizes, so tiling narrows an op's domain instead of changing its meaning.
// State buffers hold query rows innermost (`acc` is [b, h, d_v, row]) so that one vector holds
// a column of query rows and the softmax needs no horizontal reductions.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTN_ONLINE_OPS_TD
#define ATTN_ONLINE_OPS_TD

def Attn_OnlineInitOp : Attn_Op<"online_init"> {
  let summary = "Starts the online-softmax state: acc = 0, max = -inf, sum = 0";
  let description = [{
    Example:

    ```mlir
    attn.online_init %acc, %max, %sum : memref<1x1x64x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[F32], [4]>, "running output [b, h, d_v, row]", [MemWrite]>:$acc,
    Arg<MemRefRankOf<[F32], [3]>, "running row max [b, h, row]", [MemWrite]>:$max,
    Arg<MemRefRankOf<[F32], [3]>, "running normaliser [b, h, row]", [MemWrite]>:$sum
  );
  let assemblyFormat = [{
    $acc `,` $max `,` $sum attr-dict `:` type($acc) `,` type($max) `,` type($sum)
  }];
  let hasVerifier = 1;
}

def Attn_PackQueryOp : Attn_Op<"pack_query"> {
  let summary = "Copies a query tile transposed and scaled: packed[c, r] = scale * q[b, h, i + r, c]";
  let description = [{
    The query rows `[i, i + rows)` of head `h` in batch `b`, multiplied by `scale`, with the
    head dimension outermost so that a vector load reads one column of consecutive query rows.
    Rows past `rows` (the end of the sequence) are zero. An `attn.online_update` whose query
    is packed does not scale again. The query's d_k may be dynamic and less than packed's
    first extent (the backward packs a bias's columns of one key block this way): packed's
    rows past d_k are not written.

    Example:

    ```mlir
    attn.pack_query %q[%b, %h, %i] rows %n into %packed {scale = 0.125 : f64}
        : memref<?x8x?x64xf32>, memref<64x48xf32>
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[AnyFloat], [4]>, "query [B, H, Tq, d_k]", [MemRead]>:$query,
    Index:$batch, Index:$head, Index:$row, Index:$rows,
    Arg<MemRefRankOf<[F32], [2]>, "packed tile [d_k or more, rows]", [MemWrite]>:$packed,
    F64Attr:$scale
  );
  let assemblyFormat = [{
    $query `[` $batch `,` $head `,` $row `]` `rows` $rows `into` $packed attr-dict
    `:` type($query) `,` type($packed)
  }];
  let hasVerifier = 1;
}

def Attn_RopeOp : Attn_Op<"rope"> {
  let summary = "Rotates rows by their positions (RoPE): out[b, h, t] = R(t + offset) in[b, h, t]";
  let description = [{
    Pair p of the first `dims` dims of each row (dims p and p + dims/2 with `style = "half"`,
    2p and 2p + 1 with `"interleaved"`) rotates by the angle (t + offset) * theta^(-2p / dims);
    the dims past `dims` are copied. The angle is formed and reduced modulo 2 pi in f64, so
    positions far along the sequence keep f32's accuracy; the output is rounded to its type.
    attn.attention's `rope` becomes one of these for the query (offset: its alignment) and one
    for the keys (offset 0), into workspace buffers the online ops then read. With `ends`
    (a KV cache's seq_lens), row t of batch b sits at t + offset + ends[b]: the queries, with
    offset -Tq, at the end of each sequence; a cache's keys are rotated already. With
    `transposed`, R(t + offset)^T = R(-(t + offset)) rotates instead: the backward's, taking
    the gradients of the rotated rows back to the rows.

    Example:

    ```mlir
    attn.rope %k into %rotated offset %c0 {style = "half", theta = 1.0e4 : f64, dims = 64 : i64}
        : memref<?x2x?x64xf32>, memref<?x2x?x64xf32>
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[AnyFloat], [4]>, "rows [B, heads, T, d]", [MemRead]>:$input,
    Arg<MemRefRankOf<[AnyFloat], [4]>, "rotated rows [B, heads, T, d]", [MemWrite]>:$output,
    Index:$offset,
    Optional<MemRefRankOf<[I32], [1]>>:$ends,
    StrAttr:$style,
    F64Attr:$theta,
    I64Attr:$dims,
    UnitAttr:$transposed
  );
  let assemblyFormat = [{
    $input `into` $output `offset` $offset (`ends` $ends^)? attr-dict `:` type($input) `,`
    type($output) (`,` type($ends)^)?
  }];
  let hasVerifier = 1;
}

def Attn_OnlineUpdateOp : Attn_Op<"online_update",
                                    [AttrSizedOperandSegments, Attn_ScoreOpInterface]> {
  let summary = "Folds a range of keys into the online-softmax state";
  let description = [{
    For batches `b0 + [0, nb)`, query heads `h0 + [0, nh)`, query rows `i0 + [0, ni)` and keys
    `j0 + [0, nj)` (the op's domain: `offsets` = [b0, h0, i0, j0], `sizes` = [nb, nh, ni, nj]),
    with s_ij the score of attn.attention (same attributes and expression regions):

    ```
    m'_i = max(m_i, max_j s_ij)
    l'_i = exp(m_i - m'_i) l_i + sum_j exp(s_ij - m'_i - c)
    a'_i = exp(m_i - m'_i) a_i + sum_j d_ij exp(s_ij - m'_i - c) v_j
    ```

    with c = ln 2^31 (see the state's definition above) and d_ij the `dropout` region's factor
    (1 when the region is empty).

    Masked scores are -inf and add nothing; exp(-inf - -inf) is taken as 0. State buffers are
    indexed relative to the domain: `acc[b - b0, h - h0, c, i - i0]`. `num_heads` is the number
    of query heads H (needed for GQA when the query is a packed tile), `seq_q` the
    query length Tq (needed for the causal alignment). The query is either the whole
    `[B, H, Tq, d_k]` tensor or a tile made by `attn.pack_query` for one head and batch, when
    the domain must cover just that head and batch (nb = nh = 1) and scores are not scaled again.
    `max_keys`, when present, bounds `nj` (tiling along keys sets it).
    With `pages(block_table, seq_lens)` key and value are a paged KV cache, and with
    `scales(key_scale, value_scale)` a quantized one, as attn.attention defines them; only the
    decode lowering reads them so, every other lowering needs `transform.attn.gather_cache`
    first.
    With `score_weights` the score is attn.attention's additive one, the key [B, H, Tk, d_k]
    (one head per query head) and the KV groups those of the weights [H_kv, H / H_kv, d_k].

    Example:

    ```mlir
    attn.online_update %q, %k, %v into %acc, %max, %sum
        at [%b, %h, %i, %j] sizes [%c1, %c1, %ni, %nj] seq_q %tq
        {num_heads = 8 : i64, scale = 0.125 : f64}
        : memref<64x48xf32>, memref<?x2x?x64xf32>, memref<?x2x?x64xf32>,
          memref<1x1x64x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>
    ```
  }];
  let arguments = !con((ins
    Arg<MemRefRankOf<[AnyFloat], [2, 4]>, "query, whole or packed", [MemRead]>:$query,
    Arg<MemRefRankOf<[AnyFloat, I8], [4]>, "key [B, H_kv, Tk, d_k]", [MemRead]>:$key,
    Arg<MemRefRankOf<[AnyFloat, I8], [4]>, "value [B, H_kv, Tk, d_v]", [MemRead]>:$value,
    Arg<Variadic<MemRefRankOf<[I8, I32, F16, BF16, F32], [1, 2, 3, 4]>>, "aux tensors",
        [MemRead]>:$aux,
    Arg<Optional<MemRefRankOf<[I32], [2]>>, "paged cache: block table [B, Tk / page_size]",
        [MemRead]>:$block_table,
    Arg<Optional<MemRefRankOf<[I32], [1]>>, "paged cache: keys per sequence [B]",
        [MemRead]>:$seq_lens,
    Arg<Optional<MemRefRankOf<[F32], [3]>>, "quantized cache: key rows' scales",
        [MemRead]>:$key_scale,
    Arg<Optional<MemRefRankOf<[F32], [3]>>, "quantized cache: value rows' scales",
        [MemRead]>:$value_scale,
    Arg<Optional<MemRefRankOf<[F32, F16, BF16], [3]>>, "additive score weights [H_kv, H / H_kv, d_k]",
        [MemRead]>:$score_weights,
    Arg<MemRefRankOf<[F32], [4]>, "running output", [MemRead, MemWrite]>:$acc,
    Arg<MemRefRankOf<[F32], [3]>, "running row max", [MemRead, MemWrite]>:$max,
    Arg<MemRefRankOf<[F32], [3]>, "running normaliser", [MemRead, MemWrite]>:$sum,
    Variadic<Index>:$offsets,
    Variadic<Index>:$sizes,
    Index:$seq_q,
    I64Attr:$num_heads,
    OptionalAttr<I64Attr>:$max_keys), Attn_ScoreAttrs);
  let regions = (region Attn_ExpressionRegion:$score_mod, Attn_ExpressionRegion:$mask_mod,
                 Attn_ExpressionRegion:$dropout);

  let assemblyFormat = [{
    $query `,` $key `,` $value
    (`aux` `(` $aux^ `:` type($aux) `)`)?
    (`pages` `(` $block_table^ `,` $seq_lens `:` type($block_table) `,` type($seq_lens) `)`)?
    (`scales` `(` $key_scale^ `,` $value_scale `:` type($key_scale) `,` type($value_scale) `)`)?
    (`score_weights` `(` $score_weights^ `:` type($score_weights) `)`)?
    `into` $acc `,` $max `,` $sum
    `at` `[` $offsets `]` `sizes` `[` $sizes `]` `seq_q` $seq_q
    attr-dict `:` type($query) `,` type($key) `,` type($value) `,`
    type($acc) `,` type($max) `,` type($sum)
    (`score_mod` $score_mod^)? (`mask_mod` $mask_mod^)? (`dropout` $dropout^)?
  }];
  let extraClassDeclaration = [{
    // The query is a tile made by attn.pack_query (rank 2).
    bool hasPackedQuery() { return getQuery().getType().getRank() == 2; }
  }];
  let hasVerifier = 1;
}

def Attn_OnlineFinalizeOp : Attn_Op<"online_finalize", [AttrSizedOperandSegments]> {
  let summary = "Writes o = acc / sum and lse = max + c + log(sum) from the online-softmax state";
  let description = [{
    For the domain `offsets` = [b0, h0, i0], `sizes` = [nb, nh, ni]:
    `output[b, h, i, c] = acc[b - b0, h - h0, c, i - i0] / sum[...]` and
    `lse[b, h, i] = max[...] + c + log(sum[...])` (c = ln 2^31, the state's scale), converted to the output's element type. A row
    whose sum is 0 (nothing kept) gives `o = 0` and `lse = -inf`.

    With `sinks` ([heads] f32), each row's state first takes in its head's sink, a logit with
    no value: `m' = max(m, sink)`, `sum' = sum e^(m - m') + e^(sink - m' - c)`,
    `acc' = acc e^(m - m')`, and o and lse are formed from those (a row that kept nothing gives
    `o = 0`, `lse = sink`).

    Example:

    ```mlir
    attn.online_finalize %acc, %max, %sum into %o lse(%lse : memref<?x8x?xf32>)
        at [%b, %h, %i] sizes [%c1, %c1, %ni]
        : memref<1x1x64x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>, memref<?x8x?x64xf32>
    ```
  }];
  let arguments = (ins
    Arg<MemRefRankOf<[F32], [4]>, "running output", [MemRead]>:$acc,
    Arg<MemRefRankOf<[F32], [3]>, "running row max", [MemRead]>:$max,
    Arg<MemRefRankOf<[F32], [3]>, "running normaliser", [MemRead]>:$sum,
    Arg<MemRefRankOf<[AnyFloat], [4]>, "output [B, H, Tq, d_v]", [MemWrite]>:$output,
    Arg<Optional<MemRefRankOf<[F32], [3]>>, "lse [B, H, Tq]", [MemWrite]>:$lse,
    Arg<Optional<MemRefRankOf<[F32], [1]>>, "attention sinks [H]", [MemRead]>:$sinks,
    Variadic<Index>:$offsets,
    Variadic<Index>:$sizes
  );
  let assemblyFormat = [{
    $acc `,` $max `,` $sum `into` $output (`lse` `(` $lse^ `:` type($lse) `)`)?
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    `at` `[` $offsets `]` `sizes` `[` $sizes `]`
    attr-dict `:` type($acc) `,` type($max) `,` type($sum) `,` type($output)
  }];
  let hasVerifier = 1;
}

def Attn_WeightsOp : Attn_Op<"weights", [AttrSizedOperandSegments, Attn_ScoreOpInterface]> {
  let summary = "Writes the normalised attention weights p = exp(s - m) / L of a domain";
  let description = [{
    For the domain `offsets` = [b0, h0, i0, j0], `sizes` = [nb, nh, ni, nj] and s_ij the score
    of attn.attention (same operands, attributes and expression regions as attn.online_update):

    ```
    weights[b, h, i, j] = exp(s_ij - m_i) / L_i   where the masks keep (i, j)
                        = 0                       where they do not
    ```

    with m_i the largest of row i's kept scores and its sink, and
    L_i = exp(sink_h - m_i) + sum_j exp(s_ij - m_i) over its kept keys (the sink term only with
    `sinks`), so the weights are the softmax's probabilities before dropout, exact where
    exp(s_ij - lse_i) is not (lse_i = m_i + log L_i rounds to m_i when |m_i| dwarfs log L_i).
    A row with a NaN or +inf score or sink gets NaN at every kept key, and a -inf score gets 0
    (docs/spec.md, "Special values"). attn.attention's `weights` result becomes one of these
    after the online ops: a pass over the keys that recomputes the scores, forming (m_i, L_i)
    first.

    Example:

    ```mlir
    attn.weights %q, %k sinks(%sinks : memref<8xf32>) into %w at [%c0, %c0, %c0, %c0]
        sizes [%b, %c8, %tq, %tk] seq_q %tq {num_heads = 8 : i64, scale = 0.125 : f64}
        : memref<?x8x?x64xf32>, memref<?x2x?x64xf32>, memref<?x8x?x?xf32>
    ```
  }];
  let arguments = !con((ins
    Arg<MemRefRankOf<[AnyFloat], [4]>, "query [B, H, Tq, d_k]", [MemRead]>:$query,
    Arg<MemRefRankOf<[AnyFloat, I8], [4]>, "key [B, H_kv, Tk, d_k]", [MemRead]>:$key,
    Arg<Variadic<MemRefRankOf<[I8, I32, F16, BF16, F32], [1, 2, 3, 4]>>, "aux tensors",
        [MemRead]>:$aux,
    Arg<Optional<MemRefRankOf<[I32], [2]>>, "paged cache: block table [B, Tk / page_size]",
        [MemRead]>:$block_table,
    Arg<Optional<MemRefRankOf<[I32], [1]>>, "paged cache: keys per sequence [B]",
        [MemRead]>:$seq_lens,
    Arg<Optional<MemRefRankOf<[F32], [3]>>, "quantized cache: key rows' scales",
        [MemRead]>:$key_scale,
    Arg<Optional<MemRefRankOf<[F32], [1]>>, "attention sinks [H]", [MemRead]>:$sinks,
    Arg<Optional<MemRefRankOf<[F32, F16, BF16], [3]>>, "additive score weights [H_kv, H / H_kv, d_k]",
        [MemRead]>:$score_weights,
    Arg<MemRefRankOf<[F32], [4]>, "weights [B, H, Tq, Tk]", [MemWrite]>:$weights,
    Variadic<Index>:$offsets,
    Variadic<Index>:$sizes,
    Index:$seq_q,
    I64Attr:$num_heads), Attn_ScoreAttrs);
  let regions = (region Attn_ExpressionRegion:$score_mod, Attn_ExpressionRegion:$mask_mod);

  let assemblyFormat = [{
    $query `,` $key
    (`aux` `(` $aux^ `:` type($aux) `)`)?
    (`pages` `(` $block_table^ `,` $seq_lens `:` type($block_table) `,` type($seq_lens) `)`)?
    (`scales` `(` $key_scale^ `:` type($key_scale) `)`)?
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    (`score_weights` `(` $score_weights^ `:` type($score_weights) `)`)? `into` $weights
    `at` `[` $offsets `]` `sizes` `[` $sizes `]` `seq_q` $seq_q
    attr-dict `:` type($query) `,` type($key) `,` type($weights)
    (`score_mod` $score_mod^)? (`mask_mod` $mask_mod^)?
  }];
  let hasVerifier = 1;
}

#endif // ATTN_ONLINE_OPS_TD
