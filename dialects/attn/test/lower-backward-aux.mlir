// RUN: attn-opt %s -transform-interpreter -canonicalize | FileCheck %s
// transform.attn.lower_backward with the gradients of a float table (copies of its own per
// phase 2 task, [tasks, 9], summed in task order by a phase of its own) and of a bias summed
// in place (aux_grad_direct): then the tasks are chunk-major, 8 of them, each looping over
// every batch entry and KV head. The bias the recomputed scores add is read per key block
// and query tile into a [key_block, rows] patch (pack_query of the block's columns: 8 x 8
// squares transposed in registers), which the scores load as vectors instead of gathering.
// No pass zeroes the bias gradient: the first (batch, head) to reach an element stores it,
// later ones add, and a tile the masks skip stores its zeros, in 8 x 8 squares of the block's
// terms transposed in registers (the gradient's rows contiguous), unmasked stores where a
// square is whole.

// CHECK-LABEL: func.func @backward_aux
// CHECK-SAME: %[[BIAS:[a-z0-9]+]]: memref<1x4x?x?xf32>,
// CHECK-SAME: %[[DBIAS:[a-z0-9]+]]: memref<1x4x?x?xf32>) {
// CHECK: %[[COPIES:.*]] = memref.alloc() : memref<8x9xf32>
// CHECK: scf.forall (%[[TASK:.*]]) in (8)
// CHECK:   memref.store %{{.*}}, %[[COPIES]][%[[TASK]], %{{.*}}] : memref<8x9xf32>
// CHECK-NOT: %[[DBIAS]]
// CHECK:   scf.for %{{.*}} = %c0 to %{{.*}} step %c1
// CHECK-NOT: %[[DBIAS]]
// CHECK:       %[[COLUMNS:.*]] = memref.subview %[[BIAS]][0, 0, 0, %{{.*}}] [1, 4, %{{.*}}, %{{.*}}]
// CHECK:       vector.create_mask
// CHECK:       vector.maskedload %[[COLUMNS]]
// CHECK:       vector.shuffle
// CHECK:       vector.store %{{.*}}, %[[PATCH:[a-z_0-9]+]][%{{.*}}, %c0] : memref<16x8xf32>
// CHECK-NOT:   memref.load %[[COLUMNS]]
// CHECK:       vector.load %[[PATCH]][%{{.*}}, %c0] : memref<16x8xf32>, vector<4xf32>
// CHECK-NOT:   memref.load %[[BIAS]]
// CHECK:       memref.load %[[COPIES]][%[[TASK]], %{{.*}}] : memref<8x9xf32>
// CHECK:       memref.store %{{.*}}, %[[COPIES]][%[[TASK]], %{{.*}}] : memref<8x9xf32>
// CHECK:     scf.if
// CHECK-NOT:   vector.maskedload %[[DBIAS]]
// CHECK:       vector.shuffle
// CHECK:       scf.if
// CHECK:         vector.store %{{.*}}, %[[DBIAS]]
// CHECK:       } else {
// CHECK:         vector.maskedstore %[[DBIAS]]
// CHECK:     } else {
// CHECK:       vector.shuffle
// CHECK:       vector.maskedload %[[DBIAS]]
// CHECK:       vector.maskedstore %[[DBIAS]]
// CHECK:   } else {
// CHECK:     scf.if
// CHECK:       vector.maskedstore %[[DBIAS]]
// CHECK: scf.forall
// CHECK: scf.forall
// CHECK:   scf.for %{{.*}} = %c0 to %c8 step %c1
// CHECK:     memref.load %[[COPIES]]
// CHECK:   memref.store %{{.*}}, %{{.*}} : memref<9xf32>
// CHECK: memref.dealloc %[[COPIES]]

func.func @backward_aux(%q: memref<?x4x?x16xf32>, %k: memref<?x2x?x16xf32>,
                        %v: memref<?x2x?x8xf32>, %o: memref<?x4x?x8xf32>,
                        %do: memref<?x4x?x8xf32>, %lse: memref<?x4x?xf32>,
                        %rel: memref<9xf32>, %bias: memref<1x4x?x?xf32>,
                        %dq: memref<?x4x?x16xf32>, %dk: memref<?x2x?x16xf32>,
                        %dv: memref<?x2x?x8xf32>, %drel: memref<9xf32>,
                        %dbias: memref<1x4x?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %b = memref.dim %q, %c0 : memref<?x4x?x16xf32>
  %tq = memref.dim %q, %c2 : memref<?x4x?x16xf32>
  %tk = memref.dim %k, %c2 : memref<?x2x?x16xf32>
  attn.backward %q, %k, %v, %o, %do, %lse aux(%rel, %bias : memref<9xf32>, memref<1x4x?x?xf32>)
      into %dq, %dk, %dv aux_grads(%drel, %dbias : memref<9xf32>, memref<1x4x?x?xf32>)
      at [%c0, %c0, %c0, %c0] sizes [%b, %c4, %tq, %tk] seq_q %tq
      {num_heads = 4 : i64, scale = 0.25 : f64, aux_grad_targets = array<i64: 0, 1>,
       aux_grad_direct = array<i64: 1>}
      : memref<?x4x?x16xf32>, memref<?x2x?x16xf32>, memref<?x2x?x8xf32>, memref<?x4x?x8xf32>,
        memref<?x4x?x8xf32>, memref<?x4x?xf32>, memref<?x4x?x16xf32>, memref<?x2x?x16xf32>,
        memref<?x2x?x8xf32>
      score_mod {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %d = arith.subi %ki, %qp : i32
        %r = attn.aux_load 0 [%d] : f32
        %x = attn.aux_load 1 [%bi, %h, %qi, %ki] : f32
        %t = arith.addf %s, %r : f32
        %u = arith.addf %t, %x : f32
        gpu.yield %u : f32
      }
      score_grad {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %one = arith.constant 1.0 : f32
        gpu.yield %one : f32
      }
      aux_grad {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %one = arith.constant 1.0 : f32
        %d = arith.subi %ki, %qp : i32
        gpu.yield %d, %one, %bi, %h, %qi, %ki, %one : i32, f32, i32, i32, i32, i32, f32
      }
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_backward %f rows = 8 key_block = 16 vector_width = 4 key_unroll = 2
        : !transform.any_op
    transform.yield
  }
}
