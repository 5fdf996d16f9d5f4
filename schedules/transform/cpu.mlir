// The CPU schedule of the MLIR backend, in the transform dialect. attnc replaces each
// placeholder (a parameter name in braces after a dollar sign) with its ScheduleParams value
// (TransformSchedule.cpp) and runs @tile for the "tiled" stage, @vectorize for "vector".
module attributes {transform.with_named_sequence} {
  // A paged KV cache gathered into per-sequence buffers first (a phase of tasks of 64
  // positions); then one task per (batch, head, query tile); the tile's queries packed once,
  // transposed and scaled; keys visited in blocks over the range the masks can keep.
  transform.named_sequence @tile(%root: !transform.any_op {transform.readonly}) {
    %paged = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.gather_cache %paged rows = 64 : !transform.any_op
    %update = transform.structured.match ops{["attn.online_update"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %tasks, %tile = transform.attn.tile_queries %update rows = ${query_tile}
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %pack, %packed = transform.attn.pack_query %tile
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %keys, %block = transform.attn.tile_keys %packed block = ${key_block}
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }

  // Query rows in vector lanes; register tiles of key_unroll keys (QK^T) and value_split
  // output columns (PV), or both products on AMX tiles (amx = 1) or as AVX512-BF16 dot
  // products (dot = 1). A variant's operand products (attn.matmul: mha's projections,
  // additive's W1 q and W2 k, bilinear's q W, Linformer's E K, linear attention's chunk
  // products) in tasks of a query tile's rows, register tiles of value_split columns as PV's;
  // linear attention's feature rows, prefix over chunks and output in tasks of as many rows;
  // RoPE's rotations, when the spec has them,
  // run first in tasks of 16 rows (every head); the weights, when asked for, last, in tasks of
  // a query tile. A backward kernel's three phases: D per query tile, dK and dV per key block
  // (of backward_key_block keys, over the query tiles the masks can keep), dQ per query tile;
  // bf16's products as vdpbf16ps with backward_dot = 1, on AMX targets too (no tiles).
  transform.named_sequence @vectorize(%root: !transform.any_op {transform.readonly}) {
    %kernels = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_to_vectors %kernels vector_width = ${vector_width}
        key_unroll = ${key_unroll} value_split = ${value_split} amx = ${amx} dot = ${dot}
        : !transform.any_op
    %products = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_matmuls %products rows = ${query_tile} vector_width = ${vector_width} columns = ${value_split}
        : !transform.any_op
    %linear = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_linear %linear rows = ${query_tile} : !transform.any_op
    %rotations = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_rope %rotations rows = 16 : !transform.any_op
    %weights = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_weights %weights rows = ${query_tile} vector_width = ${vector_width}
        key_unroll = ${key_unroll} : !transform.any_op
    %backward = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_backward %backward rows = ${query_tile} key_block = ${backward_key_block}
        vector_width = ${vector_width} key_unroll = ${key_unroll} dot = ${backward_dot}
        : !transform.any_op
    transform.yield
  }
}
