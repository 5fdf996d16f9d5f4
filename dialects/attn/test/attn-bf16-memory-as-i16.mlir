// RUN: attn-opt %s -attn-bf16-memory-as-i16 | FileCheck %s
// Masked loads and stores of bf16 vectors move i16 lanes (x86 without AVX512-BF16 would
// promote bf16 lanes to f32 and truncate them back through __truncsfbf2), bitcasts around
// them; other element types stay as they are.

// CHECK-LABEL: llvm.func @masked
// CHECK-SAME: (%[[P:.*]]: !llvm.ptr, %[[M:.*]]: vector<8xi1>, %[[V:.*]]: vector<8xbf16>, %[[F:.*]]: vector<8xf32>)
// CHECK: %[[ZERO:.*]] = llvm.bitcast %{{.*}} : vector<8xbf16> to vector<8xi16>
// CHECK: %[[BITS:.*]] = llvm.intr.masked.load %[[P]], %[[M]], %[[ZERO]] {alignment = 2 : i32} : (!llvm.ptr, vector<8xi1>, vector<8xi16>) -> vector<8xi16>
// CHECK: %[[L:.*]] = llvm.bitcast %[[BITS]] : vector<8xi16> to vector<8xbf16>
// CHECK: %[[STORED:.*]] = llvm.bitcast %[[V]] : vector<8xbf16> to vector<8xi16>
// CHECK: llvm.intr.masked.store %[[STORED]], %[[P]], %[[M]] {alignment = 2 : i32} : vector<8xi16>, vector<8xi1> into !llvm.ptr
// CHECK: llvm.intr.masked.load %[[P]], %[[M]] {alignment = 4 : i32} : (!llvm.ptr, vector<8xi1>) -> vector<8xf32>
// CHECK: llvm.intr.masked.store %[[F]], %[[P]], %[[M]] {alignment = 4 : i32} : vector<8xf32>, vector<8xi1> into !llvm.ptr
// CHECK: llvm.return %[[L]]
llvm.func @masked(%p: !llvm.ptr, %m: vector<8xi1>, %v: vector<8xbf16>, %f: vector<8xf32>)
    -> vector<8xbf16> {
  %zero = llvm.mlir.constant(dense<0.0> : vector<8xbf16>) : vector<8xbf16>
  %l = llvm.intr.masked.load %p, %m, %zero {alignment = 2 : i32}
      : (!llvm.ptr, vector<8xi1>, vector<8xbf16>) -> vector<8xbf16>
  llvm.intr.masked.store %v, %p, %m {alignment = 2 : i32} : vector<8xbf16>, vector<8xi1> into !llvm.ptr
  %g = llvm.intr.masked.load %p, %m {alignment = 4 : i32} : (!llvm.ptr, vector<8xi1>) -> vector<8xf32>
  llvm.intr.masked.store %f, %p, %m {alignment = 4 : i32} : vector<8xf32>, vector<8xi1> into !llvm.ptr
  llvm.return %l : vector<8xbf16>
}
