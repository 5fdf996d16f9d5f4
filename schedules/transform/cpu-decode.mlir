// The CPU decode schedule of the MLIR backend (decode = 1), in the transform dialect: the
// whole attention becomes the decode kernel (attn/Transforms/LowerDecode.cpp), a phase of tasks
// per batch entry, KV head, decode_rows query rows of each head of the group and split of the
// keys, then a phase merging the splits. attnc replaces each placeholder (a parameter name in
// braces after a dollar sign) with its ScheduleParams value and runs @tile, then @vectorize.
module attributes {transform.with_named_sequence} {
  transform.named_sequence @tile(%root: !transform.any_op {transform.readonly}) {
    %update = transform.structured.match ops{["attn.online_update"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_decode %update vector_width = ${vector_width} key_block = ${key_block}
        rows = ${decode_rows} split_keys = ${split_keys} dot = ${dot} : !transform.any_op
    transform.yield
  }

  // RoPE's rotations first, in tasks of 16 rows (every head); the weights, when asked for,
  // last, in tasks of decode_rows query rows.
  transform.named_sequence @vectorize(%root: !transform.any_op {transform.readonly}) {
    %rotations = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_rope %rotations rows = 16 : !transform.any_op
    %paged = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.gather_cache %paged rows = 64 : !transform.any_op
    %weights = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_weights %weights rows = ${vector_width} vector_width = ${vector_width}
        key_unroll = ${key_unroll} : !transform.any_op
    transform.yield
  }
}
