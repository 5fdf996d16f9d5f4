//===- Passes.td - the attn pipeline's passes ---------------------------------===//
#ifndef ATTN_PASSES_TD
#define ATTN_PASSES_TD

include "mlir/Pass/PassBase.td"

def AttnToOnline : Pass<"attn-to-online", "mlir::func::FuncOp"> {
  let summary = "Decomposes attn.attention into the online-softmax form on buffers";
  let description = [{
    Rewrites each `attn.attention` whose operands come from `bufferization.to_tensor` and whose
    results are stored with `bufferization.materialize_in_destination` (the form attnc builds
    at the kernel boundary) into `attn.online_init`, one `attn.online_update` over the whole
    domain and `attn.online_finalize` writing the destinations, with the state in heap buffers.
    Tiling (transform.attn.tile_queries) later moves that state onto the stack per tile.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::memref::MemRefDialect"];
}

def AttnOutlineTasks : Pass<"attn-outline-tasks", "mlir::ModuleOp"> {
  let summary = "Splits each kernel's parallel loop into a task count and a task-range function";
  let description = [{
    For each function marked `attn.kernel` whose body is index arithmetic followed by one
    one-dimensional `scf.forall`, makes `@<name>_tasks(args) -> index` (the trip count) and
    `@<name>_run(%first, %last, args)` (iterations [first, last) in order, stack buffers
    hoisted to the entry), both with a C interface, and erases the original. The attnc
    runtime's thread pool then runs ranges of tasks in parallel.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::func::FuncDialect"];
}

def AttnApproximateMath : Pass<"attn-approximate-math"> {
  let summary = "Replaces math.exp, math.log and math.tanh by vectorisable polynomials";
  let description = [{
    Uses MLIR's polynomial approximations (about 1-2 ulp in f32), so that exponentials stay
    in vector registers instead of becoming one libm call per lane.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::vector::VectorDialect",
                           "mlir::math::MathDialect"];
}

#endif // ATTN_PASSES_TD
