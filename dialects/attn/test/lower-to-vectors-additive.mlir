// RUN: attn-opt %s -transform-interpreter -canonicalize | FileCheck %s
// transform.attn.lower_to_vectors on Bahdanau's score (score_weights; AdditiveKeys.h): a phase
// before the attention's forms each key's exponentials E(k) = e^(2 clamp(k, -40, 40)), 16 keys a
// task with keys in lanes, and the keys' largest magnitudes in row d_k; each task forms its rows'
// exponentials once before the key loop, the sum of the weights and whether its rows and weights
// are within bounds. A block whose keys are within it too takes S = sum_c w_c + sum_c -2 w_c /
// (E(q) E(k) + 1) (an FMA, a division and an FMA per element), else sum_c w_c tanh(q + k).

// CHECK-LABEL: func.func @additive
// CHECK: %[[E:.*]] = memref.alloc({{.*}}) : memref<?x4x33x?xf32>
// The keys' phase.
// CHECK: scf.forall
// CHECK:   scf.for {{.*}} -> (vector<16xf32>)
// CHECK:     vector.insert
// CHECK:     arith.maximumf
// CHECK:     math.exp
// CHECK:     vector.store %{{.*}}, %[[E]]
// CHECK:   vector.store %{{.*}}, %[[E]][%{{.*}}, %{{.*}}, %c32
// The attention's tasks: the rows' exponentials, unscaled (pack_query's scale 1).
// CHECK: scf.forall
// CHECK:   %[[ROWS_E:.*]] = memref.alloca() : memref<32x16xf32>
// CHECK:   scf.for {{.*}} -> (vector<16xf32>, f32, f32)
// CHECK:     math.exp
// CHECK:     vector.store %{{.*}}, %[[ROWS_E]]
// CHECK:   vector.reduction <maximumf>
// CHECK:   scf.for
// CHECK:     memref.load %[[E]]
// CHECK:     scf.if
// CHECK:       vector.load %[[ROWS_E]]
// CHECK:       memref.load %[[E]]
// CHECK:       vector.fma
// CHECK:       arith.divf
// CHECK:       vector.fma
// CHECK:     } else {
// CHECK:       math.tanh
// CHECK:   memref.dealloc %[[E]]
// CHECK-NOT: attn.online
func.func @additive(%q: memref<?x4x?x32xf32>, %k: memref<?x4x?x32xf32>, %v: memref<?x2x?x16xf32>,
                    %w: memref<2x2x32xbf16>, %o: memref<?x4x?x16xf32>, %tasks: index,
                    %tq: index, %tk: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  scf.forall (%t) in (%tasks) {
    %packed = memref.alloca() : memref<32x16xf32>
    %row = arith.muli %t, %c16 : index
    %n = arith.minsi %c16, %tq : index
    %acc = memref.alloca() : memref<1x1x16x16xf32>
    %max = memref.alloca() : memref<1x1x16xf32>
    %sum = memref.alloca() : memref<1x1x16xf32>
    attn.online_init %acc, %max, %sum : memref<1x1x16x16xf32>, memref<1x1x16xf32>, memref<1x1x16xf32>
    attn.pack_query %q[%c0, %c0, %row] rows %n into %packed {scale = 1.0 : f64}
        : memref<?x4x?x32xf32>, memref<32x16xf32>
    scf.for %j = %c0 to %tk step %c64 {
      %nj = arith.minsi %c64, %tk : index
      attn.online_update %packed, %k, %v score_weights(%w : memref<2x2x32xbf16>)
          into %acc, %max, %sum at [%c0, %c0, %row, %j] sizes [%c1, %c1, %n, %nj] seq_q %tq
          {num_heads = 4 : i64, scale = 0.5 : f64, max_keys = 64 : i64}
          : memref<32x16xf32>, memref<?x4x?x32xf32>, memref<?x2x?x16xf32>,
            memref<1x1x16x16xf32>, memref<1x1x16xf32>, memref<1x1x16xf32>
    }
    attn.online_finalize %acc, %max, %sum into %o at [%c0, %c0, %row] sizes [%c1, %c1, %n]
        : memref<1x1x16x16xf32>, memref<1x1x16xf32>, memref<1x1x16xf32>, memref<?x4x?x16xf32>
  }
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_to_vectors %f vector_width = 16 key_unroll = 2 value_split = 4
        : !transform.any_op
    transform.yield
  }
}
