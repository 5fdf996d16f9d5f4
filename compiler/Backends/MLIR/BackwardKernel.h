// The backward entry's kernel (backward=true): attn.backward in a function taking the bundle's
// backward arguments (Abi/Arguments.h, backwardArguments), with the forward's score regions and
// score_grad, the derivative of its score expressions by the raw score (ExprDerive.h through
// buildScoreGradientRegion).
#ifndef ATTNC_COMPILER_BACKENDS_MLIR_BACKWARDKERNEL_H
#define ATTNC_COMPILER_BACKENDS_MLIR_BACKWARDKERNEL_H

#include "Spec/Spec.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace attnc::mlirbackend {

// Builds kBackwardKernelName at the builder's insertion point (a module's body). The spec is
// one the backend's backward row covers (MlirBackend.cpp): sdpa, whose gradients are dq, dk,
// dv, grad_sinks and the learned aux tensors' and bias's, or mha, whose projections are
// recomputed in `operandDtype` (the forward's workspace type) and taken back
// (ProjectionsBackward.h).
void buildBackwardKernel(mlir::ImplicitLocOpBuilder& b, const Spec& spec, DType operandDtype);

} // namespace attnc::mlirbackend

#endif // ATTNC_COMPILER_BACKENDS_MLIR_BACKWARDKERNEL_H
