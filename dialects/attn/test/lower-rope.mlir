// RUN: attn-opt %s -transform-interpreter -canonicalize | FileCheck %s
// transform.attn.lower_rope: a task loop of its own over (batch, 4 rows); per row the angles
// pos * theta^(-2p/dims) in f64 (frequencies 1 and theta^(-1/2) = 0.01 for dims 4), reduced
// modulo 2 pi in f64, cos and sin in f32, then every head's pairs (p, p + 2) rotated and the
// dims past 4 copied.

// CHECK-LABEL: func.func @rotate
// CHECK-SAME: (%[[IN:.*]]: memref<?x2x?x8xf16>, %[[OUT:.*]]: memref<?x2x?x8xf16>, %[[OFFSET:.*]]: index)
// CHECK-DAG: %[[TWO_PI:.*]] = arith.constant 6.2831853071795862 : f64
// CHECK-DAG: %[[F1:.*]] = arith.constant 1.000000e-02 : f64
// CHECK-DAG: %[[F0:.*]] = arith.constant 1.000000e+00 : f64
// CHECK: %[[B:.*]] = memref.dim %[[IN]], %c0
// CHECK: %[[T:.*]] = memref.dim %[[IN]], %c2
// CHECK: %[[CHUNKS:.*]] = arith.ceildivui %[[T]], %c4
// CHECK: %[[TASKS:.*]] = arith.muli %[[B]], %[[CHUNKS]]
// CHECK: scf.forall (%{{.*}}) in (%[[TASKS]])
// CHECK: %[[FREQ:.*]] = memref.alloca() : memref<2xf64>
// CHECK: memref.store %[[F0]], %[[FREQ]][%c0]
// CHECK: memref.store %[[F1]], %[[FREQ]][%c1]
// CHECK: scf.for %[[ROW:.*]] =
// CHECK:   %[[POS:.*]] = arith.addi %[[ROW]], %[[OFFSET]]
// CHECK:   arith.sitofp %{{.*}} : i64 to f64
// CHECK:   scf.for
// CHECK:     math.roundeven %{{.*}} : f64
// CHECK:     arith.mulf %{{.*}}, %[[TWO_PI]] : f64
// CHECK:     arith.truncf %{{.*}} : f64 to f32
// CHECK:     math.cos %{{.*}} : f32
// CHECK:     math.sin %{{.*}} : f32
// CHECK:   scf.for %[[H:.*]] =
// CHECK:     scf.for %[[P:.*]] =
// CHECK:       %[[SECOND:.*]] = arith.addi %[[P]], %c2
// CHECK:       memref.load %[[IN]][%{{.*}}, %[[H]], %[[ROW]], %[[P]]]
// CHECK:       memref.load %[[IN]][%{{.*}}, %[[H]], %[[ROW]], %[[SECOND]]]
// CHECK:       arith.truncf %{{.*}} : f32 to f16
// CHECK:       memref.store %{{.*}}, %[[OUT]][%{{.*}}, %[[H]], %[[ROW]], %[[P]]]
// CHECK:       memref.store %{{.*}}, %[[OUT]][%{{.*}}, %[[H]], %[[ROW]], %[[SECOND]]]
// CHECK:     scf.for %[[D:.*]] = %c4 to %c8
// CHECK:       memref.load %[[IN]][%{{.*}}, %[[H]], %[[ROW]], %[[D]]]
// CHECK-NOT: attn.rope
func.func @rotate(%in: memref<?x2x?x8xf16>, %out: memref<?x2x?x8xf16>, %offset: index) {
  attn.rope %in into %out offset %offset {style = "half", theta = 1.0e4 : f64, dims = 4 : i64}
      : memref<?x2x?x8xf16>, memref<?x2x?x8xf16>
  return
}

// With ends (a KV cache's seq_lens), batch b's rows sit at row + offset + ends[b]: the task
// reads its batch's end once.
// CHECK-LABEL: func.func @rotate_at_the_ends
// CHECK-SAME: (%[[IN:.*]]: memref<?x2x?x8xf16>, %[[OUT:.*]]: memref<?x2x?x8xf16>, %[[OFFSET:.*]]: index, %[[ENDS:.*]]: memref<?xi32>)
// CHECK: scf.forall (%{{.*}}) in
// CHECK: %[[END:.*]] = memref.load %[[ENDS]][%{{.*}}] : memref<?xi32>
// CHECK: %[[ENDINDEX:.*]] = arith.index_cast %[[END]] : i32 to index
// CHECK: %[[BATCHOFFSET:.*]] = arith.addi %[[OFFSET]], %[[ENDINDEX]]
// CHECK: scf.for %[[ROW:.*]] =
// CHECK:   arith.addi %[[ROW]], %[[BATCHOFFSET]]
func.func @rotate_at_the_ends(%in: memref<?x2x?x8xf16>, %out: memref<?x2x?x8xf16>, %offset: index,
                              %ends: memref<?xi32>) {
  attn.rope %in into %out offset %offset ends %ends
      {style = "half", theta = 1.0e4 : f64, dims = 4 : i64}
      : memref<?x2x?x8xf16>, memref<?x2x?x8xf16>, memref<?xi32>
  return
}

// Transposed, R(pos)^T = R(-pos) (the backward's): the sine negated before any pair uses it;
// rows of f32 gradients into f16 rows.
// CHECK-LABEL: func.func @rotate_back
// CHECK: %[[SIN:.*]] = math.sin %{{.*}} : f32
// CHECK: %[[NEG:.*]] = arith.negf %[[SIN]] : f32
// CHECK: memref.store %[[NEG]]
// CHECK: arith.truncf %{{.*}} : f32 to f16
func.func @rotate_back(%in: memref<?x2x?x8xf32>, %out: memref<?x2x?x8xf16>, %offset: index) {
  attn.rope %in into %out offset %offset
      {style = "half", theta = 1.0e4 : f64, dims = 4 : i64, transposed}
      : memref<?x2x?x8xf32>, memref<?x2x?x8xf16>
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_rope %f rows = 4 : !transform.any_op
    transform.yield
  }
}
