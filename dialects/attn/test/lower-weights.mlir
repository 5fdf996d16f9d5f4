// RUN: attn-opt %s -transform-interpreter -canonicalize | FileCheck %s
// transform.attn.lower_weights: a task loop of its own over (batch, head, tile of 8 rows); the
// tile's query packed and scaled, then two sweeps over the keys causal and padding (mask_mod's
// affine terms) can keep, two keys at a time and then one, each forming QK^T as FMAs of
// query-row vectors and the mask_mod region as selects. The first folds the scores (-inf where
// masked) into each lane's max and sum, from the head's sink (sum 0 where the sink is -inf), one
// exp a score; the second stores exp(s - max) * (1 / sum) (0 where the key is masked) lane by
// lane for the tile's rows, the max made NaN where it is +inf and 0 where it is -inf; the keys
// on either side get 0 without a score.

// CHECK-LABEL: func.func @weights
// CHECK-SAME: (%[[Q:.*]]: memref<?x4x?x16xf32>, %[[K:.*]]: memref<?x2x?x16xf16>, %[[LEN:.*]]: memref<?xi32>, %[[SINKS:.*]]: memref<4xf32>, %[[W:.*]]: memref<?x4x?x?xf32>)
// CHECK-DAG: %[[NAN:.*]] = arith.constant dense<0x7FC00000> : vector<4xf32>
// CHECK-DAG: %[[INF:.*]] = arith.constant dense<0x7F800000> : vector<4xf32>
// CHECK-DAG: %[[ONE:.*]] = arith.constant dense<1.000000e+00> : vector<4xf32>
// CHECK-DAG: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<4xf32>
// CHECK-DAG: %[[NEG_INF:.*]] = arith.constant dense<0xFF800000> : vector<4xf32>
// CHECK: %[[TK:.*]] = memref.dim %[[K]], %c2
// CHECK: scf.forall
// CHECK:   %[[PACKED:.*]] = memref.alloca() : memref<16x8xf32>
// CHECK:   %[[ROWS:.*]] = arith.minsi %{{.*}}, %c8
// CHECK:   vector.maskedload
// CHECK:   vector.store %{{.*}}, %[[PACKED]]
// CHECK:   arith.index_cast %{{.*}} : i32 to index
// CHECK:   %[[HI:.*]] = arith.maxsi %{{.*}}, %c0
// CHECK:   %[[LO:.*]] = arith.minsi %[[HI]], %c0
// CHECK:   %[[REM:.*]] = arith.remui %{{.*}}, %c2
// CHECK:   %[[WHOLE:.*]] = arith.subi %[[HI]], %[[REM]]
// CHECK:   %[[SINK:.*]] = memref.load %[[SINKS]]
// CHECK:   %[[M0:.*]] = vector.broadcast %[[SINK]] : f32 to vector<4xf32>
// CHECK:   %[[NONE:.*]] = arith.cmpf oeq, %[[M0]], %[[NEG_INF]]
// CHECK:   %[[L0:.*]] = arith.select %[[NONE]], %[[ZERO]], %[[ONE]]
// CHECK:   %[[SUMS:.*]]:4 = scf.for %{{.*}} = %[[LO]] to %[[WHOLE]] step %c2 iter_args(%{{.*}} = %[[M0]], %{{.*}} = %[[L0]], %{{.*}} = %[[M0]], %{{.*}} = %[[L0]])
// CHECK:     scf.for %{{.*}} = %c0 to %c16 {{.*}} -> (vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>)
// CHECK:       vector.fma
// CHECK:     arith.cmpi sle
// CHECK:     arith.cmpi slt
// CHECK:     %[[S:.*]] = arith.select %{{.*}}, %{{.*}}, %[[NEG_INF]]
// CHECK:     arith.cmpf ogt, %[[S]]
// CHECK:     math.absf
// CHECK:     arith.maximumf
// CHECK:     scf.yield
// CHECK:   %[[TAIL:.*]]:4 = scf.for %{{.*}} = %[[WHOLE]] to %[[HI]] step %c1 iter_args(%{{.*}} = %[[SUMS]]#0, %{{.*}} = %[[SUMS]]#1, %{{.*}} = %[[SUMS]]#2, %{{.*}} = %[[SUMS]]#3)
// CHECK:   %[[POISONED:.*]] = arith.cmpf oeq, %[[TAIL]]#0, %[[INF]]
// CHECK:   %[[EMPTY:.*]] = arith.cmpf oeq, %[[TAIL]]#0, %[[NEG_INF]]
// CHECK:   %[[FINITE:.*]] = arith.select %[[EMPTY]], %[[ZERO]], %[[TAIL]]#0
// CHECK:   %[[MAX:.*]] = arith.select %[[POISONED]], %[[NAN]], %[[FINITE]]
// CHECK:   %[[RECIPROCAL:.*]] = arith.divf %[[ONE]], %[[TAIL]]#1
// CHECK:   %[[NOTHING:.*]] = arith.cmpf oeq, %[[TAIL]]#1, %[[ZERO]]
// CHECK:   %[[INVERSE:.*]] = arith.select %[[NOTHING]], %[[ZERO]], %[[RECIPROCAL]]
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
// CHECK:     %[[X:.*]] = arith.subf %{{.*}}, %[[MAX]] : vector<4xf32>
// CHECK:     %[[E:.*]] = math.exp %[[X]] : vector<4xf32>
// CHECK:     %[[P:.*]] = arith.mulf %[[E]], %[[INVERSE]] : vector<4xf32>
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
                   %sinks: memref<4xf32>, %w: memref<?x4x?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %b = memref.dim %q, %c0 : memref<?x4x?x16xf32>
  %tq = memref.dim %q, %c2 : memref<?x4x?x16xf32>
  %tk = memref.dim %k, %c2 : memref<?x2x?x16xf16>
  attn.weights %q, %k aux(%len : memref<?xi32>) sinks(%sinks : memref<4xf32>) into %w
      at [%c0, %c0, %c0, %c0] sizes [%b, %c4, %tq, %tk] seq_q %tq
      {num_heads = 4 : i64, scale = 0.25 : f64}
      : memref<?x4x?x16xf32>, memref<?x2x?x16xf16>, memref<?x4x?x?xf32>
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
