// The CUDA schedule of the MLIR backend's tensor-core path (f16 and bf16 storage, head dims a
// multiple of 16): one block per query tile of query_tile rows (16 per warp), key blocks of
// key_block keys, lowered by transform.attn.lower_to_mma to a gpu.launch whose QK^T and PV run
// on mma.sync. The query is not packed: the kernel loads its fragments straight into
// registers. Steps of at most 16 query rows (decoding; the limit of the CPUs' decode kernel)
// take another branch at run time, whose tiles of decode_tile rows hold the query rows of every
// head of a GQA group (pack_heads), so a block reads its K/V head once for all of them, in key
// blocks of decode_key_block, a paged cache's through the block table, quantized rows decoded
// into the tiles and their scales applied to the scores and probabilities. Few tasks with many
// keys split their keys over up to max_key_splits blocks, aiming at fill_blocks blocks in all.
// A variant's operand products (mha's projections and W_O, Linformer's E K and F V, bilinear's
// q W) run on tensor cores too, in TF32 (lower_matmuls tensor_cores). A backward=true spec's
// backward kernel takes the same tiles: blocks of query_tile query rows (dQ) and of query_tile
// keys (dK, dV), K and V or Q and dO tiles of key_block rows (lower_backward_mma).
// Placeholders as in cpu.mlir.
module attributes {transform.with_named_sequence} {
  transform.named_sequence @tile(%root: !transform.any_op {transform.readonly}) {
    %update = transform.structured.match ops{["attn.online_update"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %decode, %prefill = transform.attn.branch_on_query_rows %update rows = 16
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    // A paged or quantized cache gathered into plain buffers by a phase of the prefill branch,
    // whose query tiles each read every key again (lower_to_mma could read the cache, its
    // pages looked up and rows decoded once per tile; not measured against the gather), and of
    // the weights (lower_weights reads plain buffers only). The decode tiles read the cache.
    transform.attn.gather_cache %prefill columns = 8 : !transform.any_op
    %weights = transform.structured.match ops{["attn.weights"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.gather_cache %weights columns = 8 : !transform.any_op
    %decodeTasks, %decodeTile = transform.attn.tile_queries %decode rows = ${decode_tile}
        pack_heads : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %decodeKeys, %decodeBlock = transform.attn.tile_keys %decodeTile block = ${decode_key_block}
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %tasks, %tile = transform.attn.tile_queries %prefill rows = ${query_tile}
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %keys, %block = transform.attn.tile_keys %tile block = ${key_block}
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }

  transform.named_sequence @vectorize(%root: !transform.any_op {transform.readonly}) {
    %tasks = transform.structured.match ops{["scf.forall"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_to_mma %tasks
        {max_key_splits = ${max_key_splits}, fill_blocks = ${fill_blocks}} : !transform.any_op
    %products = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_matmuls %products rows = 1 vector_width = 1 columns = 8
        tensor_cores = 1 : !transform.any_op
    %rotations = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_rope %rotations rows = 1 : !transform.any_op
    %backward = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_backward_mma %backward rows = ${query_tile} key_block = ${key_block}
        : !transform.any_op
    %weights = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_weights %weights rows = 1 vector_width = 1
        key_unroll = 4 : !transform.any_op
    transform.yield
  }
}
