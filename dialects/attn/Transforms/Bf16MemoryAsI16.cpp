//===- Bf16MemoryAsI16.cpp - masked bf16 loads and stores as i16 ones ---------===//
#include "attn/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace attnc::attn {
#define GEN_PASS_DEF_ATTNBF16MEMORYASI16
#include "attn/Transforms/Passes.h.inc"
} // namespace attnc::attn

using namespace mlir;

namespace {

// vector<N x bf16> as vector<N x i16>, or null for any other type.
VectorType asI16(Type type) {
  auto vector = dyn_cast<VectorType>(type);
  if (!vector || !vector.getElementType().isBF16())
    return {};
  return vector.clone(IntegerType::get(type.getContext(), 16));
}

void loadAsI16(LLVM::MaskedLoadOp load) {
  VectorType bits = asI16(load.getType());
  if (!bits)
    return;
  OpBuilder b(load);
  SmallVector<Value, 1> passThru;
  for (Value value : load.getPassThru())
    passThru.push_back(b.create<LLVM::BitcastOp>(load.getLoc(), bits, value));
  auto loaded = b.create<LLVM::MaskedLoadOp>(load.getLoc(), bits, load.getData(), load.getMask(),
                                             passThru, load.getAlignmentAttr());
  load.replaceAllUsesWith(
      b.create<LLVM::BitcastOp>(load.getLoc(), load.getType(), loaded.getResult()).getResult());
  load.erase();
}

void storeAsI16(LLVM::MaskedStoreOp store) {
  VectorType bits = asI16(store.getValue().getType());
  if (!bits)
    return;
  OpBuilder b(store);
  Value value = b.create<LLVM::BitcastOp>(store.getLoc(), bits, store.getValue());
  b.create<LLVM::MaskedStoreOp>(store.getLoc(), value, store.getData(), store.getMask(),
                                store.getAlignmentAttr());
  store.erase();
}

struct Bf16MemoryAsI16Pass : attnc::attn::impl::AttnBf16MemoryAsI16Base<Bf16MemoryAsI16Pass> {
  void runOnOperation() override {
    getOperation()->walk([](Operation* op) {
      if (auto load = dyn_cast<LLVM::MaskedLoadOp>(op))
        loadAsI16(load);
      else if (auto store = dyn_cast<LLVM::MaskedStoreOp>(op))
        storeAsI16(store);
    });
  }
};

} // namespace
