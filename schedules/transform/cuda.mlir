// The CUDA schedule of the MLIR backend's SIMT path (f32 and wider math on CUDA cores): one
// task per query row, so the vector lowering runs with one lane per GPU thread and
// attn-map-tasks-to-gpu puts the tasks on threads. A variant's operand products (attn.matmul)
// run on tensor cores with matmul_mma = 1 (TF32; f16 and bf16 specs), else a row per thread.
// Placeholders as in cpu.mlir.
module attributes {transform.with_named_sequence} {
  transform.named_sequence @tile(%root: !transform.any_op {transform.readonly}) {
    %paged = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.gather_cache %paged columns = 8 : !transform.any_op
    %update = transform.structured.match ops{["attn.online_update"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %tasks, %row = transform.attn.tile_queries %update rows = 1
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %pack, %packed = transform.attn.pack_query %row
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %keys, %block = transform.attn.tile_keys %packed block = ${key_block}
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }

  transform.named_sequence @vectorize(%root: !transform.any_op {transform.readonly}) {
    %kernels = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_to_vectors %kernels vector_width = 1
        key_unroll = ${key_unroll} value_split = ${value_split} : !transform.any_op
    %products = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_matmuls %products rows = 1 vector_width = 1 columns = ${value_split}
        tensor_cores = ${matmul_mma} : !transform.any_op
    %linear = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_linear %linear rows = 1 : !transform.any_op
    %rotations = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_rope %rotations rows = 1 : !transform.any_op
    %weights = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_weights %weights rows = 1 vector_width = 1
        key_unroll = ${key_unroll} : !transform.any_op
    transform.yield
  }
}
