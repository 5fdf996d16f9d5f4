// RUN: attn-opt %s -transform-interpreter -canonicalize | FileCheck %s
// transform.attn.lower_matmuls tensor_cores = 1: a gpu.launch in the op's place, blocks x over
// (batch, head, 64-row tiles) and y over 64-column tiles, 128 threads, shared lhs [64, 36] and
// rhs [32, 72] f32 tiles. Per stage of 32 contraction steps up to the batch's extent (limit,
// and under causal the tile's last row): a barrier, both tiles staged as TF32 (zero outside:
// selected after a clamped read, lhs past each row's diagonal), a barrier, then 4 steps of 2 x 4
// m16n8k8 TF32 MMAs per warp; the C fragments are written where inside out, onto out's
// elements with accumulate. Then the sinusoid, and a weight gradient (batch_sum).

// CHECK-LABEL: func.func @project_mma
// CHECK-SAME: (%[[X:.*]]: memref<?x4x?x24xbf16>, %[[W:.*]]: memref<1x2x24x72xbf16>, %[[OUT:.*]]: memref<?x4x?x72xf32>, %[[LIMIT:.*]]: memref<?xi32>)
// CHECK: %[[T:.*]] = memref.dim %[[OUT]], %c2
// CHECK: %[[ROWTILES:.*]] = arith.ceildivui %[[T]], %c64
// CHECK: %[[B:.*]] = memref.dim %[[OUT]], %c0
// CHECK: %[[BH:.*]] = arith.muli %[[B]], %c4
// CHECK: %[[BLOCKS:.*]] = arith.muli %[[BH]], %[[ROWTILES]]
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %[[BLOCKS]], {{.*}} = %c2, {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c128, {{.*}} = %c1, {{.*}} = %c1) workgroup(%[[LHS:.*]] : memref<64x36xf32, #gpu.address_space<workgroup>>, %[[RHS:.*]] : memref<32x72xf32, #gpu.address_space<workgroup>>)
// CHECK:   memref.load %[[LIMIT]]
// CHECK:   %[[EXTENT:.*]] = arith.minui
// CHECK:   scf.for %[[FIRST:.*]] = %c0 to %[[EXTENT]] step %c32 iter_args({{.*}}) -> (vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>, vector<2x2xf32>)
// CHECK:     gpu.barrier
// CHECK:     scf.for
// CHECK:       arith.cmpi ule
// CHECK:       memref.load %[[X]]
// CHECK:       llvm.call_intrinsic "llvm.nvvm.f2tf32.rna"
// CHECK:       arith.select
// CHECK:       memref.store %{{.*}}, %[[LHS]]
// CHECK:     scf.for
// CHECK:       memref.load %[[W]][%c0,
// CHECK:       llvm.call_intrinsic "llvm.nvvm.f2tf32.rna"
// CHECK:       arith.select
// CHECK:       memref.store %{{.*}}, %[[RHS]]
// CHECK:     gpu.barrier
// CHECK-COUNT-4: memref.load %[[LHS]]
// CHECK-COUNT-8: memref.load %[[RHS]]
// CHECK-COUNT-8: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 8], tf32Enabled} : (vector<4x1xf32>, vector<2x1xf32>, vector<2x2xf32>) -> vector<2x2xf32>
// CHECK:     scf.yield
// CHECK:   scf.if
// CHECK:     vector.extract
// CHECK:     memref.load %[[OUT]]
// CHECK:     arith.addf
// CHECK:     memref.store %{{.*}}, %[[OUT]]
// CHECK:   gpu.terminator
// CHECK-NOT: attn.matmul
func.func @project_mma(%x: memref<?x4x?x24xbf16>, %w: memref<1x2x24x72xbf16>,
                       %out: memref<?x4x?x72xf32>, %limit: memref<?xi32>) {
  attn.matmul %x, %w into %out limit %limit {causal, accumulate}
      : memref<?x4x?x24xbf16>, memref<1x2x24x72xbf16>, memref<?x4x?x72xf32>, memref<?xi32>
  return
}

// mha's sinusoid added to lhs as it is staged (its frequencies in a stack table of the
// contraction's 16 pairs), rhs's 2 heads serving out's 6 (h / 3), and out written without
// reading it (no accumulate), rounded to f16.
// CHECK-LABEL: func.func @project_mma_sinusoid
// CHECK-SAME: (%[[X:.*]]: memref<?x1x?x32xf32>, %[[W:.*]]: memref<1x2x32x16xbf16>, %[[OUT:.*]]: memref<?x6x?x16xf16>, %[[OFFSET:.*]]: index)
// CHECK: gpu.launch
// CHECK:   %[[HEAD:.*]] = arith.remui %{{.*}}, %c6
// CHECK:   %[[RHSHEAD:.*]] = arith.divui %[[HEAD]], %c3
// CHECK:   memref.alloca() : memref<16xf64>
// CHECK:       memref.load %[[X]]
// CHECK:       arith.addi %{{.*}}, %[[OFFSET]]
// CHECK:       arith.addf
// CHECK:       llvm.call_intrinsic "llvm.nvvm.f2tf32.rna"
// CHECK:       memref.load %[[W]][%c0, %[[RHSHEAD]],
// CHECK:     nvgpu.mma.sync
// CHECK:   scf.if
// CHECK-NOT: memref.load %[[OUT]]
// CHECK:     arith.truncf %{{.*}} : f32 to f16
// CHECK:     memref.store %{{.*}}, %[[OUT]]
func.func @project_mma_sinusoid(%x: memref<?x1x?x32xf32>, %w: memref<1x2x32x16xbf16>,
                                %out: memref<?x6x?x16xf16>, %offset: index) {
  attn.matmul %x, %w into %out sinusoid %offset
      : memref<?x1x?x32xf32>, memref<1x2x32x16xbf16>, memref<?x6x?x16xf16>
  return
}

// The backward's weight gradient, X^T dY summed over (b, t) (lhs_transposed, batch_sum): a
// block per tile of out's 24 x 40 (its batch 1), whose stages run inside a loop over the
// factors' batch entries, in order, before its one write.
// CHECK-LABEL: func.func @weight_gradient_mma
// CHECK-SAME: (%[[X:.*]]: memref<?x1x?x24xf32>, %[[DY:.*]]: memref<?x1x?x40xf32>, %[[OUT:.*]]: memref<1x1x24x40xf32>)
// CHECK: gpu.launch
// CHECK:   %[[B:.*]] = memref.dim %[[X]], %c0
// CHECK:   scf.for %[[ENTRY:.*]] = %c0 to %[[B]] step %c1 iter_args
// CHECK:     scf.for %{{.*}} = %c0 to %{{.*}} step %c32 iter_args
// CHECK:       memref.load %[[X]][%[[ENTRY]], %c0,
// CHECK:       memref.load %[[DY]][%[[ENTRY]], %c0,
// CHECK:       nvgpu.mma.sync
// CHECK:   scf.if
// CHECK:     memref.store %{{.*}}, %[[OUT]]
func.func @weight_gradient_mma(%x: memref<?x1x?x24xf32>, %dy: memref<?x1x?x40xf32>,
                               %out: memref<1x1x24x40xf32>) {
  attn.matmul %x, %dy into %out {lhs_transposed, batch_sum}
      : memref<?x1x?x24xf32>, memref<?x1x?x40xf32>, memref<1x1x24x40xf32>
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_matmuls %f rows = 1 vector_width = 1 columns = 8 tensor_cores = 1
        : !transform.any_op
    transform.yield
  }
}
