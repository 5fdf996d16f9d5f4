//===- ExpressionBounds.h - the tile classifier of the MLIR lowerings ------------===//
//
// Whether a mask_mod region can keep any score of an update's domain, and whether it can mask
// any, from interval bounds of its scalar ops over the domain's corners, emitted as code the
// kernel runs per key block: the lowering skips a block it rules out (an update all of whose
// scores are masked leaves the state as it was), and does not evaluate a region that reads aux
// tensors in a block it keeps whole (the built-in masks are mask_mod too). An aux read is
// bounded by the least and greatest element over the box its indices span in the domain,
// scanned from the tensor (a document mask's block is ruled out when the rows' documents and
// the keys' cannot meet): a few dozen loads per chunk of keys, against the chunk's rows x keys x
// d multiply-adds. A per-score read (one index following the rows, another the keys, such as
// the tensor mask's) is not scanned: its box is the chunk's every score. What has no bound here
// (bits, transcendental functions, % beyond its divisor's range, such reads, a box of more than
// 4096 elements) is taken as able to be anything, unless every int operand of the op is one point
// over the domain: then the op is evaluated there (a Philox draw whose counters are constant over
// a chunk, as BigBird's q_idx // block and kv_idx // block are, is that chunk's one value).
//
// The bounds are sound for the kernel's own wrapping 32-bit arithmetic: int +, -, * and abs
// are bounded in 64 bits and taken as anything where an end leaves 32; the float ops used (+,
// -, *, / by a constant, floor, min, max, conversions) are monotone in each operand under
// rounding, so their values at the corners bound their values inside. A float's range bounds
// its values other than NaN, and says apart whether it may be NaN (an aux element, inf - inf,
// inf * 0, inf / inf), since a NaN does not stay one: a comparison makes it false (!= true),
// and min and max the other operand.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_EXPRESSIONBOUNDS_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_EXPRESSIONBOUNDS_H

#include "attn/IR/ExpressionRegion.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Region.h"

namespace attnc::attn {

// The ranges of a region's integer arguments over a domain, both ends included, as i32
// scalars, indexed by ExpressionArgument (the score's entries are unused: masks do not read it).
struct DomainCorners {
  std::array<mlir::Value, kExpressionArgumentNames.size()> first, last;
};

// Two i1s: mayKeep is false only when the mask region is false at every point of the domain,
// mayMask only when it is true at every point; `aux` are the tensors its attn.aux_load ops read.
struct MaskBounds {
  mlir::Value mayKeep, mayMask;
};
MaskBounds maskBounds(mlir::ImplicitLocOpBuilder& b, mlir::Region& mask, mlir::ValueRange aux,
                      const DomainCorners& corners);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_EXPRESSIONBOUNDS_H
