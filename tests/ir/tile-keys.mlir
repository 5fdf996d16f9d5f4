// RUN: attn-opt %s -transform-interpreter -cse | FileCheck %s
// transform.attn.tile_keys: blocks of 64 keys over the range the masks keep for the tile's
// rows [i, i + n): causal ends at the last row's position + 1, the window (left 8, right 2)
// starts 8 before the first row's position and ends 3 after the last's, padding at len[b]; an
// empty range starts where it ends, inside the domain.

// CHECK-LABEL: func.func @keys
// CHECK-SAME: %[[K:[^:]*]]: memref<?x2x?x32xf32>, %{{[^:]*}}: memref<?x2x?x32xf32>, %[[LEN:[^:]*]]: memref<?xi32>, %[[B:[^:]*]]: index, %[[H:[^:]*]]: index, %[[I:[^:]*]]: index, %[[N:[^:]*]]: index, %[[TQ:[^:]*]]: index
// CHECK: %[[TK:.*]] = memref.dim %[[K]], %c2
// CHECK: %[[OFF:.*]] = arith.subi %[[TK]], %[[TQ]]
// CHECK: %[[FIRST:.*]] = arith.addi %[[I]], %[[OFF]]
// CHECK: %[[END:.*]] = arith.addi %[[FIRST]], %[[N]]
// CHECK: %[[LAST:.*]] = arith.subi %[[END]], %c1
// CHECK: %[[CAUSAL:.*]] = arith.addi %[[LAST]], %c1
// CHECK: %[[HI1:.*]] = arith.minsi %{{.*}}, %[[CAUSAL]]
// CHECK: %[[WLO:.*]] = arith.subi %[[FIRST]], %c8
// CHECK: %[[LO:.*]] = arith.maxsi %c0, %[[WLO]]
// CHECK: %[[WHI:.*]] = arith.addi %[[LAST]], %c3
// CHECK: %[[HI2:.*]] = arith.minsi %[[HI1]], %[[WHI]]
// CHECK: %[[LENB:.*]] = memref.load %[[LEN]][%[[B]]]
// CHECK: %[[LENI:.*]] = arith.index_cast %[[LENB]]
// CHECK: %[[HI3:.*]] = arith.minsi %[[HI2]], %[[LENI]]
// CHECK: %[[HI:.*]] = arith.maxsi %[[HI3]], %c0
// CHECK: %[[FROM:.*]] = arith.minsi %[[LO]], %[[HI]]
// CHECK: scf.for %[[J:.*]] = %[[FROM]] to %[[HI]] step %c64
// CHECK:   %[[REST:.*]] = arith.subi %[[HI]], %[[J]]
// CHECK:   %[[NJ:.*]] = arith.minsi %c64{{.*}}, %[[REST]]
// CHECK:   attn.online_update {{.*}} at[%[[B]], %[[H]], %[[I]], %[[J]]] sizes[%c1, %c1, %[[N]], %[[NJ]]]
// CHECK-SAME: max_keys = 64
func.func @keys(%q: memref<32x16xf32>, %k: memref<?x2x?x32xf32>, %v: memref<?x2x?x32xf32>,
                %len: memref<?xi32>, %b: index, %h: index, %i: index, %n: index, %tq: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %tk = memref.dim %k, %c2 : memref<?x2x?x32xf32>
  %acc = memref.alloca() : memref<1x1x32x16xf32>
  %max = memref.alloca() : memref<1x1x16xf32>
  %sum = memref.alloca() : memref<1x1x16xf32>
  attn.online_update %q, %k, %v lengths(%len : memref<?xi32>) into %acc, %max, %sum
      at [%b, %h, %i, %c0] sizes [%c1, %c1, %n, %tk] seq_q %tq
      {num_heads = 4 : i64, scale = 0.125 : f64, masks = ["causal", "window", "padding"],
       window_left = 8, window_right = 2}
      : memref<32x16xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>,
        memref<1x1x32x16xf32>, memref<1x1x16xf32>, memref<1x1x16xf32>
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %update = transform.structured.match ops{["attn.online_update"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %loop, %tiled = transform.attn.tile_keys %update block = 64
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
