// RUN: attn-opt %s -transform-interpreter | FileCheck %s
// transform.attn.pack_query: the tile's queries are copied once, transposed and scaled, into
// a [d_k, rows] buffer on the task's stack, and the update reads that buffer.

// CHECK-LABEL: func.func @pack
// CHECK: scf.forall
// CHECK-NEXT: %[[PACKED:.*]] = memref.alloca() : memref<32x48xf32>
// CHECK: attn.pack_query %{{.*}}[%{{.*}}, %{{.*}}, %[[ROW:.*]]] rows %[[N:.*]] into %[[PACKED]] {scale = 1.250000e-01 : f64}
// CHECK: attn.online_update %[[PACKED]], {{.*}} : memref<32x48xf32>,
func.func @pack(%q: memref<?x4x?x32xf32>, %k: memref<?x2x?x32xf32>, %v: memref<?x2x?x32xf32>,
                %tasks: index, %tk: index, %tq: index) {
  %c1 = arith.constant 1 : index
  %c0 = arith.constant 0 : index
  %c48 = arith.constant 48 : index
  scf.forall (%t) in (%tasks) {
    %row = arith.muli %t, %c48 : index
    %acc = memref.alloca() : memref<1x1x32x48xf32>
    %max = memref.alloca() : memref<1x1x48xf32>
    %sum = memref.alloca() : memref<1x1x48xf32>
    attn.online_update %q, %k, %v into %acc, %max, %sum at [%c0, %c0, %row, %c0]
        sizes [%c1, %c1, %c48, %tk] seq_q %tq {num_heads = 4 : i64, scale = 0.125 : f64}
        : memref<?x4x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>,
          memref<1x1x32x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>
  }
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %update = transform.structured.match ops{["attn.online_update"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %pack, %packed = transform.attn.pack_query %update
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
