// The named stages of the Halide algorithms (compiler/Backends/Halide), which the schedules in
// this folder place: the contract between what is computed and how it runs. An algorithm
// defines these Funcs; a schedule only orders, tiles, vectorises and places them.
#ifndef ATTNC_SCHEDULES_HALIDE_STAGES_H
#define ATTNC_SCHEDULES_HALIDE_STAGES_H

#include <Halide.h>
#include <vector>

namespace attnc::halide {

// acc(e, t, x, b) = sum over r of a product, with e the contiguous output element (the vector
// lanes), t a sequence position, x a head and b the batch entry. Reads are clamped to the
// tensors' bounds, so a schedule may round the e and t loops up to whole register tiles.
struct Projection {
  Halide::Func acc;
  Halide::Var e{"e"}, t{"t"}, x{"x"}, b{"b"};
  Halide::RDom r;
};

// The stages of fused softmax attention (AttentionAlgorithm.h has the math).
struct AttentionStages {
  // Loop variables: head dim, query row, row within a query tile, query tile, key within a
  // block, key block, head, batch.
  Halide::Var d{"d"}, i{"i"}, row{"row"}, tile{"tile"}, jj{"jj"}, kb{"kb"}, h{"h"}, b{"b"};
  Halide::RDom dot;    // over the head dim, in scores
  Halide::RDom inKey;  // over the keys of a block
  Halide::RDom blocks; // over key blocks, in the streaming merge (predicated by the mask's form)
  // Over a block's keys, in masked's update: the elementwise mask, for the blocks the tile
  // classifier cannot prove wholly kept. Undefined when it proves none (masked is then pure).
  Halide::RDom maskedKeys;

  // Named stages, in data-flow order (they name the loops in stmt dumps). Rows of a query tile
  // are the innermost dimension of the score stages, so a vector holds one key's scores for
  // many rows: the score GEMM broadcasts keys straight from K, and the block's row maxima and
  // sums are plain vector operations.
  Halide::Func rowPosition; // (row, tile)   residue order: the query row in a tile's slot
  Halide::Func keyPosition; // (jj, kb)      residue order: the key in a block's slot
  Halide::Func queryRows;  // (d, row, tile, h, b)          the query operand * scale, as stored
  Halide::Func query;      // (row, d, tile, h, b)          the same, transposed: rows innermost
  Halide::Func keyBlock;   // (d, jj, kb, h, b)           the block's keys, f32
  Halide::Func valueBlock; // (d, jj, kb, h, b)           the block's values, f32
  Halide::Func score;      // (row, jj, kb, tile, h, b)     q . k over the head dim
  Halide::Func masked;     // (row, jj, kb, tile, h, b)     modifiers applied; kLowest if masked
  Halide::Func blockMax;   // (row, kb, tile, h, b)
  Halide::Func prob;       // (row, jj, kb, tile, h, b)     exp(s - m_kb), 0 where masked
  Halide::Func blockSum;   // (row, kb, tile, h, b)
  Halide::Func blockAcc;   // (d, row, kb, tile, h, b)      sum_j prob v_j
  Halide::Func state;      // (d, row, tile, h, b)          Tuple(M, L, A), merged over blocks
  Halide::Func finished;   // (d, row, tile, h, b)          o = A / L; at d_v, d_v + 1: M, L
  Halide::Func o, lse;     // outputs, indexed by query row i = tile * queryTile + row
  // mha: the heads' outputs side by side (h * d_v + d, i, b), and their product with W_O that o
  // stores.
  Halide::Func heads;
  Projection outputProjection;
  Halide::Func rowLse;     // (i, h, b) the log-sum-exp (lse=true)
  // The weights pass (weights=true): scores again, normalised with the row's final state
  // (rowNormaliser: M and 1 / (L e^c) per row).
  Halide::Func rowNormaliser; // (i, h, b)
  Halide::Func weightQuery; // (d, i, h, b)
  Halide::Func weightScore; // (j, i, h, b)
  Halide::Func weights;     // (j, i, h, b)
  Halide::Var j{"j"};

  // What the stages read that a schedule places too: the inputs (their strides pick the
  // specialised loads), small tables computed once per call or once per task (query tile,
  // head, batch: the tests of the block loop's predicate read them), the variant's GEMM-shaped
  // products (once per call, or per query tile), and the keys rotated by RoPE (only with RoPE).
  Halide::ImageParam q, k, v;
  std::vector<Halide::Func> tables, perTaskTables;
  std::vector<Projection> perCall, perQueryTile;
  Halide::Func rotatedKeys;
  // Rows and keys stream in residue order (strided, dilated): rowPosition and keyPosition are
  // defined.
  bool gathered = false;
};

// The stages of linear attention (LinearAlgorithm.h has the math).
struct LinearStages {
  int chunk = 0;    // C, rows per chunk (causal)
  int features = 0; // m

  Halide::Var e{"e"}, f{"f"}, i{"i"}, j{"j"}, c{"c"}, h{"h"}, g{"g"}, b{"b"};
  Halide::Func omegaT;     // (f, d) FAVOR+'s features transposed; only with favor
  Projection queryDot;     // favor: (f, i, h, b) w_f . q_i'
  Projection keyDot;       // favor: (f, j, g, b) w_f . k_j'
  Halide::Func queryNorm;  // favor: (i, h, b) |q_i'|^2 / 2
  Halide::Func keyNorm;    // favor: (j, g, b) |k_j'|^2 / 2
  Halide::Func phiQ;       // (f, i, h, b) features of the queries
  Halide::Func phiK;       // (f, j, g, b) features of the keys
  Halide::Func value;      // (e, j, g, b) [v_j, 1], e < d_v + 1
  Projection keyValue;     // non-causal: (e, f, g, b) S; causal: unused
  Projection headSum;      // causal: (e, f, g, b) the keys before chunk 0, sum_{j < p_0}
  Halide::Func chunkSum;   // causal: (e, f, c, g, b) D_c
  Halide::RDom inChunk;    // causal: jj < C
  Halide::Func prefix;     // causal: (e, f, c, g, b) P_c, a scan over chunks
  Halide::RDom chunks;
  Halide::Func intraDot;   // causal: (jj, i, h, b) phi(q_i) . phi(k_{p_c + jj})
  Halide::Func intraScore; // causal: intraDot where row i sees the key, else 0
  Projection inter;        // (e, i, h, b) phi(q_i)^T P_c (or S)
  Projection intra;        // causal: (e, i, h, b) sum_jj intraScore [v, 1]
  Halide::Func total;      // (e, i, h, b) numerator (e < d_v) and denominator (e = d_v)
  Halide::Func o;
  Halide::Func weights;    // (j, i, h, b)
  Halide::Func weightScore; // (j, i, h, b) phi(q_i) . phi(k_j)
  Halide::RDom overFeatures;
};

} // namespace attnc::halide

#endif // ATTNC_SCHEDULES_HALIDE_STAGES_H
