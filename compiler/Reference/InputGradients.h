// dL/d(the kernel's inputs) from dL/d(the head inputs): prepareHeadInputs' steps taken back in
// reverse order (Linformer's E and F, RoPE, mha's projections).
#ifndef ATTNC_COMPILER_REFERENCE_INPUTGRADIENTS_H
#define ATTNC_COMPILER_REFERENCE_INPUTGRADIENTS_H

#include "Reference/Attention.h"

namespace attnc {

// Adds to gradients.arguments q's, k's and v's gradients, dense in their arguments' order, and
// those of mha's w_q, w_k, w_v and Linformer's e and f.
void addInputGradients(const KernelTensors& tensors, AttentionGradients& gradients,
                       const ParallelFor& parallelFor);

} // namespace attnc

#endif // ATTNC_COMPILER_REFERENCE_INPUTGRADIENTS_H
