// RUN: attn-opt %s -transform-interpreter -canonicalize | FileCheck %s
// transform.attn.lower_linear: each of linear attention's row ops a task loop of its own over
// (batch or chunk, head, 16 rows).

// Feature rows: tasks over chunks x batch (dim 0), 2 heads and 4 tiles of the chunk's 64 rows;
// source row j = first + n C + t read where 0 <= j < min(T, lengths[b]), elu(x) + 1 of it, and
// zeros elsewhere.
// CHECK-LABEL: func.func @features
// CHECK-SAME: (%[[X:.*]]: memref<?x2x?x16xbf16>, %[[OUT:.*]]: memref<?x2x64x16xf32>, %[[LEN:.*]]: memref<?xi32>, %[[FIRST:.*]]: index)
// CHECK: %[[NB:.*]] = memref.dim %[[OUT]], %c0
// CHECK: %[[TASKS:.*]] = arith.muli %[[NB]], %c8
// CHECK: scf.forall (%{{.*}}) in (%[[TASKS]])
// CHECK:   scf.for
// CHECK:     memref.load %[[LEN]]
// CHECK:     arith.cmpi sge
// CHECK:     arith.cmpi slt
// CHECK:     scf.if
// CHECK:       memref.load %[[X]]
// CHECK:       arith.cmpf ogt
// CHECK:       math.exp
// CHECK:       arith.select
// CHECK:       memref.store %{{.*}}, %[[OUT]]
// CHECK:     } else {
// CHECK:       memref.store %cst{{.*}}, %[[OUT]]
func.func @features(%x: memref<?x2x?x16xbf16>, %out: memref<?x2x64x16xf32>,
                    %lengths: memref<?xi32>, %first: index) {
  attn.feature_rows %x into %out rows from %first limit %lengths {map = "elu1"}
      : memref<?x2x?x16xbf16>, memref<?x2x64x16xf32>, memref<?xi32>
  return
}

// FAVOR+: a row's |x|^2 by FMAs over its 16 dims, then per feature the flag (column 16) times
// exp(sqrt(s) y - s |x|^2 / 2) / sqrt(F), in place.
// CHECK-LABEL: func.func @favor
// CHECK: scf.forall
// CHECK:   scf.for %{{.*}} = %c0 to %c16 {{.*}} -> (f32)
// CHECK:     math.fma
// CHECK:   memref.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %c16]
// CHECK:   scf.for %{{.*}} = %c0 to %c32
// CHECK:     arith.subf
// CHECK:     math.exp
// CHECK:     memref.store
func.func @favor(%rows: memref<?x2x64x17xf32>, %projected: memref<?x2x64x32xf32>) {
  attn.favor_features %rows, %projected into %projected {scale = 0.25 : f64}
      : memref<?x2x64x17xf32>, memref<?x2x64x32xf32>, memref<?x2x64x32xf32>
  return
}

// The prefix: a task per 16 of a head's 16 state rows; per column, the running sum over the
// chunks from the initial state, each chunk's slot overwritten by the sum before it.
// CHECK-LABEL: func.func @prefix
// CHECK-SAME: (%[[SUMS:.*]]: memref<?x2x16x17xf32>, %[[INIT:.*]]: memref<?x2x16x17xf32>)
// CHECK: scf.forall
// CHECK:   scf.for
// CHECK:     scf.for %{{.*}} = %c0 to %c17
// CHECK:       memref.load %[[INIT]]
// CHECK:       scf.for {{.*}} -> (f32)
// CHECK:         %[[CHUNK:.*]] = memref.load %[[SUMS]]
// CHECK:         memref.store %{{.*}}, %[[SUMS]]
// CHECK:         arith.addf %{{.*}}, %[[CHUNK]]
func.func @prefix(%sums: memref<?x2x16x17xf32>, %initial: memref<?x2x16x17xf32>) {
  attn.chunk_prefix %sums from %initial : memref<?x2x16x17xf32>, memref<?x2x16x17xf32>
  return
}

// The output: row i read from chunk i / 64, each column divided by the last, 0 where it is 0,
// rounded to bf16.
// CHECK-LABEL: func.func @normalize
// CHECK: scf.forall
// CHECK:   arith.divui %{{.*}}, %c64
// CHECK:   arith.remui %{{.*}}, %c64
// CHECK:   memref.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %c16]
// CHECK:   scf.for %{{.*}} = %c0 to %c16
// CHECK:     arith.cmpf une
// CHECK:     arith.divf
// CHECK:     arith.select
// CHECK:     arith.truncf %{{.*}} : f32 to bf16
func.func @normalize(%total: memref<?x2x64x17xf32>, %o: memref<?x2x?x16xbf16>) {
  attn.normalize_rows %total into %o : memref<?x2x64x17xf32>, memref<?x2x?x16xbf16>
  return
}

// The weights: row i's keys up to min(max(i + offset + 1, 0), Tk) as dot products over 16
// features with KV head h / 2, divided by z; zeros past them.
// CHECK-LABEL: func.func @weights
// CHECK-SAME: %[[OFFSET:[^ ]*]]: index)
// CHECK: scf.forall
// CHECK:   arith.divui %{{.*}}, %c2
// CHECK:   scf.for %[[I:.*]] =
// CHECK:     %[[DIAG:.*]] = arith.addi %[[I]], %[[OFFSET]]
// CHECK:     arith.addi %[[DIAG]], %c1
// CHECK:     arith.maxsi
// CHECK:     %[[END:.*]] = arith.minsi
// CHECK:     scf.for %{{.*}} = %c0 to %[[END]]
// CHECK:       scf.for %{{.*}} = %c0 to %c16 {{.*}} -> (f32)
// CHECK:         math.fma
// CHECK:       arith.divf
// CHECK:     scf.for %{{.*}} = %[[END]] to
func.func @weights(%q: memref<?x4x64x16xf32>, %k: memref<?x2x?x16xf32>,
                   %total: memref<?x4x64x17xf32>, %w: memref<?x4x?x?xf32>, %offset: index) {
  attn.linear_weights %q, %k, %total into %w causal_offset %offset
      : memref<?x4x64x16xf32>, memref<?x2x?x16xf32>, memref<?x4x64x17xf32>, memref<?x4x?x?xf32>
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_linear %f rows = 16 : !transform.any_op
    transform.yield
  }
}
