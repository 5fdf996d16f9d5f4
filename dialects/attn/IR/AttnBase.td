//===- AttnBase.td - the attn dialect ----------------------------------------===//
//
// The attention operations attnc compiles: one op carries a whole attention (variant, masks,
// score modifiers), so a spec maps to IR one to one and passes can decompose it later.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTN_BASE_TD
#define ATTN_BASE_TD

include "mlir/IR/OpBase.td"

def Attn_Dialect : Dialect {
  let name = "attn";
  let summary = "Attention as a single operation, with masks and score modifiers";
  let description = [{
    The `attn` dialect describes attention the way an attnc spec does: queries, keys and
    values plus the masks and score modifiers that shape the scores. Its ops keep that
    semantics whole, so that a pipeline can decompose them into an online-softmax form, tile
    it with transform-dialect schedules and lower it to vector code, without ever losing what
    the attention means.
  }];
  let cppNamespace = "::attnc::attn";
  // gpu.yield ends the expression regions (Attn_ExpressionRegion).
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

class Attn_Op<string mnemonic, list<Trait> traits = []>
    : Op<Attn_Dialect, mnemonic, traits>;

#endif // ATTN_BASE_TD
