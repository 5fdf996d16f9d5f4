// RUN: attn-opt %s -transform-interpreter -cse | FileCheck %s
// transform.attn.gather_cache: an update reading a paged cache ([pages, H_kv, page_size, d] with
// a block table and the sequences' lengths) reads buffers [B, H_kv, Tk, d] instead, allocated
// with the workspace and filled by a phase of its own before the attention's: a task per 64
// positions of a sequence, each position read through the block table when it is inside the
// sequence, zero past its end.

// CHECK-LABEL: func.func @gather
// CHECK-SAME: (%[[Q:.*]]: memref<?x4x?x32xf32>, %[[K:.*]]: memref<?x2x16x32xf32>, %[[V:.*]]: memref<?x2x16x32xf32>, %[[TABLE:.*]]: memref<?x?xi32>, %[[LENS:.*]]: memref<?xi32>
// CHECK: %[[B:.*]] = memref.dim %[[TABLE]], %c0
// CHECK: %[[TK:.*]] = arith.muli %{{.*}}, %c16
// CHECK: %[[KB:.*]] = memref.alloc(%[[B]], %[[TK]]) : memref<?x2x?x32xf32>
// CHECK: %[[VB:.*]] = memref.alloc(%[[B]], %[[TK]]) : memref<?x2x?x32xf32>
// CHECK: memref.alloc
// CHECK: scf.forall
// CHECK:   memref.load %[[LENS]]
// CHECK:   scf.if
// CHECK:     memref.load %[[TABLE]]
// CHECK:     memref.load %[[K]]
// CHECK:     memref.store {{.*}}, %[[KB]]
// CHECK:     memref.load %[[V]]
// CHECK:     memref.store {{.*}}, %[[VB]]
// CHECK:   } else {
// CHECK:     memref.store %{{.*}}, %[[KB]]
// CHECK: attn.online_init
// CHECK: attn.online_update %[[Q]], %[[KB]], %[[VB]] into
// CHECK-NOT: pages
// CHECK: memref.dealloc %[[KB]]
// CHECK: memref.dealloc %[[VB]]
// CHECK-NEXT: return
func.func @gather(%q: memref<?x4x?x32xf32>, %k: memref<?x2x16x32xf32>, %v: memref<?x2x16x32xf32>,
                  %table: memref<?x?xi32>, %lens: memref<?xi32>, %o: memref<?x4x?x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %b = memref.dim %q, %c0 : memref<?x4x?x32xf32>
  %tq = memref.dim %q, %c2 : memref<?x4x?x32xf32>
  %pages = memref.dim %table, %c1 : memref<?x?xi32>
  %tk = arith.muli %pages, %c16 : index
  %acc = memref.alloc(%b, %tq) : memref<?x4x32x?xf32>
  %max = memref.alloc(%b, %tq) : memref<?x4x?xf32>
  %sum = memref.alloc(%b, %tq) : memref<?x4x?xf32>
  attn.online_init %acc, %max, %sum : memref<?x4x32x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>
  attn.online_update %q, %k, %v pages(%table, %lens : memref<?x?xi32>, memref<?xi32>)
      into %acc, %max, %sum at [%c0, %c0, %c0, %c0]
      sizes [%b, %c4, %tq, %tk] seq_q %tq {num_heads = 4 : i64, scale = 0.125 : f64}
      : memref<?x4x?x32xf32>, memref<?x2x16x32xf32>, memref<?x2x16x32xf32>,
        memref<?x4x32x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>
  attn.online_finalize %acc, %max, %sum into %o at [%c0, %c0, %c0] sizes [%b, %c4, %tq]
      : memref<?x4x32x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>, memref<?x4x?x32xf32>
  memref.dealloc %acc : memref<?x4x32x?xf32>
  memref.dealloc %max : memref<?x4x?xf32>
  memref.dealloc %sum : memref<?x4x?xf32>
  return
}

// An int8 contiguous cache: every position's rows, times their scales, into buffers of the
// query's type (no block table, so no lengths are read).
// CHECK-LABEL: func.func @dequantize
// CHECK-SAME: (%[[Q:.*]]: memref<?x4x?x32xf16>, %[[K:.*]]: memref<?x2x?x32xi8>, %[[V:.*]]: memref<?x2x?x32xi8>, %[[KS:.*]]: memref<?x2x?xf32>, %[[VS:.*]]: memref<?x2x?xf32>
// CHECK: %[[KB:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x2x?x32xf16>
// CHECK: %[[VB:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x2x?x32xf16>
// CHECK: scf.forall
// CHECK-NOT: scf.if
// CHECK:   memref.load %[[KS]]
// CHECK:   memref.load %[[K]]
// CHECK:   arith.sitofp
// CHECK:   arith.mulf
// CHECK:   arith.truncf
// CHECK:   memref.store {{.*}}, %[[KB]]
// CHECK: attn.online_update %[[Q]], %[[KB]], %[[VB]] into
// CHECK-NOT: scales
func.func @dequantize(%q: memref<?x4x?x32xf16>, %k: memref<?x2x?x32xi8>, %v: memref<?x2x?x32xi8>,
                      %ks: memref<?x2x?xf32>, %vs: memref<?x2x?xf32>, %o: memref<?x4x?x32xf16>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %b = memref.dim %q, %c0 : memref<?x4x?x32xf16>
  %tq = memref.dim %q, %c2 : memref<?x4x?x32xf16>
  %tk = memref.dim %k, %c2 : memref<?x2x?x32xi8>
  %acc = memref.alloc(%b, %tq) : memref<?x4x32x?xf32>
  %max = memref.alloc(%b, %tq) : memref<?x4x?xf32>
  %sum = memref.alloc(%b, %tq) : memref<?x4x?xf32>
  attn.online_init %acc, %max, %sum : memref<?x4x32x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>
  attn.online_update %q, %k, %v scales(%ks, %vs : memref<?x2x?xf32>, memref<?x2x?xf32>)
      into %acc, %max, %sum at [%c0, %c0, %c0, %c0]
      sizes [%b, %c4, %tq, %tk] seq_q %tq {num_heads = 4 : i64, scale = 0.125 : f64}
      : memref<?x4x?x32xf16>, memref<?x2x?x32xi8>, memref<?x2x?x32xi8>,
        memref<?x4x32x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>
  attn.online_finalize %acc, %max, %sum into %o at [%c0, %c0, %c0] sizes [%b, %c4, %tq]
      : memref<?x4x32x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>, memref<?x4x?x32xf16>
  memref.dealloc %acc : memref<?x4x32x?xf32>
  memref.dealloc %max : memref<?x4x?xf32>
  memref.dealloc %sum : memref<?x4x?xf32>
  return
}

// An fp8 E4M3 cache: each byte's bits moved to a binary16's places and the half widened (NaN
// apart), then times its row's scale, to which the decoding's factor of 256 is folded once.
// CHECK-LABEL: func.func @decode_fp8
// CHECK: scf.forall
// CHECK:   %[[SCALE:.*]] = memref.load %{{.*}} : memref<?x2x?xf32>
// CHECK:   %[[FACTOR:.*]] = arith.constant 2.560000e+02 : f32
// CHECK:   %[[ROWSCALE:.*]] = arith.mulf %[[SCALE]], %[[FACTOR]] : f32
// CHECK:   memref.load %{{.*}} : memref<?x2x?x32xf8E4M3FN>
// CHECK:   arith.bitcast %{{.*}} : f8E4M3FN to i8
// CHECK:   arith.extsi %{{.*}} : i8 to i16
// CHECK:   arith.shli
// CHECK:   arith.bitcast %{{.*}} : i16 to f16
// CHECK:   %[[HALF:.*]] = arith.extf %{{.*}} : f16 to f32
// CHECK-NOT: arith.mulf
// CHECK:   %[[VALUE:.*]] = arith.select %{{.*}}, %{{.*}}, %[[HALF]]
// CHECK:   arith.mulf %[[VALUE]], %[[ROWSCALE]]
// CHECK:   memref.store
// CHECK: attn.online_update
// CHECK-NOT: f8E4M3FN
func.func @decode_fp8(%q: memref<?x4x?x32xf16>, %k: memref<?x2x?x32xf8E4M3FN>,
                      %v: memref<?x2x?x32xf8E4M3FN>, %ks: memref<?x2x?xf32>,
                      %vs: memref<?x2x?xf32>, %o: memref<?x4x?x32xf16>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %b = memref.dim %q, %c0 : memref<?x4x?x32xf16>
  %tq = memref.dim %q, %c2 : memref<?x4x?x32xf16>
  %tk = memref.dim %k, %c2 : memref<?x2x?x32xf8E4M3FN>
  %acc = memref.alloc(%b, %tq) : memref<?x4x32x?xf32>
  %max = memref.alloc(%b, %tq) : memref<?x4x?xf32>
  %sum = memref.alloc(%b, %tq) : memref<?x4x?xf32>
  attn.online_init %acc, %max, %sum : memref<?x4x32x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>
  attn.online_update %q, %k, %v scales(%ks, %vs : memref<?x2x?xf32>, memref<?x2x?xf32>)
      into %acc, %max, %sum at [%c0, %c0, %c0, %c0]
      sizes [%b, %c4, %tq, %tk] seq_q %tq {num_heads = 4 : i64, scale = 0.125 : f64}
      : memref<?x4x?x32xf16>, memref<?x2x?x32xf8E4M3FN>, memref<?x2x?x32xf8E4M3FN>,
        memref<?x4x32x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>
  attn.online_finalize %acc, %max, %sum into %o at [%c0, %c0, %c0] sizes [%b, %c4, %tq]
      : memref<?x4x32x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>, memref<?x4x?x32xf16>
  memref.dealloc %acc : memref<?x4x32x?xf32>
  memref.dealloc %max : memref<?x4x?xf32>
  memref.dealloc %sum : memref<?x4x?xf32>
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.gather_cache %f rows = 64 : !transform.any_op
    transform.yield
  }
}
