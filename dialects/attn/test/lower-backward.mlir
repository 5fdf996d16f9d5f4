// RUN: attn-opt %s -transform-interpreter -canonicalize | FileCheck %s
// transform.attn.lower_backward: D's workspace, and S = ceil(8 / (B H_kv)) copies of dQ^T
// (Tq rounded up to the 8-row tiles); then three phases in order: D per query tile, a task per
// (batch, KV head, key chunk) whose key blocks recompute the scores in vectors of 4 rows
// (score_mod's tanh, mask_mod, exp(s - lse) as the forward's probabilityExp, score_grad's
// 1 - tanh^2) and add into dK, dV and its copy of dQ^T in register tiles, and dQ per query
// tile, the copies summed in order (8 rows of a column a vector, in 8 x 8 squares transposed
// into dQ's rows).

// CHECK-LABEL: func.func @backward
// CHECK: %[[PADDED:.*]] = arith.muli %{{.*}}, %c8
// CHECK: %[[DELTA:.*]] = memref.alloc(%[[B:[a-z_0-9]+]], %{{.*}}) : memref<?x4x?xf32>
// CHECK: %[[PAIRS:.*]] = arith.muli %[[B]], %c2
// CHECK: %[[CHUNKS:.*]] = arith.ceildivui %c8, %[[PAIRS]]
// CHECK: %[[COPIES:.*]] = arith.muli %[[CHUNKS]], %[[B]]
// CHECK: %[[DQ:.*]] = memref.alloc(%[[COPIES]], %[[PADDED]]) : memref<?x4x16x?xf32>
// CHECK: scf.forall
// CHECK:   memref.store %{{.*}}, %[[DELTA]]
// CHECK: scf.forall
// The key blocks: min(key_block, ceil(Tk / S) rounded up to 32, at least 32).
// CHECK:   %[[PER:.*]] = arith.ceildivui %{{.*}}, %[[CHUNKS]]
// CHECK:   %[[ROUNDED:.*]] = arith.ceildivui %[[PER]], %c32
// CHECK:   %[[WHOLE:.*]] = arith.muli %[[ROUNDED]], %c32
// CHECK:   %[[LEAST:.*]] = arith.maxui %[[WHOLE]], %c32
// CHECK:   arith.minui %[[LEAST]], %c{{[0-9]+}}
// CHECK:   math.tanh %{{.*}} : vector<4xf32>
// CHECK-NOT: math.exp
// CHECK:   arith.maximumf
// CHECK:   arith.shli %{{.*}} : vector<4xi32>
// CHECK:   math.tanh %{{.*}} : vector<4xf32>
// CHECK:   vector.fma
// CHECK:   vector.store %{{.*}}, %[[DQ]]
// CHECK: scf.forall
// CHECK:   scf.for %{{.*}} = %c0 to %[[CHUNKS]]
// CHECK:     vector.load %[[DQ]]
// CHECK:   vector.shuffle
// CHECK:   vector.store
// CHECK: memref.dealloc %[[DELTA]]
// CHECK: memref.dealloc %[[DQ]]

func.func @backward(%q: memref<?x4x?x16xf32>, %k: memref<?x2x?x16xf32>, %v: memref<?x2x?x8xf32>,
                    %o: memref<?x4x?x8xf32>, %do: memref<?x4x?x8xf32>, %lse: memref<?x4x?xf32>,
                    %dq: memref<?x4x?x16xf32>, %dk: memref<?x2x?x16xf32>, %dv: memref<?x2x?x8xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %b = memref.dim %q, %c0 : memref<?x4x?x16xf32>
  %tq = memref.dim %q, %c2 : memref<?x4x?x16xf32>
  %tk = memref.dim %k, %c2 : memref<?x2x?x16xf32>
  attn.backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv
      at [%c0, %c0, %c0, %c0] sizes [%b, %c4, %tq, %tk] seq_q %tq
      {num_heads = 4 : i64, scale = 0.25 : f64}
      : memref<?x4x?x16xf32>, memref<?x2x?x16xf32>, memref<?x2x?x8xf32>, memref<?x4x?x8xf32>,
        memref<?x4x?x8xf32>, memref<?x4x?xf32>, memref<?x4x?x16xf32>, memref<?x2x?x16xf32>,
        memref<?x2x?x8xf32>
      score_mod {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %t = math.tanh %s : f32
        gpu.yield %t : f32
      }
      mask_mod {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %keep = arith.cmpi sle, %ki, %qp : i32
        gpu.yield %keep : i1
      }
      score_grad {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %t = math.tanh %s : f32
        %t2 = arith.mulf %t, %t : f32
        %one = arith.constant 1.0 : f32
        %d = arith.subf %one, %t2 : f32
        gpu.yield %d : f32
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
