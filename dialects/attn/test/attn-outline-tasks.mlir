// RUN: attn-opt %s -attn-outline-tasks | FileCheck %s
// The kernel's task loops (its phases) become a phase count, a workspace size, a task count
// and a task-range function with C interfaces; static stack buffers move to the entry of the
// phase in the range function, or to the heap past a budget.

// CHECK-NOT: func.func @kernel(
// CHECK-LABEL: func.func @kernel_phases() -> index attributes {llvm.emit_c_interface}
// CHECK: return %c1
// CHECK-LABEL: func.func @kernel_workspace(%{{.*}}: memref<?x8xf32>) -> index
// CHECK: return %c0
// CHECK: func.func @kernel_tasks(%[[PHASE:.*]]: index, %{{.*}}: memref<?x8xf32>) -> index attributes {llvm.emit_c_interface}
// CHECK: %[[N:.*]] = memref.dim
// CHECK: %[[T:.*]] = arith.muli %[[N]], %c2
// CHECK: %[[COUNT:.*]] = scf.index_switch %[[PHASE]] -> index
// CHECK: case 0 {
// CHECK:   scf.yield %[[T]]
// CHECK: default {
// CHECK:   scf.yield %c0
// CHECK: return %[[COUNT]]
// CHECK: func.func @kernel_run(%[[P:.*]]: index, %[[FIRST:.*]]: index, %[[LAST:.*]]: index, %[[X:.*]]: memref<?x8xf32>, %{{.*}}: memref<?xi8>) attributes {llvm.emit_c_interface}
// CHECK: scf.index_switch %[[P]]
// CHECK: case 0 {
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<8xf32>
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

// Two phases sharing workspace buffers: each buffer at a 64-byte aligned offset of the
// workspace (4 n x 8 bytes, rounded up, then 2 n x 3), a view of it in the range function, each
// phase one case of the switch on the phase.
// CHECK-LABEL: func.func @phases_phases() -> index
// CHECK: return %c2
// CHECK-LABEL: func.func @phases_workspace(
// CHECK: %[[N:.*]] = memref.dim
// CHECK: arith.muli %c4{{.*}}, %[[N]]
// CHECK: arith.muli %{{.*}}, %c8
// CHECK: arith.ceildivui %{{.*}}, %c64
// CHECK: arith.muli %c2{{.*}}, %[[N]]
// CHECK: arith.muli %{{.*}}, %c3
// CHECK: arith.ceildivui %{{.*}}, %c64
// CHECK: %[[TOTAL:.*]] = arith.addi
// CHECK: return %[[TOTAL]]
// CHECK-LABEL: func.func @phases_tasks(
// CHECK: case 0 {
// CHECK: case 1 {
// CHECK: func.func @phases_run(%[[P:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[X:.*]]: memref<?x8xf32>, %[[WS:.*]]: memref<?xi8>)
// CHECK: %[[VA:.*]] = memref.view %[[WS]][%c0{{.*}}][%[[N:.*]]] : memref<?xi8> to memref<?x8xf32>
// CHECK: %[[VB:.*]] = memref.view %[[WS]][%{{.*}}][%[[N]]] : memref<?xi8> to memref<?x3xf16>
// CHECK: scf.index_switch %[[P]]
// CHECK: case 0 {
// CHECK:   memref.store %{{.*}}, %[[VA]]
// CHECK: case 1 {
// CHECK:   memref.load %[[VA]]
// CHECK:   memref.store %{{.*}}, %[[VB]]
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @phases(%x: memref<?x8xf32>) attributes {attn.kernel} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?x8xf32>
  %a = memref.alloc(%n) : memref<?x8xf32>
  %b = memref.alloc(%n) : memref<?x3xf16>
  scf.forall (%t) in (%n) {
    %e = memref.load %x[%t, %c0] : memref<?x8xf32>
    memref.store %e, %a[%t, %c0] : memref<?x8xf32>
  }
  scf.forall (%t) in (%n) {
    %e = memref.load %a[%t, %c0] : memref<?x8xf32>
    %h = arith.truncf %e : f32 to f16
    memref.store %h, %b[%t, %c0] : memref<?x3xf16>
  }
  memref.dealloc %a : memref<?x8xf32>
  memref.dealloc %b : memref<?x3xf16>
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

// A view of a workspace buffer beside the phases (a variant's operand seen heads first) is formed
// in the range function only, from the buffer's view of the workspace; a phase's trip count
// that reads the view's extent reads the buffer's size instead, so the task-count function
// needs no workspace.
// CHECK-LABEL: func.func @views_tasks(
// CHECK-NOT: memref.expand_shape
// CHECK: %[[N:.*]] = memref.dim
// CHECK: scf.yield %[[N]]
// CHECK-LABEL: func.func @views_run(
// CHECK: %[[BUFFER:.*]] = memref.view
// CHECK: %[[VIEW:.*]] = memref.expand_shape %[[BUFFER]]
// CHECK: scf.index_switch
// CHECK: memref.store %{{.*}}, %[[VIEW]]
func.func @views(%x: memref<?x8xf32>) attributes {attn.kernel} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?x8xf32>
  %buffer = memref.alloc(%n) : memref<?x8xf32>
  %view = memref.expand_shape %buffer [[0, 1], [2]] output_shape [1, %n, 8]
      : memref<?x8xf32> into memref<1x?x8xf32>
  %rows = memref.dim %view, %c1 : memref<1x?x8xf32>
  scf.forall (%t) in (%rows) {
    %e = memref.load %x[%t, %c0] : memref<?x8xf32>
    memref.store %e, %view[%c0, %t, %c0] : memref<1x?x8xf32>
  }
  memref.dealloc %buffer : memref<?x8xf32>
  return
}
