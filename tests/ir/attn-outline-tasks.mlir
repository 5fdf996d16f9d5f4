// RUN: attn-opt %s -attn-outline-tasks | FileCheck %s
// The kernel's task loop becomes a task count and a task-range function with C interfaces;
// static stack buffers move to the entry of the range function, or to the heap past a budget.

// CHECK-NOT: func.func @kernel(
// CHECK-LABEL: func.func @kernel_tasks(%{{.*}}: memref<?x8xf32>) -> index attributes {llvm.emit_c_interface}
// CHECK: %[[N:.*]] = memref.dim
// CHECK: %[[T:.*]] = arith.muli %[[N]], %c2
// CHECK: return %[[T]]
// CHECK: func.func @kernel_run(%[[FIRST:.*]]: index, %[[LAST:.*]]: index, %[[X:.*]]: memref<?x8xf32>) attributes {llvm.emit_c_interface}
// CHECK: memref.alloca() : memref<8xf32>
// CHECK: scf.for %[[I:.*]] = %[[FIRST]] to %[[LAST]] step %c1
// CHECK-NOT: memref.alloca
// CHECK: memref.load %[[X]][%[[I]], %c0]
func.func @kernel(%x: memref<?x8xf32>) attributes {attn.kernel} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %x, %c0 : memref<?x8xf32>
  %tasks = arith.muli %n, %c2 : index
  scf.forall (%t) in (%tasks) {
    %buffer = memref.alloca() : memref<8xf32>
    %e = memref.load %x[%t, %c0] : memref<?x8xf32>
    memref.store %e, %buffer[%c0] : memref<8xf32>
  }
  return
}

// Buffers past the stack budget (stack-bytes, 128 KiB by default) go to the heap, once per run:
// 2 x 32 KiB f32 stay on the stack, 2 x 128 KiB do not.
// CHECK-LABEL: func.func @small_run(
// CHECK-COUNT-2: memref.alloca() {alignment = 64 : i64} : memref<8192xf32>
// CHECK-NOT: memref.alloc(
// CHECK-LABEL: func.func @large_run(
// CHECK: %[[A:.*]] = memref.alloc() {alignment = 64 : i64} : memref<32768xf32>
// CHECK: %[[B:.*]] = memref.alloc() {alignment = 64 : i64} : memref<32768xf32>
// CHECK: scf.for
// CHECK-NOT: memref.alloca
// CHECK: memref.store %{{.*}}, %[[A]]
// CHECK: memref.store %{{.*}}, %[[B]]
// CHECK: }
// CHECK-DAG: memref.dealloc %[[A]]
// CHECK-DAG: memref.dealloc %[[B]]
// CHECK: return
func.func @small(%x: memref<?x8xf32>) attributes {attn.kernel} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?x8xf32>
  scf.forall (%t) in (%n) {
    %a = memref.alloca() {alignment = 64 : i64} : memref<8192xf32>
    %b = memref.alloca() {alignment = 64 : i64} : memref<8192xf32>
    %e = memref.load %x[%t, %c0] : memref<?x8xf32>
    memref.store %e, %a[%c0] : memref<8192xf32>
    memref.store %e, %b[%c0] : memref<8192xf32>
  }
  return
}
func.func @large(%x: memref<?x8xf32>) attributes {attn.kernel} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?x8xf32>
  scf.forall (%t) in (%n) {
    %a = memref.alloca() {alignment = 64 : i64} : memref<32768xf32>
    %b = memref.alloca() {alignment = 64 : i64} : memref<32768xf32>
    %e = memref.load %x[%t, %c0] : memref<?x8xf32>
    memref.store %e, %a[%c0] : memref<32768xf32>
    memref.store %e, %b[%c0] : memref<32768xf32>
  }
  return
}
