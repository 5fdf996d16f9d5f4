// RUN: attn-opt %s -split-input-file -transform-interpreter -verify-diagnostics
// lower_to_mma refuses what tensor cores cannot take, naming what is allowed.

func.func @f32_storage(%q: memref<?x4x?x32xf32>, %k: memref<?x2x?x32xf32>, %o: memref<?x4x?x32xf32>,
                       %tasks: index, %tq: index, %tk: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  scf.forall (%t) in (%tasks) {
    %acc = memref.alloca() : memref<1x1x32x32xf32>
    %max = memref.alloca() : memref<1x1x32xf32>
    attn.online_init %acc, %max, %max : memref<1x1x32x32xf32>, memref<1x1x32xf32>, memref<1x1x32xf32>
    scf.for %j = %c0 to %tk step %c32 {
      // expected-error @+1 {{lower_to_mma: tensor cores take f16 or bf16 storage, not 'f32'}}
      attn.online_update %q, %k, %k into %acc, %max, %max at [%c0, %c0, %c0, %j]
          sizes [%c1, %c1, %c32, %c32] seq_q %tq
          {num_heads = 4 : i64, scale = 0.125 : f64, max_keys = 32 : i64}
          : memref<?x4x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>,
            memref<1x1x32x32xf32>, memref<1x1x32xf32>, memref<1x1x32xf32>
    }
    attn.online_finalize %acc, %max, %max into %o at [%c0, %c0, %c0] sizes [%c1, %c1, %c32]
        : memref<1x1x32x32xf32>, memref<1x1x32xf32>, memref<1x1x32xf32>, memref<?x4x?x32xf32>
  }
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %tasks = transform.structured.match ops{["scf.forall"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_to_mma %tasks : !transform.any_op
    transform.yield
  }
}

// -----

func.func @key_block_not_a_multiple_of_16(%q: memref<?x4x?x32xf16>, %k: memref<?x2x?x32xf16>,
                                          %o: memref<?x4x?x32xf16>, %tasks: index, %tq: index,
                                          %tk: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c24 = arith.constant 24 : index
  %c32 = arith.constant 32 : index
  scf.forall (%t) in (%tasks) {
    %acc = memref.alloca() : memref<1x1x32x32xf32>
    %max = memref.alloca() : memref<1x1x32xf32>
    attn.online_init %acc, %max, %max : memref<1x1x32x32xf32>, memref<1x1x32xf32>, memref<1x1x32xf32>
    scf.for %j = %c0 to %tk step %c24 {
      // expected-error @+1 {{lower_to_mma: the key block (max_keys 24) must be a multiple of 16}}
      attn.online_update %q, %k, %k into %acc, %max, %max at [%c0, %c0, %c0, %j]
          sizes [%c1, %c1, %c32, %c24] seq_q %tq
          {num_heads = 4 : i64, scale = 0.125 : f64, max_keys = 24 : i64}
          : memref<?x4x?x32xf16>, memref<?x2x?x32xf16>, memref<?x2x?x32xf16>,
            memref<1x1x32x32xf32>, memref<1x1x32xf32>, memref<1x1x32xf32>
    }
    attn.online_finalize %acc, %max, %max into %o at [%c0, %c0, %c0] sizes [%c1, %c1, %c32]
        : memref<1x1x32x32xf32>, memref<1x1x32xf32>, memref<1x1x32xf32>, memref<?x4x?x32xf16>
  }
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %tasks = transform.structured.match ops{["scf.forall"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_to_mma %tasks : !transform.any_op
    transform.yield
  }
}
