// RUN: attn-opt %s -attn-map-tasks-to-gpu=block-threads=64 | FileCheck %s
// Each task loop becomes a launch of ceil(tasks / 64) blocks of 64 threads; thread t of block
// b runs task b * 64 + t when it exists.

// CHECK: module attributes {gpu.container_module}
// CHECK-LABEL: func.func @kernel
// CHECK-SAME: attributes {attn.kernel, llvm.emit_c_interface}
// CHECK: %[[TASKS:.*]] = arith.muli
// CHECK: %[[BLOCKS:.*]] = arith.ceildivui %[[TASKS]], %[[C64:.*]] : index
// CHECK: gpu.launch blocks(%[[B:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[BLOCKS]], %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C64]]
// CHECK:   %[[BASE:.*]] = arith.muli %[[B]], %[[C64]]
// CHECK:   %[[TASK:.*]] = arith.addi %[[BASE]], %[[T]]
// CHECK:   %[[LIVE:.*]] = arith.cmpi ult, %[[TASK]], %[[TASKS]]
// CHECK:   scf.if %[[LIVE]]
// CHECK:     memref.load %{{.*}}[%[[TASK]], %c0]
// CHECK:   gpu.terminator
// CHECK-NOT: scf.forall
func.func @kernel(%x: memref<?x8xf32>) attributes {attn.kernel} {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %n = memref.dim %x, %c0 : memref<?x8xf32>
  %tasks = arith.muli %n, %c2 : index
  scf.forall (%t) in (%tasks) {
    %e = memref.load %x[%t, %c0] : memref<?x8xf32>
    %d = arith.addf %e, %e : f32
    memref.store %d, %x[%t, %c0] : memref<?x8xf32>
  }
  return
}

// Phases launch in order; their workspace moves to device memory, allocated and freed on the
// launches' stream (an async chain from gpu.wait to gpu.wait).
// CHECK-LABEL: func.func @phases
// CHECK: %[[T0:.*]] = gpu.wait async
// CHECK: %[[A:.*]], %[[T1:.*]] = gpu.alloc async [%[[T0]]] (%{{.*}}) : memref<?x8xf32>
// CHECK: gpu.launch
// CHECK:   memref.store %{{.*}}, %[[A]]
// CHECK: gpu.launch
// CHECK:   memref.load %[[A]]
// CHECK: %[[T2:.*]] = gpu.dealloc async [%[[T1]]] %[[A]]
// CHECK: gpu.wait [%[[T2]]]
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.dealloc
func.func @phases(%x: memref<?x8xf32>) attributes {attn.kernel} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?x8xf32>
  %a = memref.alloc(%n) : memref<?x8xf32>
  scf.forall (%t) in (%n) {
    %e = memref.load %x[%t, %c0] : memref<?x8xf32>
    memref.store %e, %a[%t, %c0] : memref<?x8xf32>
  }
  scf.forall (%t) in (%n) {
    %e = memref.load %a[%t, %c0] : memref<?x8xf32>
    memref.store %e, %x[%t, %c0] : memref<?x8xf32>
  }
  memref.dealloc %a : memref<?x8xf32>
  return
}
