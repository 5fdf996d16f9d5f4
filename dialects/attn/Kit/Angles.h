//===- Angles.h - cosines and sines of positions' angles ------------------===//
//
// RoPE's rotations and mha's sinusoidal encoding take the cosine and sine of an angle that
// grows with the position: formed in f64, where a far position's angle is still exact to
// f32's precision, reduced modulo 2 pi there, then taken in f32.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_KIT_ANGLES_H
#define ATTNC_DIALECTS_ATTN_KIT_ANGLES_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc::attn {

// cos and sin (f32) of `angle` (f64): reduced modulo 2 pi in f64, then taken on [-pi, pi].
std::pair<mlir::Value, mlir::Value> cosSin(mlir::ImplicitLocOpBuilder& b, mlir::Value angle);
// sin alone, the same way.
mlir::Value sinOf(mlir::ImplicitLocOpBuilder& b, mlir::Value angle);

// A position (index) as f64, the angles' unit.
mlir::Value positionAsF64(mlir::ImplicitLocOpBuilder& b, mlir::Value position);

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_KIT_ANGLES_H
