// RUN: attn-opt %s -transform-interpreter -cse | FileCheck %s
// transform.attn.gather_cache columns = 8 (the CUDA schedules'): the phase that fills the plain
// buffers has a task per run of 8 adjacent columns of one head at one position, the columns
// fastest, so that a GPU's neighbouring threads copy neighbouring bytes; a run loads all its
// elements before it stores them. Values narrower than keys (d_v 16, d_k 32): a task covers the
// keys' 4 runs of a head, and copies a value's only for the runs below column 16.

// CHECK-LABEL: func.func @gather_runs
// CHECK-SAME: (%[[Q:.*]]: memref<?x4x?x32xf16>, %[[K:.*]]: memref<?x2x16x32xf16>, %[[V:.*]]: memref<?x2x16x16xf16>, %[[TABLE:.*]]: memref<?x?xi32>, %[[LENS:.*]]: memref<?xi32>
// CHECK: %[[B:.*]] = memref.dim %[[TABLE]], %c0
// CHECK: %[[TK:.*]] = arith.muli %{{.*}}, %c16
// CHECK: %[[KB:.*]] = memref.alloc(%[[B]], %[[TK]]) : memref<?x2x?x32xf16>
// CHECK: %[[VB:.*]] = memref.alloc(%[[B]], %[[TK]]) : memref<?x2x?x16xf16>
// CHECK: %[[POSITIONS:.*]] = arith.muli %[[B]], %[[TK]]
// CHECK: %[[TASKS:.*]] = arith.muli %[[POSITIONS]], %c8
// CHECK: scf.forall (%[[TASK:.*]]) in (%[[TASKS]])
// CHECK:   %[[SPAN:.*]] = arith.remui %[[TASK]], %c4
// CHECK:   %[[C:.*]] = arith.muli %[[SPAN]], %c8
// CHECK:   %[[ROW:.*]] = arith.divui %[[TASK]], %c4
// CHECK:   %[[G:.*]] = arith.remui %[[ROW]], %c2
// CHECK:   %[[POS:.*]] = arith.divui %[[TASK]], %c8
// CHECK:   %[[J:.*]] = arith.remui %[[POS]], %[[TK]]
// CHECK:   %[[SEQ:.*]] = arith.divui %[[POS]], %[[TK]]
// CHECK:   memref.load %[[LENS]][%[[SEQ]]]
// CHECK:   scf.if
// CHECK:     memref.load %[[TABLE]]
// CHECK:     %[[C7:.*]] = arith.addi %[[C]], %c7
// CHECK:     %[[KEY0:.*]] = memref.load %[[K]][%{{.*}}, %[[G]], %{{.*}}, %[[C]]]
// CHECK-COUNT-6: memref.load %[[K]]
// CHECK:     %[[KEY7:.*]] = memref.load %[[K]][%{{.*}}, %[[G]], %{{.*}}, %[[C7]]]
// CHECK:     memref.store %[[KEY0]], %[[KB]][%[[SEQ]], %[[G]], %[[J]], %[[C]]]
// CHECK-COUNT-6: memref.store %{{.*}}, %[[KB]]
// CHECK:     memref.store %[[KEY7]], %[[KB]][%[[SEQ]], %[[G]], %[[J]], %[[C7]]]
// CHECK:     arith.cmpi ult, %[[C]], %c16
// CHECK:     scf.if
// CHECK-COUNT-8: memref.load %[[V]]
// CHECK-COUNT-8: memref.store {{.*}}, %[[VB]]
// CHECK:   } else {
// CHECK-COUNT-8: memref.store %{{.*}}, %[[KB]]
// CHECK:     arith.cmpi ult, %[[C]], %c16
// CHECK:     scf.if
// CHECK-COUNT-8: memref.store %{{.*}}, %[[VB]]
// CHECK: attn.online_update %[[Q]], %[[KB]], %[[VB]] into
// CHECK-NOT: pages
func.func @gather_runs(%q: memref<?x4x?x32xf16>, %k: memref<?x2x16x32xf16>,
                           %v: memref<?x2x16x16xf16>, %table: memref<?x?xi32>,
                           %lens: memref<?xi32>, %o: memref<?x4x?x16xf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %b = memref.dim %q, %c0 : memref<?x4x?x32xf16>
  %tq = memref.dim %q, %c2 : memref<?x4x?x32xf16>
  %pages = memref.dim %table, %c1 : memref<?x?xi32>
  %tk = arith.muli %pages, %c16 : index
  %acc = memref.alloc(%b, %tq) : memref<?x4x16x?xf32>
  %max = memref.alloc(%b, %tq) : memref<?x4x?xf32>
  %sum = memref.alloc(%b, %tq) : memref<?x4x?xf32>
  attn.online_init %acc, %max, %sum : memref<?x4x16x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>
  attn.online_update %q, %k, %v pages(%table, %lens : memref<?x?xi32>, memref<?xi32>)
      into %acc, %max, %sum at [%c0, %c0, %c0, %c0]
      sizes [%b, %c4, %tq, %tk] seq_q %tq {num_heads = 4 : i64, scale = 0.125 : f64}
      : memref<?x4x?x32xf16>, memref<?x2x16x32xf16>, memref<?x2x16x16xf16>,
        memref<?x4x16x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>
  attn.online_finalize %acc, %max, %sum into %o at [%c0, %c0, %c0] sizes [%b, %c4, %tq]
      : memref<?x4x16x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>, memref<?x4x?x16xf16>
  memref.dealloc %acc : memref<?x4x16x?xf32>
  memref.dealloc %max : memref<?x4x?xf32>
  memref.dealloc %sum : memref<?x4x?xf32>
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.gather_cache %f columns = 8 : !transform.any_op
    transform.yield
  }
}
