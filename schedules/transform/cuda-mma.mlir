// The CUDA schedule of the MLIR backend's tensor-core path (f16 and bf16 storage, head dims a
// multiple of 16): one block per query tile of query_tile rows (16 per warp), key blocks of
// key_block keys, lowered by transform.attn.lower_to_mma to a gpu.launch whose QK^T and PV run
// on mma.sync. The query is not packed: the kernel loads its fragments straight into
// registers. Few tasks with many keys (decoding) split their keys over up to max_key_splits
// blocks, aiming at fill_blocks blocks in all. Placeholders as in cpu.mlir.
module attributes {transform.with_named_sequence} {
  transform.named_sequence @tile(%root: !transform.any_op {transform.readonly}) {
    %paged = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.gather_cache %paged columns = 8 : !transform.any_op
    %update = transform.structured.match ops{["attn.online_update"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %tasks, %tile = transform.attn.tile_queries %update rows = ${query_tile}
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
    %rotations = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_rope %rotations rows = 1 : !transform.any_op
    %weights = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_weights %weights rows = 1 vector_width = 1
        key_unroll = 4 : !transform.any_op
    transform.yield
  }
}
