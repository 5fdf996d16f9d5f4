// RUN: attn-opt %s -transform-interpreter -cse | FileCheck %s
// transform.attn.tile_keys: blocks of 64 keys over the range the mask_mod region keeps for the
// tile's rows [i, i + n), read off its conjuncts that compare kv_idx with a row position plus
// constants or with a value the same at every score: causal (kv_idx <= qpos) ends at the last
// row's position + 1, the window (qpos - 8 <= kv_idx <= qpos + 2) starts 8 before the first
// row's position and ends 3 after the last's, padding (kv_idx < len[b]) at len[b], and
// qpos - kv_idx < 11 starts 10 before the first row's position; kv_idx's parity bounds nothing.
// An empty range starts where it ends, inside the domain. The blocks start at the multiple of 64
// past the domain's first key at or below the range's start (blocks at any other offset ran the
// window of docs/benchmarks.md up to 1.2x slower).

// CHECK-LABEL: func.func @keys
// CHECK-SAME: %[[K:[^:]*]]: memref<?x2x?x32xf32>, %{{[^:]*}}: memref<?x2x?x32xf32>, %[[LEN:[^:]*]]: memref<?xi32>, %[[B:[^:]*]]: index, %[[H:[^:]*]]: index, %[[I:[^:]*]]: index, %[[N:[^:]*]]: index, %[[TQ:[^:]*]]: index
// CHECK: %[[TK:.*]] = memref.dim %[[K]], %c2
// CHECK: %[[END0:.*]] = arith.addi %c0, %[[TK]]
// CHECK: %[[OFF:.*]] = arith.subi %[[TK]], %[[TQ]]
// CHECK: %[[FIRST:.*]] = arith.addi %[[I]], %[[OFF]]
// CHECK: %[[END:.*]] = arith.addi %[[FIRST]], %[[N]]
// CHECK: %[[LAST:.*]] = arith.subi %[[END]], %c1
// CHECK: %[[CAUSAL:.*]] = arith.addi %[[LAST]], %c1
// CHECK: %[[HI1:.*]] = arith.minsi %[[END0]], %[[CAUSAL]]
// CHECK: %[[WLO:.*]] = arith.addi %c-8, %[[FIRST]]
// CHECK: %[[LO1:.*]] = arith.maxsi %c0, %[[WLO]]
// CHECK: %[[WR:.*]] = arith.addi %c2, %[[LAST]]
// CHECK: %[[WHI:.*]] = arith.addi %[[WR]], %c1
// CHECK: %[[HI2:.*]] = arith.minsi %[[HI1]], %[[WHI]]
// CHECK: %[[LENB:.*]] = memref.load %[[LEN]][%{{.*}}]
// CHECK: %[[LENI:.*]] = arith.index_cast %[[LENB]]
// CHECK: %[[HI3:.*]] = arith.minsi %[[HI2]], %[[LENI]]
// CHECK: %[[SPAN:.*]] = arith.addi %c-11, %[[FIRST]]
// CHECK: %[[SLO:.*]] = arith.addi %[[SPAN]], %c1
// CHECK: %[[LO:.*]] = arith.maxsi %[[LO1]], %[[SLO]]
// CHECK: %[[HI:.*]] = arith.maxsi %[[HI3]], %c0
// CHECK: %[[FROM:.*]] = arith.minsi %[[LO]], %[[HI]]
// CHECK: %[[INTO:.*]] = arith.subi %[[FROM]], %c0
// CHECK: %[[REM:.*]] = arith.remui %[[INTO]], %c64
// CHECK: %[[START:.*]] = arith.subi %[[FROM]], %[[REM]]
// CHECK-NOT: arith.minsi
// CHECK: scf.for %[[J:.*]] = %[[START]] to %[[HI]] step %c64
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
  attn.online_update %q, %k, %v aux(%len : memref<?xi32>) into %acc, %max, %sum
      at [%b, %h, %i, %c0] sizes [%c1, %c1, %n, %tk] seq_q %tq
      {num_heads = 4 : i64, scale = 0.125 : f64}
      : memref<32x16xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>,
        memref<1x1x32x16xf32>, memref<1x1x16xf32>, memref<1x1x16xf32>
      mask_mod {
      ^bb0(%s: f32, %bb: i32, %hh: i32, %g: i32, %qi: i32, %j: i32, %p: i32, %tqi: i32, %tki: i32):
        %c2i = arith.constant 2 : i32
        %c8i = arith.constant 8 : i32
        %c11i = arith.constant 11 : i32
        %causal = arith.cmpi sle, %j, %p : i32
        %left = arith.subi %p, %c8i : i32
        %right = arith.addi %p, %c2i : i32
        %afterLeft = arith.cmpi sge, %j, %left : i32
        %beforeRight = arith.cmpi sle, %j, %right : i32
        %length = attn.aux_load 0 [%bb] : i32
        %padding = arith.cmpi slt, %j, %length : i32
        %distance = arith.subi %p, %j : i32
        %span = arith.cmpi slt, %distance, %c11i : i32
        %parity = arith.andi %j, %c2i : i32
        %even = arith.cmpi eq, %parity, %c2i : i32
        %window = arith.andi %afterLeft, %beforeRight : i1
        %both = arith.andi %causal, %window : i1
        %three = arith.andi %both, %padding : i1
        %four = arith.andi %three, %span : i1
        %keep = arith.andi %four, %even : i1
        gpu.yield %keep : i1
      }
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
