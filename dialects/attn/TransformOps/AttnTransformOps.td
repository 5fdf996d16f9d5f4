//===- AttnTransformOps.td - schedule steps for the attn pipeline -------------===//
//
// The transform-dialect ops attnc's schedule scripts (schedules/transform/) are written in.
// Each applies one rewrite of attn/Transforms/Transforms.h to the ops its handle points to.
//
//===---------------------------------------------------------------------------===//
#ifndef ATTN_TRANSFORM_OPS_TD
#define ATTN_TRANSFORM_OPS_TD

include "mlir/Dialect/Transform/IR/TransformDialect.td"
include "mlir/Dialect/Transform/Interfaces/TransformInterfaces.td"
include "mlir/Dialect/Transform/IR/TransformTypes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/OpBase.td"

class Attn_TransformOp<string mnemonic>
    : Op<Transform_Dialect, "attn." # mnemonic,
         [FunctionalStyleTransformOpTrait, MemoryEffectsOpInterface, TransformEachOpTrait,
          TransformOpInterface, ReportTrackingListenerFailuresOpTrait]>;

def AttnTileQueriesOp : Attn_TransformOp<"tile_queries"> {
  let summary = "Tiles online updates by (batch, head, `rows` query rows) in an scf.forall";
  let description = [{
    The state's online_init and online_finalize move into the loop and the state onto the
    stack, one tile per iteration. With `pack_heads`, a tile holds `rows` / G query rows of
    each of the G heads of a GQA group (row r: query row r / G of head r % G), so that a task
    reads its K/V head once for all of them. Returns the loops and the tiled updates.
  }];
  let arguments = (ins TransformHandleTypeInterface:$target, I64Attr:$rows,
                   UnitAttr:$pack_heads);
  let results = (outs TransformHandleTypeInterface:$loop, TransformHandleTypeInterface:$tiled);
  let assemblyFormat = [{
    $target `rows` `=` $rows (`pack_heads` $pack_heads^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    ::mlir::DiagnosedSilenceableFailure applyToOne(
        ::mlir::transform::TransformRewriter &rewriter, ::attnc::attn::OnlineUpdateOp target,
        ::mlir::transform::ApplyToEachResultList &results,
        ::mlir::transform::TransformState &state);
  }];
}

def AttnBranchOnQueryRowsOp : Attn_TransformOp<"branch_on_query_rows"> {
  let summary = "Copies a whole-domain update into the branches of an scf.if on Tq <= `rows`";
  let description = [{
    The update, its state buffers, online_init and online_finalize are copied into both
    branches, so that a schedule tiles decoding steps (the first result) and prefills (the
    second) each its own way; the kernel picks the branch per call.
  }];
  let arguments = (ins TransformHandleTypeInterface:$target, I64Attr:$rows);
  let results = (outs TransformHandleTypeInterface:$few_rows,
                      TransformHandleTypeInterface:$many_rows);
  let assemblyFormat = [{
    $target `rows` `=` $rows attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    ::mlir::DiagnosedSilenceableFailure applyToOne(
        ::mlir::transform::TransformRewriter &rewriter, ::attnc::attn::OnlineUpdateOp target,
        ::mlir::transform::ApplyToEachResultList &results,
        ::mlir::transform::TransformState &state);
  }];
}

def AttnPackQueryOp : Attn_TransformOp<"pack_query"> {
  let summary = "Packs the query tile of each update (attn.pack_query) before it";
  let arguments = (ins TransformHandleTypeInterface:$target);
  let results = (outs TransformHandleTypeInterface:$packed, TransformHandleTypeInterface:$update);
  let assemblyFormat = "$target attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    ::mlir::DiagnosedSilenceableFailure applyToOne(
        ::mlir::transform::TransformRewriter &rewriter, ::attnc::attn::OnlineUpdateOp target,
        ::mlir::transform::ApplyToEachResultList &results,
        ::mlir::transform::TransformState &state);
  }];
}

def AttnTileKeysOp : Attn_TransformOp<"tile_keys"> {
  let summary = "Tiles online updates along keys by `block`, skipping the masked-out range";
  let description = [{
    The loop visits only the keys the update's causal, window and padding masks can keep for
    its query rows, `block` keys at a time. Returns the loops and the tiled updates.
  }];
  let arguments = (ins TransformHandleTypeInterface:$target, I64Attr:$block);
  let results = (outs TransformHandleTypeInterface:$loop, TransformHandleTypeInterface:$tiled);
  let assemblyFormat = [{
    $target `block` `=` $block attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    ::mlir::DiagnosedSilenceableFailure applyToOne(
        ::mlir::transform::TransformRewriter &rewriter, ::attnc::attn::OnlineUpdateOp target,
        ::mlir::transform::ApplyToEachResultList &results,
        ::mlir::transform::TransformState &state);
  }];
}

def AttnLowerToVectorsOp : Attn_TransformOp<"lower_to_vectors"> {
  let summary = "Lowers the online ops under the target to vector code";
  let description = [{
    `vector_width` f32 lanes per vector (query rows side by side), `key_unroll` keys per
    register tile of QK^T, `value_split` output columns per register tile of PV. With `amx`
    = 1, updates whose K and V are bf16 (d_k a multiple of 32, d_v of 16, tiles of 16 rows,
    blocks of 32 keys) take both products on AMX tiles (tdpbf16ps), reading K and V^T from a
    phase before the attention's that lays them out, zero past Tk (the keys of a chunk of 32
    not all attended as vdpbf16ps). With `dot` = 1, the same updates take both products as
    AVX512-BF16 dot products (vdpbf16ps) from the same operands.
  }];
  let arguments = (ins TransformHandleTypeInterface:$target, I64Attr:$vector_width,
                   I64Attr:$key_unroll, I64Attr:$value_split,
                   DefaultValuedAttr<I64Attr, "0">:$amx, DefaultValuedAttr<I64Attr, "0">:$dot);
  let results = (outs);
  let assemblyFormat = [{
    $target `vector_width` `=` $vector_width `key_unroll` `=` $key_unroll
    `value_split` `=` $value_split (`amx` `=` $amx^)? (`dot` `=` $dot^)? attr-dict
    `:` type($target)
  }];
  let extraClassDeclaration = [{
    ::mlir::DiagnosedSilenceableFailure applyToOne(
        ::mlir::transform::TransformRewriter &rewriter, ::mlir::Operation *target,
        ::mlir::transform::ApplyToEachResultList &results,
        ::mlir::transform::TransformState &state);
  }];
}

def AttnLowerDecodeOp : Attn_TransformOp<"lower_decode"> {
  let summary = "Lowers whole-attention online updates to the decode kernel";
  let description = [{
    The target is the whole attention's attn.online_update (before tile_queries). It becomes
    two phases: tasks of one batch entry, KV head, `rows` query rows of each of the group's
    heads and one split of the keys (ceil(Tk / `split_keys`) splits), vectorised along keys and
    the head dim with `vector_width` lanes, folding `key_block` keys per step into partial
    states in a workspace; then their merge per query row (flash-decoding). With `dot` = 1,
    bf16 K and V (d_k and d_v multiples of 32, unit inner stride) take both products as
    AVX512-BF16 dot products (vdpbf16ps).
  }];
  let arguments = (ins TransformHandleTypeInterface:$target, I64Attr:$vector_width,
                   I64Attr:$key_block, I64Attr:$rows, I64Attr:$split_keys,
                   DefaultValuedAttr<I64Attr, "0">:$dot);
  let results = (outs);
  let assemblyFormat = [{
    $target `vector_width` `=` $vector_width `key_block` `=` $key_block `rows` `=` $rows
    `split_keys` `=` $split_keys (`dot` `=` $dot^)? attr-dict `:` type($target)
  }];
  let extraClassDeclaration = [{
    ::mlir::DiagnosedSilenceableFailure applyToOne(
        ::mlir::transform::TransformRewriter &rewriter, ::attnc::attn::OnlineUpdateOp target,
        ::mlir::transform::ApplyToEachResultList &results,
        ::mlir::transform::TransformState &state);
  }];
}

// The ops under the target are changed in place, not replaced: its handle stays valid.
def AttnGatherCacheOp
    : Op<Transform_Dialect, "attn.gather_cache",
         [DeclareOpInterfaceMethods<MemoryEffectsOpInterface>, TransformEachOpTrait,
          TransformOpInterface, ReportTrackingListenerFailuresOpTrait]> {
  let summary = "Copies a paged or quantized KV cache into plain buffers the ops under the target "
                "read";
  let description = [{
    The attn.online_update and attn.weights ops under the target that read a paged cache
    (`pages(block_table, seq_lens)`) or a quantized one (`scales(...)`) read buffers
    [B, H_kv, Tk, d] instead (of the query's type when quantized, the rows times their scales),
    filled by an scf.forall of their own at the start of the ops' block (a phase): one task per
    `rows` positions of a sequence (CPUs), or one task per `columns` adjacent columns of one
    head at one position, the columns fastest (GPUs: a thread each, neighbours copying
    neighbouring bytes; fewer columns where they do not divide the heads' widths). A paged
    sequence's positions past seq_lens[b] are zero. Every lowering but lower_decode and
    lower_to_mma's decode tiles needs it; without such ops it does nothing.
  }];
  let arguments = (ins TransformHandleTypeInterface:$target, OptionalAttr<I64Attr>:$rows,
                       OptionalAttr<I64Attr>:$columns);
  let results = (outs);
  let assemblyFormat = "$target (`rows` `=` $rows^)? (`columns` `=` $columns^)? attr-dict `:` "
                       "type($target)";
  let extraClassDeclaration = [{
    ::mlir::DiagnosedSilenceableFailure applyToOne(
        ::mlir::transform::TransformRewriter &rewriter, ::mlir::Operation *target,
        ::mlir::transform::ApplyToEachResultList &results,
        ::mlir::transform::TransformState &state);
  }];
}

def AttnLowerRopeOp : Attn_TransformOp<"lower_rope"> {
  let summary = "Lowers the attn.rope ops under the target to task loops of their own";
  let description = [{
    Each attn.rope becomes an scf.forall before the attention's, one task per `rows` rows of a
    batch (every head): a phase of the kernel that attn-outline-tasks or
    attn-map-tasks-to-gpu runs to completion before the next.
  }];
  let arguments = (ins TransformHandleTypeInterface:$target, I64Attr:$rows);
  let results = (outs);
  let assemblyFormat = "$target `rows` `=` $rows attr-dict `:` type($target)";
  let extraClassDeclaration = [{
    ::mlir::DiagnosedSilenceableFailure applyToOne(
        ::mlir::transform::TransformRewriter &rewriter, ::mlir::Operation *target,
        ::mlir::transform::ApplyToEachResultList &results,
        ::mlir::transform::TransformState &state);
  }];
}

def AttnLowerMatmulsOp : Attn_TransformOp<"lower_matmuls"> {
  let summary = "Lowers the attn.matmul ops under the target to task loops of their own";
  let description = [{
    Each attn.matmul becomes an scf.forall in its place: one task per `rows` rows and up to 256
    columns of its output for a batch and head, the rows in `vector_width` lanes, `columns`
    output columns accumulated at once; a phase of the kernel that attn-outline-tasks or
    attn-map-tasks-to-gpu runs to completion before the next. With `tensor_cores = 1` (CUDA)
    each becomes a gpu.launch of blocks that multiply 64 x 64 tiles of its output on tensor
    cores (TF32 mma.sync) instead, and the tile sizes are not used.
  }];
  let arguments = (ins TransformHandleTypeInterface:$target, I64Attr:$rows,
                   I64Attr:$vector_width, I64Attr:$columns,
                   DefaultValuedAttr<I64Attr, "0">:$tensor_cores);
  let results = (outs);
  let assemblyFormat = [{
    $target `rows` `=` $rows `vector_width` `=` $vector_width `columns` `=` $columns
    (`tensor_cores` `=` $tensor_cores^)? attr-dict `:` type($target)
  }];
  let extraClassDeclaration = [{
    ::mlir::DiagnosedSilenceableFailure applyToOne(
        ::mlir::transform::TransformRewriter &rewriter, ::mlir::Operation *target,
        ::mlir::transform::ApplyToEachResultList &results,
        ::mlir::transform::TransformState &state);
  }];
}

def AttnLowerLinearOp : Attn_TransformOp<"lower_linear"> {
  let summary = "Lowers linear attention's row ops under the target to task loops of their own";
  let description = [{
    Each attn.feature_rows, favor_features, chunk_prefix, normalize_rows and linear_weights
    becomes an scf.forall in its place: one task per `rows` rows of a batch (or chunk) and
    head; a phase of the kernel that attn-outline-tasks or attn-map-tasks-to-gpu runs to
    completion before the next.
  }];
  let arguments = (ins TransformHandleTypeInterface:$target, I64Attr:$rows);
  let results = (outs);
  let assemblyFormat = "$target `rows` `=` $rows attr-dict `:` type($target)";
  let extraClassDeclaration = [{
    ::mlir::DiagnosedSilenceableFailure applyToOne(
        ::mlir::transform::TransformRewriter &rewriter, ::mlir::Operation *target,
        ::mlir::transform::ApplyToEachResultList &results,
        ::mlir::transform::TransformState &state);
  }];
}

def AttnLowerWeightsOp : Attn_TransformOp<"lower_weights"> {
  let summary = "Lowers the attn.weights ops under the target to task loops of their own";
  let description = [{
    Each attn.weights becomes an scf.forall in its place, after the attention's: one task per
    `rows` query rows of a batch and head, the rows in `vector_width` lanes, `key_unroll` keys'
    scores accumulated at once; a phase of the kernel that attn-outline-tasks or
    attn-map-tasks-to-gpu runs once the attention's has completed.
  }];
  let arguments = (ins TransformHandleTypeInterface:$target, I64Attr:$rows,
                   I64Attr:$vector_width, I64Attr:$key_unroll);
  let results = (outs);
  let assemblyFormat = [{
    $target `rows` `=` $rows `vector_width` `=` $vector_width `key_unroll` `=` $key_unroll
    attr-dict `:` type($target)
  }];
  let extraClassDeclaration = [{
    ::mlir::DiagnosedSilenceableFailure applyToOne(
        ::mlir::transform::TransformRewriter &rewriter, ::mlir::Operation *target,
        ::mlir::transform::ApplyToEachResultList &results,
        ::mlir::transform::TransformState &state);
  }];
}

def AttnLowerBackwardOp : Attn_TransformOp<"lower_backward"> {
  let summary = "Lowers the attn.backward ops under the target to three phases of tasks";
  let description = [{
    Each attn.backward becomes, in its place: D = rowsum(dO * O) per `rows` query rows; dK and
    dV per block of up to `key_block` keys of a batch and KV head (fewer where the tasks' key
    chunks are shorter), over its group's heads and the query
    tiles the masks can keep; dQ per `rows` query rows of a batch and head. Query rows lie in
    `vector_width` lanes, `key_unroll` keys' scores are accumulated at once; with `dot` = 1
    (bf16 tensors, 16 lanes) the recomputed scores and dP take vdpbf16ps pair products. Phases
    of the kernel that attn-outline-tasks runs in order.
  }];
  let arguments = (ins TransformHandleTypeInterface:$target, I64Attr:$rows, I64Attr:$key_block,
                   I64Attr:$vector_width, I64Attr:$key_unroll,
                   DefaultValuedAttr<I64Attr, "0">:$dot);
  let results = (outs);
  let assemblyFormat = [{
    $target `rows` `=` $rows `key_block` `=` $key_block `vector_width` `=` $vector_width
    `key_unroll` `=` $key_unroll (`dot` `=` $dot^)? attr-dict `:` type($target)
  }];
  let extraClassDeclaration = [{
    ::mlir::DiagnosedSilenceableFailure applyToOne(
        ::mlir::transform::TransformRewriter &rewriter, ::mlir::Operation *target,
        ::mlir::transform::ApplyToEachResultList &results,
        ::mlir::transform::TransformState &state);
  }];
}

def AttnLowerBackwardToMmaOp : Attn_TransformOp<"lower_backward_mma"> {
  let summary = "Lowers the attn.backward ops under the target to tensor-core kernels";
  let description = [{
    Each attn.backward of f16 or bf16 tensors (head dims multiples of 16) becomes, in its
    place, two gpu.launch kernels on nvgpu.mma.sync: one block per `rows` query rows of a batch
    and head (16 per warp) forms D = rowsum(dO * O) and dQ over K and V tiles of `key_block`
    keys; then one block per `rows` keys of a batch and KV head forms dK and dV over the query
    blocks of `key_block` rows the masks keep, for each head of the group. With sinks, a task
    loop per head sums their gradients (attn-map-tasks-to-gpu launches it).
  }];
  let arguments = (ins TransformHandleTypeInterface:$target, I64Attr:$rows, I64Attr:$key_block);
  let results = (outs);
  let assemblyFormat = [{
    $target `rows` `=` $rows `key_block` `=` $key_block attr-dict `:` type($target)
  }];
  let extraClassDeclaration = [{
    ::mlir::DiagnosedSilenceableFailure applyToOne(
        ::mlir::transform::TransformRewriter &rewriter, ::mlir::Operation *target,
        ::mlir::transform::ApplyToEachResultList &results,
        ::mlir::transform::TransformState &state);
  }];
}

def AttnLowerToMmaOp : Attn_TransformOp<"lower_to_mma"> {
  let summary = "Lowers task loops to tensor-core flash attention in a gpu.launch";
  let description = [{
    The target is the scf.forall of tile_queries (16 query rows per warp) whose update was
    tiled by tile_keys and whose query is not packed; q, k and v hold f16 or bf16. Each task
    becomes a GPU block: Q fragments in registers, K and V tiles staged in shared memory by
    cp.async, QK^T and PV on nvgpu.mma.sync, the online softmax in registers. With
    `max_key_splits` > 1, when the tasks are fewer than `fill_blocks` their keys are split
    over up to that many blocks, merged by a second kernel (decoding).
  }];
  let arguments = (ins TransformHandleTypeInterface:$target,
                   DefaultValuedAttr<I64Attr, "1">:$max_key_splits,
                   DefaultValuedAttr<I64Attr, "256">:$fill_blocks);
  let results = (outs);
  let assemblyFormat = "$target attr-dict `:` type($target)";
  let extraClassDeclaration = [{
    ::mlir::DiagnosedSilenceableFailure applyToOne(
        ::mlir::transform::TransformRewriter &rewriter, ::mlir::scf::ForallOp target,
        ::mlir::transform::ApplyToEachResultList &results,
        ::mlir::transform::TransformState &state);
  }];
}

#endif // ATTN_TRANSFORM_OPS_TD
