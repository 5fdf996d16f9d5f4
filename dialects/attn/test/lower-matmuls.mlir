// RUN: attn-opt %s -transform-interpreter -canonicalize | FileCheck %s
// transform.attn.lower_matmuls: a task loop of its own over (batch, head, 32 rows, column
// tiles); a task zeroes its out^T tile, packs 256 steps of lhs's rows at a time transposed
// (rows past T zero; where lhs's steps are contiguous, 16 x 16 squares: each row's steps a
// masked vector load, transposed by shuffles, a step's rows a vector store), accumulates
// register tiles of 4 columns x 2 vectors of 16 rows with each rhs element broadcast (rhs seen
// with a unit column stride where it has one), in a loop over the task's blocks of 4 columns,
// and writes the tile back rounded to out's type.

// CHECK-LABEL: func.func @project
// CHECK-SAME: (%[[Q:.*]]: memref<?x4x?x24xf32>, %[[W:.*]]: memref<1x4x24x8xbf16>, %[[OUT:.*]]: memref<?x4x?x8xf16>)
// CHECK: %[[T:.*]] = memref.dim %[[OUT]], %c2
// CHECK: %[[ROWTILES:.*]] = arith.ceildivui %[[T]], %c32
// CHECK: %[[B:.*]] = memref.dim %[[OUT]], %c0
// CHECK: %[[BH:.*]] = arith.muli %[[B]], %c4
// CHECK: %[[TASKS:.*]] = arith.muli %[[BH]], %[[ROWTILES]]
// CHECK: %[[UNFOLDED:.*]] = arith.minui %[[TASKS]],
// CHECK: scf.forall (%{{.*}}) in (%[[UNFOLDED]])
// CHECK: %[[TILE:.*]] = memref.alloca() : memref<8x32xf32>
// CHECK: %[[PACKED:.*]] = memref.alloca() : memref<256x32xf32>
// CHECK: vector.store %{{.*}}, %[[TILE]]
// The one block of 24 steps: squares of 16 steps (the last one masked) of both 16-row halves.
// CHECK: scf.for %{{.*}} = %c0 to %c24 step %c16
// CHECK:   vector.create_mask %{{.*}} : vector<16xi1>
// CHECK-COUNT-16: vector.maskedload %[[Q]]
// CHECK-COUNT-64: vector.shuffle
// CHECK:   arith.cmpi ult, %{{.*}} : vector<16xindex>
// CHECK:   arith.select %{{.*}} : vector<16xi1>, vector<16xf32>
// CHECK:   vector.store %{{.*}}, %[[PACKED]][%{{.*}}, %c0]
// CHECK-COUNT-16: vector.maskedload %[[Q]]
// CHECK:   vector.store %{{.*}}, %[[PACKED]][%{{.*}}, %c16]
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:   vector.load %[[PACKED]]
// CHECK:   memref.load %[[W]]
// CHECK:   arith.extf %{{.*}} : bf16 to f32
// CHECK:   vector.fma
// CHECK: vector.store %{{.*}}, %[[TILE]]
// CHECK: scf.for
// CHECK:   scf.for
// CHECK:     memref.load %[[TILE]]
// CHECK:     arith.truncf %{{.*}} : f32 to f16
// CHECK:     memref.store %{{.*}}, %[[OUT]]
// CHECK-NOT: attn.matmul
func.func @project(%q: memref<?x4x?x24xf32>, %w: memref<1x4x24x8xbf16>,
                   %out: memref<?x4x?x8xf16>) {
  attn.matmul %q, %w into %out : memref<?x4x?x24xf32>, memref<1x4x24x8xbf16>, memref<?x4x?x8xf16>
  return
}

// rhs's strides known only at run time: the register tiles three times, for a unit column
// stride (rhs seen with a static one), for a unit step stride (a weight read transposed), and
// for any.
// CHECK-LABEL: func.func @project_any_stride
// CHECK: %strides:4 = memref.extract_strided_metadata %[[RHS:.*]] :
// CHECK: memref.reinterpret_cast %base_buffer
// CHECK: %[[UNIT:.*]] = arith.cmpi eq, %strides#3, %c1
// CHECK: scf.if %[[UNIT]]
// CHECK:   memref.load %reinterpret_cast
// CHECK:   vector.fma
// CHECK: } else {
// CHECK:   %[[STEPS:.*]] = memref.reinterpret_cast {{.*}} strides: [%{{.*}}, %{{.*}}, 1, %{{.*}}]
// CHECK:   %[[UNITSTEP:.*]] = arith.cmpi eq, %{{.*}}#2, %c1
// CHECK:   scf.if %[[UNITSTEP]]
// CHECK:     memref.load %[[STEPS]]
// CHECK:     vector.fma
// CHECK:   } else {
// CHECK:     memref.load %[[RHS]]
// CHECK:     vector.fma
func.func @project_any_stride(%q: memref<?x1x?x16xf32>,
                              %w: memref<1x1x16x4xf32, strided<[?, ?, ?, ?], offset: ?>>,
                              %out: memref<?x1x?x4xf32>) {
  attn.matmul %q, %w into %out
      : memref<?x1x?x16xf32>, memref<1x1x16x4xf32, strided<[?, ?, ?, ?], offset: ?>>,
        memref<?x1x?x4xf32>
  return
}

// A limit: the contraction runs over min(R, max(limit[b], 0)) steps. A sinusoid: the task's
// table of the reference's frequencies, then one sine of each packed step's angle (plus pi/2
// for the cosines of odd steps).
// CHECK-LABEL: func.func @project_limited
// CHECK: memref.load %{{.*}}[%{{.*}}] : memref<?xi32>
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK-LABEL: func.func @project_with_positions
// CHECK: memref.alloca() : memref<4xf64>
// CHECK-NOT: math.cos
// CHECK: math.sin
// CHECK-NOT: math.cos
func.func @project_limited(%e: memref<1x2x16x?xf32>, %k: memref<?x2x?x64xf32>,
                           %out: memref<?x2x16x64xf32>, %limit: memref<?xi32>) {
  attn.matmul %e, %k into %out limit %limit
      : memref<1x2x16x?xf32>, memref<?x2x?x64xf32>, memref<?x2x16x64xf32>, memref<?xi32>
  return
}
func.func @project_with_positions(%x: memref<?x1x?x8xf32>, %w: memref<1x1x8x4xf32>,
                                  %out: memref<?x1x?x4xf32>, %offset: index) {
  attn.matmul %x, %w into %out sinusoid %offset
      : memref<?x1x?x8xf32>, memref<1x1x8x4xf32>, memref<?x1x?x4xf32>
  return
}

// Linear attention's product within a chunk: causal (a row sums over the steps r <= t only: the
// task's steps end at its last row, lhs taken as 0 past the diagonal) and accumulate (the tile
// starts from out's elements).
// CHECK-LABEL: func.func @within_chunk
// CHECK-SAME: (%[[A:.*]]: memref<?x2x64x64xf32>, %{{.*}}: memref<?x1x64x17xf32>, %[[OUT:.*]]: memref<?x2x64x17xf32>)
// CHECK: scf.forall
// CHECK:   %[[FIRST:.*]] = arith.muli %{{.*}}, %c32
// CHECK:   %[[END:.*]] = arith.minui %{{.*}}, %c64
// CHECK:   %[[STEPS:.*]] = arith.minui %[[END]], %c64
// CHECK:   %[[TILE:.*]] = memref.alloca() : memref<20x32xf32>
// CHECK:   scf.for %[[T:.*]] = %[[FIRST]] to %[[END]]
// CHECK:     scf.for
// CHECK:       memref.load %[[OUT]][%{{.*}}, %{{.*}}, %[[T]], %{{.*}}]
// CHECK:       memref.store %{{.*}}, %[[TILE]]
// CHECK:   scf.for %{{.*}} = %c0 to %[[STEPS]] step %c256
// CHECK:     scf.for
// CHECK:       vector.maskedload %[[A]]
// CHECK:       arith.cmpi ult, %{{.*}} : vector<16xindex>
// CHECK:       arith.cmpi ule, %{{.*}} : vector<16xindex>
// CHECK:       arith.andi %{{.*}} : vector<16xi1>
// CHECK:       arith.select
func.func @within_chunk(%a: memref<?x2x64x64xf32>, %v: memref<?x1x64x17xf32>,
                        %out: memref<?x2x64x17xf32>) {
  attn.matmul %a, %v into %out {accumulate, causal}
      : memref<?x2x64x64xf32>, memref<?x1x64x17xf32>, memref<?x2x64x17xf32>
  return
}

// The backward's weight gradient, X^T dY summed over (b, t): lhs_transposed and batch_sum. A
// task sums every batch entry in order; a step's rows, contiguous in X, are one masked load as
// they lie (no squares transposed).
// CHECK-LABEL: func.func @weight_gradient
// CHECK-SAME: (%[[X:.*]]: memref<?x1x?x24xf32>, %[[D:.*]]: memref<?x1x?x8xf32>, %{{.*}}: memref<1x1x24x8xf32>)
// CHECK: scf.forall
// CHECK:   %[[B:.*]] = memref.dim %[[X]], %c0
// CHECK:   scf.for %[[BATCH:.*]] = %c0 to %[[B]]
// CHECK:     scf.for %{{.*}} = %c0 to %{{.*}} step %c256
// CHECK-NOT:   vector.shuffle
// CHECK:       vector.maskedload %[[X]][%[[BATCH]], %c0, %{{.*}}, %{{.*}}]
// CHECK-NOT:   vector.shuffle
// CHECK:       memref.load %[[D]][%[[BATCH]], %c0,
// CHECK:       vector.fma
func.func @weight_gradient(%x: memref<?x1x?x24xf32>, %dy: memref<?x1x?x8xf32>,
                           %out: memref<1x1x24x8xf32>) {
  attn.matmul %x, %dy into %out {lhs_transposed, batch_sum}
      : memref<?x1x?x24xf32>, memref<?x1x?x8xf32>, memref<1x1x24x8xf32>
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_matmuls %f rows = 32 vector_width = 16 columns = 4 : !transform.any_op
    transform.yield
  }
}
