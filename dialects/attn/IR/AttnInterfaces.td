//===- AttnInterfaces.td - what every score-computing op offers --------------===//
//
// The buffer ops that form the scores s_ij of attn.attention over a domain (online_update,
// weights) take the same operands, attributes and expression regions; lowerings read them
// through this interface, so the score terms are written once (ScoreTerms.h).
//
//===---------------------------------------------------------------------------===//
#ifndef ATTN_INTERFACES_TD
#define ATTN_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Attn_ScoreOpInterface : OpInterface<"ScoreOpInterface"> {
  let cppNamespace = "::attnc::attn";
  let description = [{
    An op that computes attn.attention's scores over a domain of (batch, query head, query
    row, key): `offsets` = [b0, h0, i0, j0] and `sizes` = [nb, nh, ni, nj], with the
    attributes and expression regions of attn.attention, `num_heads` query heads and `seq_q`
    query rows.
  }];
  let methods = [
    InterfaceMethod<"The keys [B, H_kv, Tk, d_k]",
                    "::mlir::TypedValue<::mlir::MemRefType>", "getKey", (ins),
                    [{ return $_op.getKey(); }]>,
    InterfaceMethod<"A paged cache's block table [B, Tk / page_size] (null: keys are [B, H_kv, Tk, d_k])",
                    "::mlir::TypedValue<::mlir::MemRefType>", "getBlockTable", (ins),
                    [{ return $_op.getBlockTable(); }]>,
    InterfaceMethod<"A paged cache's keys per sequence [B] (with the block table)",
                    "::mlir::TypedValue<::mlir::MemRefType>", "getSeqLens", (ins),
                    [{ return $_op.getSeqLens(); }]>,
    InterfaceMethod<"A quantized cache's key scales (null: keys are floats)",
                    "::mlir::TypedValue<::mlir::MemRefType>", "getKeyScale", (ins),
                    [{ return $_op.getKeyScale(); }]>,
    InterfaceMethod<"Additive score weights [H_kv, H / H_kv, d_k] (null: the score is q . k)",
                    "::mlir::TypedValue<::mlir::MemRefType>", "getScoreWeights", (ins),
                    [{ return $_op.getScoreWeights(); }]>,
    InterfaceMethod<"The aux tensors the expression regions read",
                    "::mlir::Operation::operand_range", "getAux", (ins),
                    [{ return $_op.getAux(); }]>,
    InterfaceMethod<"The domain's offsets [b0, h0, i0, j0]",
                    "::mlir::Operation::operand_range", "getOffsets", (ins),
                    [{ return $_op.getOffsets(); }]>,
    InterfaceMethod<"The domain's sizes [nb, nh, ni, nj]",
                    "::mlir::Operation::operand_range", "getSizes", (ins),
                    [{ return $_op.getSizes(); }]>,
    InterfaceMethod<"Tq", "::mlir::TypedValue<::mlir::IndexType>", "getSeqQ", (ins),
                    [{ return $_op.getSeqQ(); }]>,
    InterfaceMethod<"The scores' scale", "::llvm::APFloat", "getScale", (ins),
                    [{ return $_op.getScale(); }]>,
    InterfaceMethod<"H, the query heads", "uint64_t", "getNumHeads", (ins),
                    [{ return $_op.getNumHeads(); }]>,
    InterfaceMethod<"bottom_right or top_left", "::llvm::StringRef", "getCausalAlign", (ins),
                    [{ return $_op.getCausalAlign(); }]>,
    InterfaceMethod<"The score_mod region (empty: none)", "::mlir::Region&", "getScoreMod",
                    (ins), [{ return $_op.getScoreMod(); }]>,
    InterfaceMethod<"The mask_mod region (empty: none)", "::mlir::Region&", "getMaskMod",
                    (ins), [{ return $_op.getMaskMod(); }]>
  ];
}

#endif // ATTN_INTERFACES_TD
