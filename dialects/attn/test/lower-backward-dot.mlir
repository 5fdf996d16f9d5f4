// RUN: attn-opt %s -split-input-file -transform-interpreter -canonicalize -verify-diagnostics | FileCheck %s
// transform.attn.lower_backward with dot = 1: a query tile's Q and dO rows packed in bf16 pairs
// ([d / 2, 2 rows]), the recomputed scores and dP as vdpbf16ps over the pairs, each key's two
// elements one i32 broadcast to every lane, and the scores scaled after (Q is packed unscaled);
// dK's sums too, over Q's rows in pairs of rows ([rows / 2, 2 d_k]) against P's and G's
// elements rounded to bf16 pairs (d_v = 8 is no multiple of 16: dV's stay f32); and dQ^T's,
// the key block's K rows in pairs of keys ([key_block / 2, 2 d_k]) against G's rows rounded
// and interleaved in pairs of keys ([key_block / 2, 2 rows]), keys outside the tile's range 0.

// CHECK-LABEL: func.func @backward_dot
// CHECK: scf.forall
// CHECK:   %[[ROWPAIRS:.*]] = memref.alloca() : memref<8x32xbf16>
// CHECK:   memref.alloca() : memref<16x8xf32>
// CHECK:   %[[QPAIRS:.*]] = memref.alloca() : memref<8x32xbf16>
// CHECK:   memref.alloca() : memref<4x32xbf16>
// CHECK:   %[[KEYPAIRS:.*]] = memref.alloca() : memref<8x32xbf16>
// CHECK:   %[[GPAIRS:.*]] = memref.alloca() : memref<8x32xbf16>
// CHECK:   memref.store %{{.*}}, %[[KEYPAIRS]]
// CHECK:   vector.load %[[QPAIRS]][%{{.*}}, %c0] : memref<8x32xbf16>, vector<32xbf16>
// CHECK:   arith.shli %{{.*}}, %c16_i32 : i32
// CHECK:   vector.bitcast %{{.*}} : vector<16xi32> to vector<32xbf16>
// CHECK:   llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// CHECK:   arith.mulf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK:   arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// CHECK:   vector.load %[[ROWPAIRS]][%{{.*}}, %c0] : memref<8x32xbf16>, vector<32xbf16>
// CHECK:   llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// CHECK:   llvm.call_intrinsic "llvm.x86.avx512bf16.cvtne2ps2bf16.512"
// CHECK:   vector.shuffle
// CHECK:   vector.store %{{.*}}, %[[GPAIRS]]
// CHECK:   vector.load %[[GPAIRS]][%{{.*}}, %c0] : memref<8x32xbf16>, vector<32xbf16>
// CHECK:   vector.load %[[KEYPAIRS]][%{{.*}}, %c0] : memref<8x32xbf16>, vector<2xbf16>
// CHECK:   llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"

func.func @backward_dot(%q: memref<?x2x?x16xbf16>, %k: memref<?x2x?x16xbf16>,
                        %v: memref<?x2x?x8xbf16>, %o: memref<?x2x?x8xbf16>,
                        %do: memref<?x2x?x8xbf16>, %lse: memref<?x2x?xf32>,
                        %dq: memref<?x2x?x16xbf16>, %dk: memref<?x2x?x16xbf16>,
                        %dv: memref<?x2x?x8xbf16>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %b = memref.dim %q, %c0 : memref<?x2x?x16xbf16>
  %tq = memref.dim %q, %c2 : memref<?x2x?x16xbf16>
  %tk = memref.dim %k, %c2 : memref<?x2x?x16xbf16>
  attn.backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv
      at [%c0, %c0, %c0, %c0] sizes [%b, %c2, %tq, %tk] seq_q %tq
      {num_heads = 2 : i64, scale = 0.25 : f64}
      : memref<?x2x?x16xbf16>, memref<?x2x?x16xbf16>, memref<?x2x?x8xbf16>,
        memref<?x2x?x8xbf16>, memref<?x2x?x8xbf16>, memref<?x2x?xf32>,
        memref<?x2x?x16xbf16>, memref<?x2x?x16xbf16>, memref<?x2x?x8xbf16>
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_backward %f rows = 16 key_block = 16 vector_width = 16 key_unroll = 2
        dot = 1 : !transform.any_op
    transform.yield
  }
}

// -----

// f32 tensors have no bf16 pairs.
func.func @wide(%q: memref<1x1x8x16xf32>, %k: memref<1x1x8x16xf32>, %v: memref<1x1x8x16xf32>,
                %o: memref<1x1x8x16xf32>, %do: memref<1x1x8x16xf32>, %lse: memref<1x1x8xf32>,
                %dq: memref<1x1x8x16xf32>, %dk: memref<1x1x8x16xf32>,
                %dv: memref<1x1x8x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  // expected-error @+1 {{lower_backward: dot products take bf16 q, k, v and grad_o with even head dims, in vectors of 16 lanes}}
  attn.backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv
      at [%c0, %c0, %c0, %c0] sizes [%c1, %c1, %c8, %c8] seq_q %c8
      {num_heads = 1 : i64, scale = 0.25 : f64}
      : memref<1x1x8x16xf32>, memref<1x1x8x16xf32>, memref<1x1x8x16xf32>, memref<1x1x8x16xf32>,
        memref<1x1x8x16xf32>, memref<1x1x8xf32>, memref<1x1x8x16xf32>, memref<1x1x8x16xf32>,
        memref<1x1x8x16xf32>
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_backward %f rows = 16 key_block = 16 vector_width = 16 key_unroll = 2
        dot = 1 : !transform.any_op
    transform.yield
  }
}
