// dL/d(the kernel's inputs) from dL/d(the head inputs): prepareHeadInputs' steps taken back in
// reverse order (Linformer's E and F, RoPE, mha's projections).
#ifndef ATTNC_COMPILER_REFERENCE_INPUTGRADIENTS_H
#define ATTNC_COMPILER_REFERENCE_INPUTGRADIENTS_H

#include "Reference/Attention.h"

namespace attnc {

// Takes gradients.q, k and v back to the kernel's inputs: for mha into gradients.arguments (its
// inputs' and w_q's, w_k's, w_v's), else in place (head-major, as the inputs read); adds
// Linformer's e and f.
void addInputGradients(const KernelTensors& tensors, AttentionGradients& gradients,
                       const ParallelFor& parallelFor);

} // namespace attnc

#endif // ATTNC_COMPILER_REFERENCE_INPUTGRADIENTS_H
