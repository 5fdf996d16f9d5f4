// RUN: attn-opt %s -split-input-file -transform-interpreter -verify-diagnostics
// Schedule steps applied where they cannot be report why on the payload op.

func.func @keys_need_one_head(%q: memref<?x4x?x32xf32>, %k: memref<?x2x?x32xf32>,
                              %acc: memref<1x1x32x16xf32>, %m: memref<1x1x16xf32>, %i: index) {
  // expected-error @+1 {{tile_keys needs an update of one batch entry and a static number of heads (tile_queries first)}}
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
    %loop, %tiled = transform.attn.tile_keys %update block = 64
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// tile_queries leaves a paged cache on the tile (lower_to_mma reads it); the vector lowerings'
// pack_query refuses it.
func.func @pack_query_of_pages(%q: memref<?x4x?x32xf32>, %k: memref<?x2x16x32xf32>,
                               %table: memref<?x?xi32>, %lens: memref<?xi32>,
                               %acc: memref<1x1x32x16xf32>, %m: memref<1x1x16xf32>, %i: index) {
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{pack_query: a paged or quantized cache needs transform.attn.gather_cache first}}
  attn.online_update %q, %k, %k pages(%table, %lens : memref<?x?xi32>, memref<?xi32>)
      into %acc, %m, %m at [%i, %i, %i, %i] sizes [%c1, %c1, %i, %i]
      seq_q %i {num_heads = 4 : i64, scale = 1.0 : f64}
      : memref<?x4x?x32xf32>, memref<?x2x16x32xf32>, memref<?x2x16x32xf32>,
        memref<1x1x32x16xf32>, memref<1x1x16xf32>, memref<1x1x16xf32>
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %update = transform.structured.match ops{["attn.online_update"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %pack, %packed = transform.attn.pack_query %update
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// lower_matmuls takes the products on tensor cores or not: tensor_cores is a flag.
func.func @matmul_flag(%x: memref<?x1x?x16xf32>, %w: memref<1x1x16x8xf32>,
                       %out: memref<?x1x?x8xf32>) {
  attn.matmul %x, %w into %out : memref<?x1x?x16xf32>, memref<1x1x16x8xf32>, memref<?x1x?x8xf32>
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    // expected-error @+1 {{lower_matmuls: tensor_cores is 0 or 1, not 2}}
    transform.attn.lower_matmuls %f rows = 1 vector_width = 1 columns = 8 tensor_cores = 2
        : !transform.any_op
    transform.yield
  }
}
