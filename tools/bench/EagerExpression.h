// An attention expression (score_mod, mask_mod, or a built-in's expression from
// Spec/BuiltinExpressions) evaluated as eager PyTorch evaluates one written over tensors: each op
// one pass over whole arrays of one head's scores, with broadcasting. q_idx and qpos are a
// column [Tq, 1], kv_idx a row [1, keys], b, h, g, Tq and Tk scalars and score the [Tq, keys]
// matrix; an op's result takes the broadcast of its operands' shapes, so `doc[b, q_idx] ==
// doc[b, kv_idx]` gathers Tq + keys elements and compares Tq x keys. Floats are f32 (the score
// matrix's type), ints 64-bit and wrapping, as the language defines them (Expr/Expr.h).
#ifndef ATTNC_TOOLS_BENCH_EAGEREXPRESSION_H
#define ATTNC_TOOLS_BENCH_EAGEREXPRESSION_H

#include "Expr/ExprEval.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace attnc::bench {

// An expression's value over a [rows x cols] grid: rows is 1 or Tq, cols 1 or the keys, and an
// extent of 1 broadcasts.
struct EagerArray {
  expr::Type type = expr::Type::Int;
  int64_t rows = 1, cols = 1;
  std::vector<float> floats;  // Float
  std::vector<int64_t> ints;  // Int
  std::vector<uint8_t> bools; // Bool, 0 or 1

  size_t at(int64_t r, int64_t c) const { return (rows == 1 ? 0 : r) * cols + (cols == 1 ? 0 : c); }
  float number(int64_t r, int64_t c) const {
    return type == expr::Type::Float ? floats[at(r, c)] : static_cast<float>(ints[at(r, c)]);
  }
  bool truth(int64_t r, int64_t c) const { return bools[at(r, c)] != 0; }
};

// What an expression reads besides the grid: the spec's params, and tensors by name (its aux
// tensors and the kernel inputs the built-ins read: lengths, mask, bias, block_layout).
struct EagerInputs {
  struct Tensor {
    expr::Type type; // Int or Float
    std::vector<int64_t> shape;
    std::vector<float> floats; // Float, dense row-major
    std::vector<int64_t> ints; // Int
  };
  std::map<std::string, expr::Value> params;
  std::map<std::string, Tensor> tensors;
};

// The points one evaluation covers: every query row and `keys` keys of head h of batch entry b.
struct HeadGrid {
  int64_t b = 0, h = 0, g = 0;
  int64_t seqQ = 0, seqK = 0, keys = 0;
  int64_t offset = 0;            // qpos - q_idx (Semantics/Positions.h's alignment)
  const float* scores = nullptr; // [seqQ x keys], what `score` reads
};

EagerArray evaluateEagerly(const expr::Node& node, const HeadGrid& grid,
                           const EagerInputs& inputs);

} // namespace attnc::bench

#endif // ATTNC_TOOLS_BENCH_EAGEREXPRESSION_H
