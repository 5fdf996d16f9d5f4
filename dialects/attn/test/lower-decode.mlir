// RUN: attn-opt %s -transform-interpreter -cse | FileCheck %s
// transform.attn.lower_decode: the whole attention (attn-to-online's form) becomes a workspace of
// partial states per split, a phase of tasks (batch, KV head, rows of the group's heads, split)
// reading K and V by vector loads when their head dim is dense (else element by element), with
// QK^T reduced by shuffles, and a phase merging the splits into o; no online op is left.

// CHECK-LABEL: func.func @decode
// CHECK-NOT: attn.online
// CHECK: %[[ACC:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x?x32xf32>
// CHECK: %[[MAX:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x?xf32>
// CHECK: %[[SUM:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x?xf32>
// CHECK: memref.extract_strided_metadata %arg1
// CHECK: memref.reinterpret_cast {{.*}} to memref<?x2x?x32xf16, strided<[?, ?, ?, 1], offset: ?>>
// CHECK: scf.forall
// CHECK:   scf.if
// CHECK:     vector.load {{.*}} : memref<?x2x?x32xf16, strided<[?, ?, ?, 1], offset: ?>>, vector<16xf16>
// CHECK:     vector.shuffle
// CHECK:   } else {
// CHECK:     memref.load %arg1
// CHECK:   vector.store {{.*}}, %[[ACC]]
// CHECK: scf.forall
// CHECK:   memref.load %[[MAX]]
// CHECK:   memref.store {{.*}}, %arg3
// CHECK: memref.dealloc %[[ACC]]
// CHECK-NOT: attn.online
// CHECK: return
func.func @decode(%q: memref<?x4x?x32xf16>, %k: memref<?x2x?x32xf16>, %v: memref<?x2x?x32xf16>,
                  %o: memref<?x4x?x32xf16>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %b = memref.dim %q, %c0 : memref<?x4x?x32xf16>
  %tq = memref.dim %q, %c2 : memref<?x4x?x32xf16>
  %tk = memref.dim %k, %c2 : memref<?x2x?x32xf16>
  %acc = memref.alloc(%b, %tq) : memref<?x4x32x?xf32>
  %max = memref.alloc(%b, %tq) : memref<?x4x?xf32>
  %sum = memref.alloc(%b, %tq) : memref<?x4x?xf32>
  attn.online_init %acc, %max, %sum : memref<?x4x32x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>
  attn.online_update %q, %k, %v into %acc, %max, %sum at [%c0, %c0, %c0, %c0]
      sizes [%b, %c4, %tq, %tk] seq_q %tq {num_heads = 4 : i64, scale = 0.125 : f64}
      : memref<?x4x?x32xf16>, memref<?x2x?x32xf16>, memref<?x2x?x32xf16>,
        memref<?x4x32x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>
  attn.online_finalize %acc, %max, %sum into %o at [%c0, %c0, %c0] sizes [%b, %c4, %tq]
      : memref<?x4x32x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>, memref<?x4x?x32xf16>
  memref.dealloc %acc : memref<?x4x32x?xf32>
  memref.dealloc %max : memref<?x4x?xf32>
  memref.dealloc %sum : memref<?x4x?xf32>
  return
}

// A paged cache ([pages, H_kv, page_size, d]): each key's row is read from the page its sequence's
// block table names, clamped into the cache; the keys run to the block table's width in pages.
// CHECK-LABEL: func.func @decode_paged
// CHECK: memref.reinterpret_cast {{.*}} to memref<?x2x16x32xf16, strided<[?, ?, ?, 1], offset: ?>>
// CHECK: scf.forall
// CHECK:   memref.load %arg3[%{{.*}}, %{{.*}}] : memref<?x?xi32>
// CHECK:   arith.maxsi
// CHECK:   arith.minsi
// CHECK:   vector.load {{.*}} : memref<?x2x16x32xf16, strided<[?, ?, ?, 1], offset: ?>>, vector<16xf16>
// CHECK: scf.forall
// CHECK-NOT: attn.online
// CHECK: return
func.func @decode_paged(%q: memref<?x4x?x32xf16>, %k: memref<?x2x16x32xf16>,
                        %v: memref<?x2x16x32xf16>, %table: memref<?x?xi32>, %lens: memref<?xi32>,
                        %o: memref<?x4x?x32xf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %b = memref.dim %q, %c0 : memref<?x4x?x32xf16>
  %tq = memref.dim %q, %c2 : memref<?x4x?x32xf16>
  %pages = memref.dim %table, %c1 : memref<?x?xi32>
  %tk = arith.muli %pages, %c16 : index
  %acc = memref.alloc(%b, %tq) : memref<?x4x32x?xf32>
  %max = memref.alloc(%b, %tq) : memref<?x4x?xf32>
  %sum = memref.alloc(%b, %tq) : memref<?x4x?xf32>
  attn.online_init %acc, %max, %sum : memref<?x4x32x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>
  attn.online_update %q, %k, %v pages(%table, %lens : memref<?x?xi32>, memref<?xi32>)
      into %acc, %max, %sum at [%c0, %c0, %c0, %c0]
      sizes [%b, %c4, %tq, %tk] seq_q %tq {num_heads = 4 : i64, scale = 0.125 : f64}
      : memref<?x4x?x32xf16>, memref<?x2x16x32xf16>, memref<?x2x16x32xf16>,
        memref<?x4x32x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>
  attn.online_finalize %acc, %max, %sum into %o at [%c0, %c0, %c0] sizes [%b, %c4, %tq]
      : memref<?x4x32x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>, memref<?x4x?x32xf16>
  memref.dealloc %acc : memref<?x4x32x?xf32>
  memref.dealloc %max : memref<?x4x?xf32>
  memref.dealloc %sum : memref<?x4x?xf32>
  return
}

// An int8 cache: each chunk of a key row widened from i8 by sitofp, each key's dot product
// times its k_scale, each probability times its value's v_scale.
// CHECK-LABEL: func.func @decode_int8
// CHECK: scf.forall
// CHECK:   memref.load %arg3[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x2x?xf32>
// CHECK:   vector.from_elements
// CHECK:   vector.load {{.*}} : memref<?x2x?x32xi8, strided<[?, ?, ?, 1], offset: ?>>, vector<16xi8>
// CHECK:   arith.sitofp {{.*}} : vector<16xi8> to vector<16xf32>
// CHECK:   memref.load %arg4[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x2x?xf32>
// CHECK: scf.forall
// CHECK: return
func.func @decode_int8(%q: memref<?x4x?x32xf16>, %k: memref<?x2x?x32xi8>, %v: memref<?x2x?x32xi8>,
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

// An fp8 E4M3 cache: each chunk of a key row decoded through binary16 to 2^-8 its value (no
// product by 256 per element), the 256 folded into each key's k_scale and each value's v_scale.
// CHECK-LABEL: func.func @decode_fp8
// CHECK: scf.forall
// CHECK:   %[[KEYSCALES:.*]] = vector.from_elements
// CHECK:   arith.mulf %[[KEYSCALES]], %{{.*}} : vector<8xf32>
// CHECK:   vector.load {{.*}} : memref<?x2x?x32xf8E4M3FN, strided<[?, ?, ?, 1], offset: ?>>, vector<16xf8E4M3FN>
// CHECK:   %[[HALF:.*]] = arith.extf %{{.*}} : vector<16xf16> to vector<16xf32>
// CHECK-NOT: arith.mulf
// CHECK:   arith.select %{{.*}}, %{{.*}}, %[[HALF]]
// CHECK:   %[[VALUESCALE:.*]] = memref.load %arg4[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x2x?xf32>
// CHECK-NEXT: %[[FACTOR:.*]] = arith.constant 2.560000e+02 : f32
// CHECK-NEXT: arith.mulf %[[VALUESCALE]], %[[FACTOR]] : f32
// CHECK: scf.forall
// CHECK: return
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
    %update = transform.structured.match ops{["attn.online_update"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_decode %update vector_width = 16 key_block = 64 rows = 2
        split_keys = 256 : !transform.any_op
    transform.yield
  }
}
