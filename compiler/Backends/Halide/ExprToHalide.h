// An attention expression (compiler/Expr) as a Halide Expr: ints in 32 bits (wrapping), floats
// in f32 with IEEE's NaN and infinities, bools as Halide bools, with the language's semantics
// (ExprEval.h) wherever a value stays within 32 bits: floor modulo with x % 0 = 0, floor of NaN
// = 0 and saturating, min and max ignoring a NaN, bit() of a sign-extended word.
#ifndef ATTNC_COMPILER_BACKENDS_HALIDE_EXPRTOHALIDE_H
#define ATTNC_COMPILER_BACKENDS_HALIDE_EXPRTOHALIDE_H

#include "Spec/Spec.h"

#include <Halide.h>
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace attnc::halide {

// The variables at one score element. qIdx and kvIdx are inside [0, Tq) and [0, Tk): the
// caller clamps a tile's tail, whose elements the masks drop.
struct ExprPoint {
  Halide::Expr b, h, g, qIdx, kvIdx, qpos, tq, tk, score;
};

// random::philox4x32 over Exprs (uint32 counter words): the same rounds, so the bits match the
// reference's.
std::array<Halide::Expr, 4> philox(std::array<Halide::Expr, 4> counter, uint32_t key0,
                                   uint32_t key1);
// Word `index % 4` of a Philox block.
Halide::Expr philoxWord(const std::array<Halide::Expr, 4>& block, Halide::Expr index);

// Parts of an expression that draw from Philox, tabled: by the part's drawIdentity, the table's
// value at (q_idx, kv_idx, h, b), each index clamped into the table. Read instead of ten Philox
// rounds per score, and instead of rounds that Halide's passes over a block loop's predicate
// expand (BigBird's drawn key blocks; ScoreTerms says which parts are tabled, and how).
using TabledDraws = std::map<
    std::string,
    std::function<Halide::Expr(Halide::Expr, Halide::Expr, Halide::Expr, Halide::Expr)>>;

// A part's canonical text with the key of each of its philox() draws, which print() leaves out
// (a mask joins the built-ins' draws, under BigBird's stream, and mask_mod's, under the
// expressions' stream): equal only for parts that compute the same values.
std::string drawIdentity(const expr::Node& part);

// `aux` holds the spec's aux tensors by name; their reads are clamped to the buffer's extent,
// which the spec's check proved they never leave, so Halide's bounds inference sees the region.
Halide::Expr translate(const expr::Node& node, const ExprPoint& point, const Spec& spec,
                       const std::map<std::string, Halide::ImageParam>& aux,
                       const TabledDraws& draws = {});

// `e`, computed from `node`, with IEEE arithmetic op by op when `node` computes floats
// (StrictFloats.h), so NaN and Inf keep their meaning (x == x, inf - inf, 0 * inf) instead of
// Halide's and LLVM's assumption that they never occur; as it is otherwise (ints and bools need
// no such care).
Halide::Expr withIeeeFloats(const expr::Node& node, Halide::Expr e);

} // namespace attnc::halide

#endif // ATTNC_COMPILER_BACKENDS_HALIDE_EXPRTOHALIDE_H
