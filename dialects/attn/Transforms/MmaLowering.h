//===- MmaLowering.h - the kernels of lower_to_mma, from one task -------------===//
//
// MmaLowering replaces a task loop by the launches of its tensor-core kernels: the one-pass
// kernel (MmaOnePass.cpp), or for decoding the split-key kernels and their merge
// (MmaSplitKey.cpp); LowerToMma.cpp checks the task and chooses. Private to those files.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTNC_DIALECTS_ATTN_TRANSFORMS_MMALOWERING_H
#define ATTNC_DIALECTS_ATTN_TRANSFORMS_MMALOWERING_H

#include "attn/Kit/OnlineState.h"
#include "attn/Transforms/MmaFragments.h"
#include "attn/Transforms/Transforms.h"
#include "mlir/IR/IRMapping.h"

#include <utility>

namespace attnc::attn {

// The ops of one task that the lowering replaces.
struct TaskOps {
  OnlineInitOp init;
  mlir::scf::ForOp keys; // the key-block loop, holding `update`
  OnlineUpdateOp update;
  OnlineFinalizeOp finalize;
};

// Which kernel a launch runs: the whole task, one key split of it, or the merge of the splits.
enum class Phase { Whole, Partial, Combine };

class MmaLowering : private MmaFragments {
public:
  MmaLowering(mlir::RewriterBase& rewriter, mlir::scf::ForallOp tasks, const TaskOps& ops,
              const MmaOptions& options);

  mlir::LogicalResult emit();

private:
  // LowerToMma.cpp: what the tensor cores take, and what the host checks.
  mlir::LogicalResult check();
  void recordAlignedArgs(mlir::ImplicitLocOpBuilder& b);

  // MmaOnePass.cpp: a launch of the task loop, the key loop and the one-pass finalize.
  void emitLaunch(mlir::ImplicitLocOpBuilder& b, Phase phase, mlir::Value count,
                  mlir::Value splits);
  void emitKeyLoop(mlir::ImplicitLocOpBuilder& b, mlir::IRMapping& map, Phase phase);
  // The task's batch, heads, rows, cache and positions, and Q's fragments.
  void placeTask(mlir::ImplicitLocOpBuilder& b, mlir::IRMapping& map);
  // One key block's step of the key loop: the state after it.
  llvm::SmallVector<mlir::Value> emitKeyBlock(mlir::ImplicitLocOpBuilder& b, mlir::IRMapping& map,
                                              mlir::Value keyBlock, mlir::Value upper,
                                              mlir::ValueRange carried);
  // The block's softmax step on the scores' fragments `s` (made P in place): each C row's new
  // max, its rescale factor and its partial sum.
  struct BlockSoftmax {
    mlir::Value newMax[2], alpha[2], sums[2];
  };
  BlockSoftmax emitBlockSoftmax(mlir::ImplicitLocOpBuilder& b, llvm::SmallVector<mlir::Value>& s,
                                mlir::Value keyBlock, mlir::ValueRange carried);
  // O = alpha O + P V.
  llvm::SmallVector<mlir::Value> emitValueProducts(mlir::ImplicitLocOpBuilder& b,
                                                   llvm::ArrayRef<mlir::Value> s,
                                                   const BlockSoftmax& step,
                                                   mlir::ValueRange carried);
  void emitFinalize(mlir::ImplicitLocOpBuilder& b, mlir::IRMapping& map);

  // MmaSplitKey.cpp: the split's keys, its partial state, the merge, and the choice.
  std::pair<mlir::Value, mlir::Value> splitKeyRange(mlir::ImplicitLocOpBuilder& b,
                                                    mlir::Value lower, mlir::Value upper);
  mlir::Value workspaceRow(mlir::ImplicitLocOpBuilder& b, mlir::Value rowInTile);
  void emitPartialStore(mlir::ImplicitLocOpBuilder& b, mlir::IRMapping& map);
  void emitCombine(mlir::ImplicitLocOpBuilder& b, mlir::IRMapping& map);
  void emitSplitOrWhole(mlir::ImplicitLocOpBuilder& b, mlir::Value count);

  mlir::RewriterBase& rewriter;
  mlir::scf::ForallOp tasks;
  TaskOps ops;
  OnlineUpdateOp update;
  MmaOptions options;
  // exp2 (ex2.approx); P is rounded to the storage type for the PV MMA: no shift for f16
  // (OnlineSoftmax.h).
  const OnlineState softmax;

  // Unit-stride views of the tensors, made before the launch.
  mlir::Value query, key, value, output;
  // Split-key workspace: acc [splits, tasks * rows, dv], m and l [splits, tasks * rows].
  mlir::Value workAcc, workMax, workSum;
  // Inside the launch.
  mlir::Value taskIndex, splitIndex; // block ids x and y
  mlir::Value splitCount;            // grid size y
  // The state in registers after the key loop: m, l (per C row) and O (per 8 columns of d_v).
  mlir::Value maxRow[2], sumRow[2];
  llvm::SmallVector<mlir::Value> acc;
};

} // namespace attnc::attn

#endif // ATTNC_DIALECTS_ATTN_TRANSFORMS_MMALOWERING_H
