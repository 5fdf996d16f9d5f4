// RUN: attn-opt %s -attn-lower-to-llvm | FileCheck %s
// The llvm stage: task functions, then everything in the LLVM dialect, with the C interface
// wrappers the bundle's kernel entry calls.

// CHECK-NOT: scf.
// CHECK-NOT: vector.
// CHECK-NOT: memref.
// CHECK: llvm.func @kernel_tasks
// CHECK: llvm.func @_mlir_ciface_kernel_tasks
// CHECK: llvm.func @kernel_run
// CHECK: llvm.intr.fmuladd({{.*}}) : (vector<16xf32>, vector<16xf32>, vector<16xf32>) -> vector<16xf32>
// CHECK: llvm.func @_mlir_ciface_kernel_run
func.func @kernel(%x: memref<?x16xf32>, %y: memref<?x16xbf16>) attributes {attn.kernel} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?x16xf32>
  scf.forall (%t) in (%n) {
    %a = vector.load %x[%t, %c0] : memref<?x16xf32>, vector<16xf32>
    %e = math.exp %a : vector<16xf32>
    %f = vector.fma %a, %e, %a : vector<16xf32>
    vector.store %f, %x[%t, %c0] : memref<?x16xf32>, vector<16xf32>
    %s = vector.extract %f[0] : f32 from vector<16xf32>
    %b = arith.truncf %s : f32 to bf16
    memref.store %b, %y[%t, %c0] : memref<?x16xbf16>
  }
  return
}
