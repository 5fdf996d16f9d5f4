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
  let summary = "Splits each kernel's parallel loops into phase, workspace, task count and "
                "task-range functions";
  let description = [{
    For each function marked `attn.kernel` whose body is index arithmetic, workspace buffers
    (`memref.alloc`), one or more one-dimensional `scf.forall` loops (the phases, run one
    after the other) and the buffers' `memref.dealloc`, makes, each with a C interface:

    - `@<name>_phases() -> index`: the number of phases;
    - `@<name>_workspace(args) -> index`: the bytes of workspace the buffers need, each at a
      64-byte aligned offset;
    - `@<name>_tasks(%phase, args) -> index`: the phase's trip count;
    - `@<name>_run(%phase, %first, %last, args, %workspace: memref<?xi8>)`: the phase's
      iterations [first, last) in order, the buffers views of the workspace, stack buffers
      hoisted to the phase's entry;

    and erases the original. The attnc runtime allocates the workspace once per call and runs
    each phase's tasks on its thread pool, in ranges, finishing one phase before the next.

    The hoisted buffers live on the calling thread's stack while they take at most
    `stack-bytes` together; past that (a head dim in the thousands: 32768 x 48 f32 is 6 MiB)
    they are heap buffers, `memref.alloc` at the entry and `memref.dealloc` before the return,
    so no thread's stack, however small, overflows.
  }];
  let options = [
    Option<"stackBytes", "stack-bytes", "int64_t", /*default=*/"131072",
           "the most bytes of hoisted buffers kept on the stack">
  ];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::func::FuncDialect",
                           "mlir::memref::MemRefDialect"];
}

def AttnMapTasksToGpu : Pass<"attn-map-tasks-to-gpu", "mlir::ModuleOp"> {
  let summary = "Runs each phase of a kernel as one GPU thread per task";
  let description = [{
    For each function marked `attn.kernel`, replaces each of its one-dimensional `scf.forall`
    loops over tasks (its phases, such as RoPE's rotations before the attention) by a
    `gpu.launch` of ceil(tasks / block-threads) blocks of `block-threads` threads, thread t of
    block b running task b * block-threads + t when it exists; the launches run in order on
    one stream. The CUDA schedule makes one task per query row, so a warp runs 32 consecutive
    rows of one head, and its lanes read the same keys and values (one broadcast load each).
    The workspace buffers beside the phases (`memref.alloc`, `memref.dealloc`) become
    `gpu.alloc` and `gpu.dealloc` on that stream. Marks the module as a GPU container and the
    kernel with a C interface for the bundle's entry.
  }];
  let options = [
    Option<"blockThreads", "block-threads", "int64_t", /*default=*/"128",
           "threads per block">
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect",
                           "mlir::arith::ArithDialect"];
}

def AttnApproximateMath : Pass<"attn-approximate-math"> {
  let summary = "Replaces math.exp, math.log and math.tanh by vectorisable polynomials";
  let description = [{
    Uses MLIR's polynomial approximations (about 1-2 ulp in f32), so that exponentials stay
    in vector registers instead of becoming one libm call per lane; e^NaN stays NaN through a
    select beside the polynomial, which LLVM makes poison there. f32 to bf16 truncation
    becomes integer ops whose only select is on the f32's bits (x86 without AVX512-BF16 would
    otherwise call __truncsfbf2, which Debian 12's libgcc lacks). With `no-libdevice` the
    floor and fabs the polynomials use become conversions and bit operations too, since
    NVVM lowering would otherwise call libdevice, which attnc does not link.
  }];
  let options = [
    Option<"noLibdevice", "no-libdevice", "bool", /*default=*/"false",
           "also expand math.floor and math.absf (for NVVM)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::vector::VectorDialect",
                           "mlir::math::MathDialect"];
}

def AttnBf16MemoryAsI16 : Pass<"attn-bf16-memory-as-i16"> {
  let summary = "Makes masked loads and stores of bf16 vectors i16 ones";
  let description = [{
    After vector-to-llvm: x86 without AVX512-BF16 has no bf16 registers, and LLVM scalarises a
    masked load of bf16 lanes by promoting each lane to f32 and truncating it back through
    __truncsfbf2, a function Debian 12's libgcc lacks (mha's bf16 backward failed to link on
    AVX2). As i16 lanes the same bits move with no conversion; bitcasts give back the bf16
    vector. Masked gathers and scatters of bf16 (attnc emits none) are left as they are.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

def AttnMergeGpuModules : Pass<"attn-merge-gpu-modules", "mlir::ModuleOp"> {
  let summary = "Moves every outlined kernel into the first gpu.module";
  let description = [{
    After gpu-kernel-outlining, a function with several launches has a gpu.module per launch.
    This moves their kernels (renamed where names clash) and globals into the first module
    and retargets the gpu.launch_func ops, so the bundle embeds one PTX module.
  }];
}

def AttnLowerToNvvmIntrinsics : Pass<"attn-lower-to-nvvm-intrinsics"> {
  let summary = "bf16 nvgpu.mma.sync and f32 math.exp2 as NVVM intrinsic calls";
  let description = [{
    Fills two gaps of MLIR 19's NVVM lowering for tensor-core kernels: nvgpu.mma.sync with
    bf16 operands becomes llvm.nvvm.mma.m16n8k16.row.col.bf16 (bf16 pairs as i32), and
    math.exp2 on f32 becomes llvm.nvvm.ex2.approx.ftz.f, element by element.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect", "mlir::vector::VectorDialect",
                           "mlir::arith::ArithDialect"];
}

#endif // ATTN_PASSES_TD
