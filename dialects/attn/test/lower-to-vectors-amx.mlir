// RUN: attn-opt %s -transform-interpreter -canonicalize | FileCheck %s
// transform.attn.lower_to_vectors with amx = 1: an update whose K and V are bf16 (d_k 32, d_v
// 16; 32 rows = 2 tiles; 64-key blocks) takes QK^T and PV on AMX tiles. K and V^T are laid out
// first in a phase of their own, into workspace buffers padded to whole 64-key blocks, V^T with
// a zero chunk after its last.

// CHECK-LABEL: func.func @lower
// CHECK: %[[KEYS:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x2x?x32xbf16>
// CHECK: %[[ZERO_CHUNK:.*]] = arith.divui %{{.*}}, %c32 : index
// CHECK: %[[VALUES:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x2x?x16x32xbf16>
// The layout phase: the zero chunk (by the last block's task), then 16 keys at a time where rows
// are contiguous, else element by element (zero past Tk).
// CHECK: scf.forall
// CHECK: vector.store %{{.*}}, %[[VALUES]][%{{.*}}, %{{.*}}, %[[ZERO_CHUNK]], %{{.*}}, %c0]
// CHECK: scf.for
// CHECK: memref.store %{{.*}}, %[[KEYS]]
// CHECK: memref.store %{{.*}}, %[[VALUES]]
// The attention's tasks: Q^T's pairs of rows, zero tiles, S^T tiles of 2 x 16 keys by 2 x 16
// rows a step, P^T's pairs, O^T tiles (V^T in chunks of 32 keys).
// CHECK: scf.forall
// CHECK-DAG: %[[S:.*]] = memref.alloca() : memref<64x32xf32>
// CHECK-DAG: %[[ZEROS:.*]] = memref.alloca() : memref<64x16xf32>
// CHECK-DAG: %[[QPAIRS:.*]] = memref.alloca() : memref<16x64xbf16>
// CHECK-DAG: %[[PPAIRS:.*]] = memref.alloca() : memref<32x64xbf16>
// CHECK: llvm.call_intrinsic "llvm.x86.avx512bf16.cvtne2ps2bf16.512"
// CHECK: vector.store %{{.*}}, %[[QPAIRS]]
// CHECK-COUNT-4: amx.tile_load %[[ZEROS]]
// CHECK: amx.tile_load %[[KEYS]]
// CHECK: amx.tile_load %[[QPAIRS]]
// CHECK: amx.tile_mulf
// CHECK: amx.tile_store %[[S]]
// CHECK: arith.shli
// CHECK: llvm.call_intrinsic "llvm.x86.avx512bf16.cvtne2ps2bf16.512"
// CHECK: vector.store %{{.*}}, %[[PPAIRS]]
// A chunk of 32 keys not all attended reads the zero chunk.
// CHECK: arith.select %{{.*}}, %{{.*}}, %[[ZERO_CHUNK]] : index
// CHECK: amx.tile_load %{{.*}} : memref<1x1x16x32xf32> into vector<16x16xf32>
// CHECK: amx.tile_load %[[VALUES]][%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0] : memref<?x2x?x16x32xbf16>
// CHECK: amx.tile_load %[[PPAIRS]]
// CHECK: amx.tile_mulf
// CHECK: amx.tile_store
// The attended keys of the chunks left out, as dot products.
// CHECK: scf.if
// CHECK: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
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

// f32 K and V: the vector products, no layout phase.
// CHECK-LABEL: func.func @vectors
// CHECK-NOT: memref.alloc(
// CHECK-NOT: amx.
// CHECK: vector.fma
// CHECK-NOT: amx.
// CHECK: return
func.func @vectors(%q: memref<?x4x?x32xf32>, %k: memref<?x2x?x32xf32>, %v: memref<?x2x?x16xf32>,
                   %o: memref<?x4x?x16xf32>, %tasks: index, %tq: index, %tk: index) {
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
        : memref<?x4x?x32xf32>, memref<32x32xf32>
    scf.for %j = %c0 to %tk step %c64 {
      %nj = arith.minsi %c64, %tk : index
      attn.online_update %packed, %k, %v into %acc, %max, %sum at [%c0, %c0, %row, %j]
          sizes [%c1, %c1, %n, %nj] seq_q %tq
          {num_heads = 4 : i64, scale = 0.125 : f64, max_keys = 64 : i64}
          : memref<32x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x16xf32>,
            memref<1x1x16x32xf32>, memref<1x1x32xf32>, memref<1x1x32xf32>
    }
    attn.online_finalize %acc, %max, %sum into %o at [%c0, %c0, %row] sizes [%c1, %c1, %n]
        : memref<1x1x16x32xf32>, memref<1x1x32xf32>, memref<1x1x32xf32>, memref<?x4x?x16xf32>
  }
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_to_vectors %f vector_width = 16 key_unroll = 2 value_split = 4 amx = 1
        : !transform.any_op
    transform.yield
  }
}
