// RUN: attn-opt %s -transform-interpreter -canonicalize | FileCheck %s
// transform.attn.lower_weights: a task loop of its own over (batch, head, tile of 8 rows); the
// tile's query packed and scaled, each lane's lse (-inf made +inf), then for the keys causal
// and padding (mask_mod's affine terms) can keep, two keys at a time and then one: QK^T as FMAs
// of query-row vectors, the mask_mod region as selects, exp(s - lse) (0 where the key is
// masked), stored lane by lane for the tile's rows; the keys on either side get 0 without a
// score.

// CHECK-LABEL: func.func @weights
// CHECK-SAME: (%[[Q:.*]]: memref<?x4x?x16xf32>, %[[K:.*]]: memref<?x2x?x16xf16>, %[[LEN:.*]]: memref<?xi32>, %[[LSE:.*]]: memref<?x4x?xf32>, %[[W:.*]]: memref<?x4x?x?xf32>)
// CHECK: %[[TK:.*]] = memref.dim %[[K]], %c2
// CHECK: scf.forall
// CHECK:   %[[PACKED:.*]] = memref.alloca() : memref<16x8xf32>
// CHECK:   %[[ROWS:.*]] = arith.minsi %{{.*}}, %c8
// CHECK:   memref.store %{{.*}}, %[[PACKED]]
// CHECK:   memref.load %[[LSE]]
// CHECK:   arith.select %{{.*}}, %{{.*}}, %{{.*}} : vector<4xi1>, vector<4xf32>
// CHECK:   arith.index_cast %{{.*}} : i32 to index
// CHECK:   %[[HI:.*]] = arith.maxsi %{{.*}}, %c0
// CHECK:   %[[LO:.*]] = arith.minsi %[[HI]], %c0
// CHECK:   %[[REM:.*]] = arith.remui %{{.*}}, %c2
// CHECK:   %[[WHOLE:.*]] = arith.subi %[[HI]], %[[REM]]
// CHECK:   scf.for %{{.*}} = %c0 to %[[ROWS]]
// CHECK:     scf.for %{{.*}} = %c0 to %[[LO]]
// CHECK:       memref.store %{{.*}}, %[[W]]
// CHECK:   scf.for %[[J:.*]] = %[[LO]] to %[[WHOLE]] step %c2
// CHECK:     scf.for %{{.*}} = %c0 to %c16 {{.*}} -> (vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>)
// CHECK:       vector.load %[[PACKED]]
// CHECK:       memref.load %[[K]]
// CHECK:       vector.fma
// CHECK:     arith.cmpi sle
// CHECK:     arith.cmpi slt
// CHECK:     %[[P:.*]] = math.exp %{{.*}} : vector<4xf32>
// CHECK:     %[[KEPT:.*]] = arith.select %{{.*}}, %[[P]], %{{.*}}
// CHECK:     scf.for %[[LANE:.*]] = %c0 to
// CHECK:       vector.extractelement %[[KEPT]][%[[LANE]] : index]
// CHECK:       memref.store %{{.*}}, %[[W]][%{{.*}}, %{{.*}}, %{{.*}}, %[[J]]]
// CHECK:   scf.for %{{.*}} = %[[WHOLE]] to %[[HI]] step %c1
// CHECK:   scf.for %{{.*}} = %c0 to %[[ROWS]]
// CHECK:     scf.for %{{.*}} = %[[HI]] to %[[TK]]
// CHECK:       memref.store %{{.*}}, %[[W]]
// CHECK-NOT: attn.weights
func.func @weights(%q: memref<?x4x?x16xf32>, %k: memref<?x2x?x16xf16>, %len: memref<?xi32>,
                   %lse: memref<?x4x?xf32>, %w: memref<?x4x?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %b = memref.dim %q, %c0 : memref<?x4x?x16xf32>
  %tq = memref.dim %q, %c2 : memref<?x4x?x16xf32>
  %tk = memref.dim %k, %c2 : memref<?x2x?x16xf16>
  attn.weights %q, %k aux(%len : memref<?xi32>) lse %lse into %w at [%c0, %c0, %c0, %c0]
      sizes [%b, %c4, %tq, %tk] seq_q %tq {num_heads = 4 : i64, scale = 0.25 : f64}
      : memref<?x4x?x16xf32>, memref<?x2x?x16xf16>, memref<?x4x?xf32>, memref<?x4x?x?xf32>
      mask_mod {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %i: i32, %j: i32, %p: i32, %tqi: i32, %tki: i32):
        %causal = arith.cmpi sle, %j, %p : i32
        %length = attn.aux_load 0 [%bi] : i32
        %padding = arith.cmpi slt, %j, %length : i32
        %keep = arith.andi %causal, %padding : i1
        gpu.yield %keep : i1
      }
  return
}


module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_weights %f rows = 8 vector_width = 4 key_unroll = 2 : !transform.any_op
    transform.yield
  }
}
