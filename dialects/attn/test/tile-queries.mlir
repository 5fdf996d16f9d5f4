// RUN: attn-opt %s -transform-interpreter -canonicalize | FileCheck %s
// transform.attn.tile_queries: one scf.forall iteration per (batch, head, tile of 32 rows),
// the state on the stack and init/finalize inside the loop.

// CHECK-LABEL: func.func @tile
// CHECK-NOT: memref.alloc(
// CHECK: %[[TILES:.*]] = arith.ceildivui %{{.*}}, %c32
// CHECK: scf.forall (%[[T:.*]]) in
// CHECK:   %[[TILE:.*]] = arith.remui %[[T]], %[[TILES]]
// CHECK:   %[[ACC:.*]] = memref.alloca() : memref<1x1x16x32xf32>
// CHECK:   attn.online_init %[[ACC]]
// CHECK:   attn.online_update {{.*}} into %[[ACC]], {{.*}} sizes[%c1, %c1, %{{.*}}, %{{.*}}]
// CHECK:   attn.online_finalize %[[ACC]]
// CHECK-NOT: memref.dealloc
func.func @tile(%q: memref<?x4x?x32xf32>, %k: memref<?x2x?x32xf32>, %v: memref<?x2x?x16xf32>,
                %o: memref<?x4x?x16xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %b = memref.dim %q, %c0 : memref<?x4x?x32xf32>
  %tq = memref.dim %q, %c2 : memref<?x4x?x32xf32>
  %tk = memref.dim %k, %c2 : memref<?x2x?x32xf32>
  %acc = memref.alloc(%b, %tq) : memref<?x4x16x?xf32>
  %max = memref.alloc(%b, %tq) : memref<?x4x?xf32>
  %sum = memref.alloc(%b, %tq) : memref<?x4x?xf32>
  attn.online_init %acc, %max, %sum : memref<?x4x16x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>
  attn.online_update %q, %k, %v into %acc, %max, %sum at [%c0, %c0, %c0, %c0]
      sizes [%b, %c4, %tq, %tk] seq_q %tq {num_heads = 4 : i64, scale = 0.125 : f64}
      : memref<?x4x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x16xf32>,
        memref<?x4x16x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>
  attn.online_finalize %acc, %max, %sum into %o at [%c0, %c0, %c0] sizes [%b, %c4, %tq]
      : memref<?x4x16x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>, memref<?x4x?x16xf32>
  memref.dealloc %acc : memref<?x4x16x?xf32>
  memref.dealloc %max : memref<?x4x?xf32>
  memref.dealloc %sum : memref<?x4x?xf32>
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %update = transform.structured.match ops{["attn.online_update"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %loop, %tiled = transform.attn.tile_queries %update rows = 32
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
