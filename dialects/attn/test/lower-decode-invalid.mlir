// RUN: attn-opt %s -transform-interpreter -verify-diagnostics
// lower_decode applied to a tiled update reports why on it.

func.func @decode_needs_the_whole_attention(%q: memref<?x4x?x32xf32>, %k: memref<?x2x?x32xf32>,
                                            %acc: memref<1x1x32x16xf32>, %m: memref<1x1x16xf32>,
                                            %i: index) {
  // expected-error @+1 {{lower_decode needs the whole attention (before tiling)}}
  attn.online_update %q, %k, %k into %acc, %m, %m at [%i, %i, %i, %i] sizes [%i, %i, %i, %i]
      seq_q %i {num_heads = 4 : i64, scale = 1.0 : f64}
      : memref<?x4x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>,
        memref<1x1x32x16xf32>, memref<1x1x16xf32>, memref<1x1x16xf32>
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %update = transform.structured.match ops{["attn.online_update"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_decode %update vector_width = 16 key_block = 64 rows = 2
        split_keys = 256 : !transform.any_op
    transform.yield
  }
}
