// RUN: attn-opt %s -transform-interpreter -canonicalize | FileCheck %s
// transform.attn.lower_to_vectors with dot = 1: an update whose K and V are bf16 (d_k 32, d_v
// 16; 32 rows = 2 vectors; 64-key blocks) takes QK^T and PV as vdpbf16ps dot products, from the
// operands the AMX path lays out (a phase before the attention's) and pairs (Q^T, P^T), the
// query unscaled and S scaled in f32.

// CHECK-LABEL: func.func @lower
// CHECK-DAG: %[[UNSCALE:.*]] = arith.constant dense<8.000000e+00> : vector<16xf32>
// CHECK-DAG: %[[SCALE:.*]] = arith.constant dense<1.250000e-01> : vector<16xf32>
// CHECK: %[[KEYS:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x2x?x32xbf16>
// CHECK: %[[VALUES:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x2x?x16x32xbf16>
// CHECK: scf.forall
// The attention's tasks: Q^T's pairs (q times 1 / 0.125), S by pairs of head dims (K's pair
// broadcast), S times 0.125, P^T's pairs, acc by pairs of keys (V^T's pair broadcast), an odd
// last key alone.
// CHECK: scf.forall
// CHECK-DAG: %[[QPAIRS:.*]] = memref.alloca() : memref<16x64xbf16>
// CHECK-DAG: %[[PPAIRS:.*]] = memref.alloca() : memref<32x64xbf16>
// CHECK: arith.mulf %{{.*}}, %[[UNSCALE]] : vector<16xf32>
// CHECK: llvm.call_intrinsic "llvm.x86.avx512bf16.cvtne2ps2bf16.512"
// CHECK: vector.store %{{.*}}, %[[QPAIRS]]
// CHECK: vector.load %[[QPAIRS]]{{.*}} : memref<16x64xbf16>, vector<32xbf16>
// CHECK: vector.load %[[KEYS]]{{.*}} : memref<?x2x?x32xbf16>, vector<2xbf16>
// CHECK: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// CHECK: %[[S:.*]] = vector.load %{{.*}} : memref<64x32xf32>, vector<16xf32>
// CHECK: arith.mulf %[[S]], %[[SCALE]] : vector<16xf32>
// CHECK: vector.store %{{.*}}, %[[PPAIRS]]
// CHECK: vector.load %[[PPAIRS]]
// CHECK: vector.load %[[VALUES]]{{.*}} : memref<?x2x?x16x32xbf16>, vector<2xbf16>
// CHECK: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// CHECK: scf.if
// CHECK: memref.load %[[VALUES]]
// CHECK: arith.extui
// CHECK: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// CHECK-NOT: amx.
// CHECK-NOT: attn.online
// CHECK: memref.dealloc %[[KEYS]]
// CHECK: memref.dealloc %[[VALUES]]
func.func @lower(%q: memref<?x4x?x32xbf16>, %k: memref<?x2x?x32xbf16>, %v: memref<?x2x?x16xbf16>,
                 %o: memref<?x4x?x16xbf16>, %tasks: index, %tq: index, %tk: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  scf.forall (%t) in (%tasks) {
    %packed = memref.alloca() : memref<32x32xf32>
    %row = arith.muli %t, %c32 : index
    %n = arith.minsi %c32, %tq : index
    %acc = memref.alloca() : memref<1x1x16x32xf32>
    %max = memref.alloca() : memref<1x1x32xf32>
    %sum = memref.alloca() : memref<1x1x32xf32>
    attn.online_init %acc, %max, %sum : memref<1x1x16x32xf32>, memref<1x1x32xf32>, memref<1x1x32xf32>
    attn.pack_query %q[%c0, %c0, %row] rows %n into %packed {scale = 0.125 : f64}
        : memref<?x4x?x32xbf16>, memref<32x32xf32>
    scf.for %j = %c0 to %tk step %c64 {
      %nj = arith.minsi %c64, %tk : index
      attn.online_update %packed, %k, %v into %acc, %max, %sum at [%c0, %c0, %row, %j]
          sizes [%c1, %c1, %n, %nj] seq_q %tq
          {num_heads = 4 : i64, scale = 0.125 : f64, max_keys = 64 : i64}
          : memref<32x32xf32>, memref<?x2x?x32xbf16>, memref<?x2x?x16xbf16>,
            memref<1x1x16x32xf32>, memref<1x1x32xf32>, memref<1x1x32xf32>
    }
    attn.online_finalize %acc, %max, %sum into %o at [%c0, %c0, %row] sizes [%c1, %c1, %n]
        : memref<1x1x16x32xf32>, memref<1x1x32xf32>, memref<1x1x32xf32>, memref<?x4x?x16xbf16>
  }
  return
}


module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_to_vectors %f vector_width = 16 key_unroll = 2 value_split = 4 dot = 1
        : !transform.any_op
    transform.yield
  }
}
