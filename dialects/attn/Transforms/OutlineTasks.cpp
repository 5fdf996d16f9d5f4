//===- OutlineTasks.cpp - a kernel's parallel loops as task functions ---------===//
#include "attn/Transforms/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"

namespace attnc::attn {
#define GEN_PASS_DEF_ATTNOUTLINETASKS
#include "attn/Transforms/Passes.h.inc"
} // namespace attnc::attn

using namespace mlir;
using namespace attnc::attn;

namespace {

constexpr int64_t kWorkspaceAlignment = 64; // a cache line; more than any vector load needs

// A kernel's parts: the buffers that live across phases, the views of them beside the phases
// (a variant's operands seen heads first: memref.cast, transpose, expand_shape; a part of a
// row: subview), which only the run function can form, and the phases in order.
struct KernelParts {
  SmallVector<memref::AllocOp> workspace;
  SmallVector<Operation*> workspaceViews;
  SmallVector<scf::ForallOp> phases;
};

// The extent of dim `d` of `view`, a workspace buffer seen through views, as the buffer's sizes
// give it; null through any other op.
Value workspaceExtent(OpBuilder& b, Location loc, Value view, unsigned d) {
  auto type = cast<MemRefType>(view.getType());
  if (!type.isDynamicDim(d))
    return b.create<arith::ConstantIndexOp>(loc, type.getDimSize(d));
  Operation* def = view.getDefiningOp();
  if (auto alloc = dyn_cast_or_null<memref::AllocOp>(def))
    return alloc.getDynamicSizes()[type.getDynamicDimIndex(d)];
  if (auto cast = dyn_cast_or_null<memref::CastOp>(def))
    return workspaceExtent(b, loc, cast.getSource(), d);
  if (auto transpose = dyn_cast_or_null<memref::TransposeOp>(def))
    return workspaceExtent(b, loc, transpose.getIn(), transpose.getPermutation().getDimPosition(d));
  if (auto expand = dyn_cast_or_null<memref::ExpandShapeOp>(def))
    return expand.getOutputShape()[type.getDynamicDimIndex(d)];
  if (auto subview = dyn_cast_or_null<memref::SubViewOp>(def);
      subview && subview.getSourceType().getRank() == type.getRank())
    return subview.getDynamicSizes()[type.getDynamicDimIndex(d)];
  return {};
}

// The extents of workspace views, read with memref.dim anywhere in the kernel (a phase's trip
// count, which the task-count function forms without the workspace), as their buffers' sizes.
// MLIR's own (memref.dim's folds, resolve-ranked-shaped-type-result-dims) see through cast and
// expand_shape but not transpose, which the heads-first views take.
void resolveWorkspaceExtents(func::FuncOp kernel) {
  SmallVector<memref::DimOp> dims;
  kernel.walk([&](memref::DimOp dim) { dims.push_back(dim); });
  for (memref::DimOp dim : dims) {
    std::optional<int64_t> index = dim.getConstantIndex();
    if (!index)
      continue;
    OpBuilder b(dim);
    if (Value extent = workspaceExtent(b, dim.getLoc(), dim.getSource(), *index)) {
      dim.replaceAllUsesWith(extent);
      dim.erase();
    }
  }
}

// Index arithmetic anywhere, workspace allocations before the first phase and their
// deallocations after the last, the phases: 1-d scf.forall loops without outputs.
FailureOr<KernelParts> findParts(func::FuncOp kernel) {
  KernelParts parts;
  for (Operation& op : kernel.getBody().front()) {
    if (auto forall = dyn_cast<scf::ForallOp>(op)) {
      if (forall.getRank() != 1 || !forall.getOutputs().empty())
        return kernel.emitOpError() << "attn-outline-tasks: a phase must be a 1-d scf.forall "
                                       "without outputs";
      parts.phases.push_back(forall);
    } else if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      if (!parts.phases.empty() || !alloc.getType().getLayout().isIdentity())
        return kernel.emitOpError() << "attn-outline-tasks: workspace buffers must be "
                                       "allocated before the first phase, with the identity "
                                       "layout";
      parts.workspace.push_back(alloc);
    } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
      if (!dealloc.getMemref().getDefiningOp<memref::AllocOp>())
        return kernel.emitOpError() << "attn-outline-tasks: deallocates a buffer it did not "
                                       "allocate";
    } else if (!isa<func::ReturnOp>(op) && !isMemoryEffectFree(&op)) {
      return kernel.emitOpError() << "attn-outline-tasks: only index arithmetic may come beside "
                                     "the phases, found "
                                  << op.getName();
    } else if (llvm::any_of(op.getOperands(), [&](Value v) {
                 Operation* def = v.getDefiningOp();
                 return def && (isa<memref::AllocOp>(def) ||
                                llvm::is_contained(parts.workspaceViews, def));
               })) {
      parts.workspaceViews.push_back(&op);
    }
  }
  if (parts.phases.empty())
    return kernel.emitOpError() << "attn-outline-tasks: the kernel has no scf.forall";
  return parts;
}

// A new function `name` taking `leading` index arguments, the kernel's and `trailing`, its
// body the kernel's index arithmetic; `mapping` maps the kernel's values to the new ones.
func::FuncOp startFunction(OpBuilder& b, func::FuncOp kernel, const KernelParts& parts,
                           StringRef name, unsigned leading, TypeRange trailing, TypeRange results,
                           IRMapping& mapping) {
  SmallVector<Type> inputs(leading, b.getIndexType());
  llvm::append_range(inputs, kernel.getArgumentTypes());
  llvm::append_range(inputs, trailing);
  auto fn = b.create<func::FuncOp>(kernel.getLoc(), (kernel.getSymName() + name).str(),
                                   b.getFunctionType(inputs, results));
  fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  Block* entry = fn.addEntryBlock();
  for (auto [from, to] :
       llvm::zip(kernel.getArguments(), entry->getArguments().drop_front(leading)))
    mapping.map(from, to);
  OpBuilder body = OpBuilder::atBlockEnd(entry);
  for (Operation& op : kernel.getBody().front())
    if (!isa<func::ReturnOp>(op) && isMemoryEffectFree(&op) &&
        !llvm::is_contained(parts.workspaceViews, &op))
      body.clone(op, mapping);
  return fn;
}

// Each workspace buffer's byte offset, and the total: sizes rounded up to the alignment.
std::pair<SmallVector<Value>, Value> workspaceLayout(OpBuilder& b, Location loc,
                                                     ArrayRef<memref::AllocOp> buffers,
                                                     IRMapping& mapping) {
  auto constant = [&](int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); };
  SmallVector<Value> offsets;
  Value end = constant(0);
  for (memref::AllocOp alloc : buffers) {
    offsets.push_back(end);
    MemRefType type = alloc.getType();
    Value bytes = constant(type.getElementTypeBitWidth() / 8);
    auto dynamicSize = alloc.getDynamicSizes().begin();
    for (int64_t d = 0; d < type.getRank(); ++d) {
      Value extent = type.isDynamicDim(d) ? mapping.lookupOrDefault(*dynamicSize++)
                                          : constant(type.getDimSize(d)).getResult();
      bytes = b.create<arith::MulIOp>(loc, bytes, extent);
    }
    Value aligned = b.create<arith::MulIOp>(
        loc, b.create<arith::CeilDivUIOp>(loc, bytes, constant(kWorkspaceAlignment)),
        constant(kWorkspaceAlignment));
    end = b.create<arith::AddIOp>(loc, end, aligned);
  }
  return {offsets, end};
}

// Stack and heap buffers start on a cache line: 16-byte aligned, a tile's vectors split lines
// or not by where the thread's stack happened to start.
constexpr int64_t kCacheLineBytes = 64;

// The phase's iterations [first, last) at the builder: stack buffers of static size first,
// allocated once per range; on the heap when together they would take more than
// `stackBytes` of the thread's stack.
void emitPhase(OpBuilder& b, scf::ForallOp phase, Value first, Value last, int64_t stackBytes,
               IRMapping& mapping) {
  Location loc = phase.getLoc();
  SmallVector<memref::AllocaOp> hoisted;
  int64_t bytes = 0;
  for (Operation& op : phase.getBody()->without_terminator())
    if (auto alloca = dyn_cast<memref::AllocaOp>(op);
        alloca && alloca.getType().hasStaticShape()) {
      MemRefType type = alloca.getType();
      bytes += type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
      hoisted.push_back(alloca);
    }
  const bool onHeap = bytes > stackBytes;
  SmallVector<Value> heap;
  const IntegerAttr cacheLine = b.getI64IntegerAttr(kCacheLineBytes);
  for (memref::AllocaOp alloca : hoisted) {
    if (!onHeap) {
      auto buffer = cast<memref::AllocaOp>(b.clone(*alloca, mapping));
      buffer.setAlignmentAttr(cacheLine);
      continue;
    }
    auto buffer = b.create<memref::AllocOp>(alloca.getLoc(), alloca.getType(), cacheLine);
    mapping.map(alloca.getResult(), buffer.getResult());
    heap.push_back(buffer);
  }
  Value step = b.create<arith::ConstantIndexOp>(loc, 1);
  auto tasks = b.create<scf::ForOp>(loc, first, last, step);
  mapping.map(phase.getInductionVar(0), tasks.getInductionVar());
  OpBuilder tb = OpBuilder::atBlockBegin(tasks.getBody());
  for (Operation& op : phase.getBody()->without_terminator())
    if (!llvm::is_contained(hoisted, dyn_cast<memref::AllocaOp>(op)))
      tb.clone(op, mapping);
  for (Value buffer : heap)
    b.create<memref::DeallocOp>(loc, buffer);
}

LogicalResult outline(func::FuncOp kernel, int64_t stackBytes) {
  resolveWorkspaceExtents(kernel);
  FailureOr<KernelParts> found = findParts(kernel);
  if (failed(found))
    return failure();
  KernelParts& parts = *found;
  OpBuilder b(kernel);
  Location loc = kernel.getLoc();
  Type indexType = b.getIndexType();
  auto workspaceType = MemRefType::get({ShapedType::kDynamic}, b.getI8Type());
  const int64_t phaseCount = static_cast<int64_t>(parts.phases.size());
  auto cases = llvm::to_vector(llvm::seq<int64_t>(0, phaseCount));

  // @<name>_phases() -> index
  auto phases = b.create<func::FuncOp>(loc, (kernel.getSymName() + "_phases").str(),
                                       b.getFunctionType({}, {indexType}));
  phases->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  OpBuilder pb = OpBuilder::atBlockEnd(phases.addEntryBlock());
  pb.create<func::ReturnOp>(loc, pb.create<arith::ConstantIndexOp>(loc, phaseCount).getResult());

  // @<name>_workspace(args) -> index: bytes
  IRMapping workspaceMap;
  func::FuncOp workspace =
      startFunction(b, kernel, parts, "_workspace", 0, {}, {indexType}, workspaceMap);
  OpBuilder wb = OpBuilder::atBlockEnd(&workspace.getBody().front());
  wb.create<func::ReturnOp>(loc, workspaceLayout(wb, loc, parts.workspace, workspaceMap).second);

  // @<name>_tasks(phase, args) -> index: the phase's trip count, 0 past the last phase.
  IRMapping countMap;
  func::FuncOp count = startFunction(b, kernel, parts, "_tasks", 1, {}, {indexType}, countMap);
  Block& countEntry = count.getBody().front();
  OpBuilder cb = OpBuilder::atBlockEnd(&countEntry);
  auto countSwitch = cb.create<scf::IndexSwitchOp>(loc, TypeRange{indexType},
                                                   countEntry.getArgument(0), cases, phaseCount);
  for (auto [region, phase] : llvm::zip(countSwitch.getCaseRegions(), parts.phases)) {
    OpBuilder rb = OpBuilder::atBlockEnd(&region.emplaceBlock());
    Value upper = getValueOrCreateConstantIndexOp(rb, loc, phase.getMixedUpperBound()[0]);
    rb.create<scf::YieldOp>(loc, countMap.lookupOrDefault(upper));
  }
  OpBuilder db = OpBuilder::atBlockEnd(&countSwitch.getDefaultRegion().emplaceBlock());
  db.create<scf::YieldOp>(loc, db.create<arith::ConstantIndexOp>(loc, 0).getResult());
  cb.create<func::ReturnOp>(loc, countSwitch.getResults());

  // @<name>_run(phase, first, last, args, workspace): the phase's tasks [first, last).
  IRMapping runMap;
  func::FuncOp run = startFunction(b, kernel, parts, "_run", 3, {workspaceType}, {}, runMap);
  Block& runEntry = run.getBody().front();
  OpBuilder rb = OpBuilder::atBlockEnd(&runEntry);
  Value workspaceBytes = runEntry.getArguments().back();
  SmallVector<Value> offsets = workspaceLayout(rb, loc, parts.workspace, runMap).first;
  for (auto [alloc, offset] : llvm::zip(parts.workspace, offsets)) {
    SmallVector<Value> sizes = llvm::map_to_vector(
        alloc.getDynamicSizes(), [&](Value v) { return runMap.lookupOrDefault(v); });
    runMap.map(alloc.getResult(), rb.create<memref::ViewOp>(loc, alloc.getType(), workspaceBytes,
                                                            offset, sizes)
                                      .getResult());
  }
  for (Operation* view : parts.workspaceViews)
    rb.clone(*view, runMap);
  auto runSwitch = rb.create<scf::IndexSwitchOp>(loc, TypeRange{}, runEntry.getArgument(0), cases,
                                                 phaseCount);
  for (auto [region, phase] : llvm::zip(runSwitch.getCaseRegions(), parts.phases)) {
    OpBuilder body = OpBuilder::atBlockEnd(&region.emplaceBlock());
    emitPhase(body, phase, runEntry.getArgument(1), runEntry.getArgument(2), stackBytes, runMap);
    body.create<scf::YieldOp>(loc);
  }
  OpBuilder::atBlockEnd(&runSwitch.getDefaultRegion().emplaceBlock()).create<scf::YieldOp>(loc);
  rb.create<func::ReturnOp>(loc);
  kernel.erase();
  return success();
}

struct OutlineTasksPass : attnc::attn::impl::AttnOutlineTasksBase<OutlineTasksPass> {
  using AttnOutlineTasksBase::AttnOutlineTasksBase;
  void runOnOperation() override {
    SmallVector<func::FuncOp> kernels;
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (fn->hasAttr("attn.kernel"))
        kernels.push_back(fn);
    for (func::FuncOp kernel : kernels)
      if (failed(outline(kernel, stackBytes)))
        return signalPassFailure();
  }
};

} // namespace
