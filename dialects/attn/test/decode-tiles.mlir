// RUN: attn-opt %s -transform-interpreter -canonicalize | FileCheck %s
// The CUDA schedule's decode branch: branch_on_query_rows copies the attention into an scf.if
// on Tq <= 16; there tile_queries pack_heads makes tiles of the 5 query rows of each of a GQA
// group's 3 heads (tile row r: query row r / 3 of head r % 3) and lower_to_mma one warp per
// (batch, KV head, query tile); the other branch keeps tiles of 32 rows of one head.

// CHECK-LABEL: func.func @decode_tiles
// CHECK: %[[FEW:.*]] = arith.cmpi ule, %{{.*}}, %c16
// CHECK: scf.if %[[FEW]] {
// Tasks of (batch, KV head, tile of 5 rows per head), one warp each.
// CHECK: %[[TILES:.*]] = arith.ceildivui %{{.*}}, %c5
// CHECK: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c32,
// The lane's two C rows: query rows (tile row) / 3, heads first head + (tile row) mod 3, whose
// query fragments it loads.
// CHECK: %[[WARPROW:.*]] = arith.muli %{{.*}}, %c16
// CHECK: %[[TILEROW:.*]] = arith.addi %[[WARPROW]], %{{.*}} : index
// CHECK: arith.divui %[[TILEROW]], %c3
// CHECK: %[[INGROUP:.*]] = arith.remui %[[TILEROW]], %c3
// CHECK: %[[HEAD:.*]] = arith.addi %{{.*}}, %[[INGROUP]]
// CHECK: vector.load %{{.*}}[%{{.*}}, %[[HEAD]], %{{.*}}, %{{.*}}] : memref<?x6x?x32xf16{{.*}}>, vector<2xf16>
// The terms (causal) row by row, rows g and g + 8 of a tile belonging to different heads when G
// does not divide 8: a C row of 2 scores at a time.
// CHECK: nvgpu.mma.sync
// CHECK: vector.extract %{{.*}}[0] : vector<2xi32> from vector<2x2xi32>
// CHECK: arith.cmpi sle, %{{.*}}, %{{.*}} : vector<2xi32>
// Each C row stored at its head and query row.
// CHECK: vector.store %{{.*}}, %{{.*}}[%{{.*}}, %[[HEAD]], %{{.*}}, %{{.*}}] : memref<?x6x?x16xf16{{.*}}>, vector<2xf16>
// The prefill branch: 2 warps per tile of 32 rows of one head.
// CHECK: } else {
// CHECK: arith.ceildivui %{{.*}}, %c32
// CHECK: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c64,
// CHECK-NOT: attn.online_{{init|update|finalize}} %
func.func @decode_tiles(%q: memref<?x6x?x32xf16>, %k: memref<?x2x?x32xf16>,
                        %v: memref<?x2x?x16xf16>, %o: memref<?x6x?x16xf16>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c6 = arith.constant 6 : index
  %b = memref.dim %q, %c0 : memref<?x6x?x32xf16>
  %tq = memref.dim %q, %c2 : memref<?x6x?x32xf16>
  %tk = memref.dim %k, %c2 : memref<?x2x?x32xf16>
  %acc = memref.alloc(%b, %tq) : memref<?x6x16x?xf32>
  %max = memref.alloc(%b, %tq) : memref<?x6x?xf32>
  %sum = memref.alloc(%b, %tq) : memref<?x6x?xf32>
  attn.online_init %acc, %max, %sum : memref<?x6x16x?xf32>, memref<?x6x?xf32>, memref<?x6x?xf32>
  attn.online_update %q, %k, %v into %acc, %max, %sum at [%c0, %c0, %c0, %c0]
      sizes [%b, %c6, %tq, %tk] seq_q %tq {num_heads = 6 : i64, scale = 0.125 : f64}
      : memref<?x6x?x32xf16>, memref<?x2x?x32xf16>, memref<?x2x?x16xf16>,
        memref<?x6x16x?xf32>, memref<?x6x?xf32>, memref<?x6x?xf32>
      mask_mod {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %i: i32, %kv: i32, %p: i32, %tqi: i32, %tki: i32):
        %causal = arith.cmpi sle, %kv, %p : i32
        gpu.yield %causal : i1
      }
  attn.online_finalize %acc, %max, %sum into %o at [%c0, %c0, %c0] sizes [%b, %c6, %tq]
      : memref<?x6x16x?xf32>, memref<?x6x?xf32>, memref<?x6x?xf32>, memref<?x6x?x16xf16>
  memref.dealloc %acc : memref<?x6x16x?xf32>
  memref.dealloc %max : memref<?x6x?xf32>
  memref.dealloc %sum : memref<?x6x?xf32>
  return
}

// A paged cache: the decode branch copies K and V tiles through the block table (key j: row
// j mod 16 of page block_table[b, j / 16], clamped into the cache); the prefill branch gathers
// the cache into plain buffers first.
// CHECK-LABEL: func.func @decode_tiles_paged
// CHECK-SAME: %[[TABLE:[a-z0-9]+]]: memref<?x?xi32>, %[[LENS:[a-z0-9]+]]: memref<?xi32>
// CHECK: scf.if
// CHECK: gpu.launch
// Keys past seq_lens[b] are zero-filled, whatever the pages hold there.
// CHECK: memref.load %[[LENS]]
// CHECK: %[[ENTRY:.*]] = memref.load %[[TABLE]][%{{.*}}, %{{.*}}] : memref<?x?xi32>
// CHECK: %[[PAGE:.*]] = arith.index_cast %[[ENTRY]]
// CHECK: arith.maxsi %[[PAGE]], %c0
// CHECK: %[[ROW:.*]] = arith.remui %{{.*}}, %c16
// CHECK: nvgpu.device_async_copy %{{.*}}[%{{.*}}, %{{.*}}, %[[ROW]], %{{.*}}]
// CHECK: } else {
// CHECK: memref.alloc
// CHECK: scf.forall
// CHECK: memref.load %[[TABLE]]
// CHECK: gpu.launch
// CHECK-NOT: pages(
func.func @decode_tiles_paged(%q: memref<?x4x?x32xf16>, %k: memref<?x2x16x32xf16>,
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

// An int8 cache: the decode tiles load its codes (8 per thread and copy), widen them into the
// f16 tiles the MMAs read, and stage each key's scale in shared memory; the scores are scaled
// by the keys' scales and the probabilities by the values' before P V.
// CHECK-LABEL: func.func @decode_tiles_int8
// CHECK-SAME: %[[KS:[a-z0-9]+]]: memref<?x2x?xf32>, %[[VS:[a-z0-9]+]]: memref<?x2x?xf32>
// CHECK: scf.if
// CHECK: gpu.launch {{.*}} workgroup({{.*}} : memref<32x40xf16, {{.*}}>, {{.*}} : memref<32x24xf16, {{.*}}>, %[[SKS:[a-z0-9]+]] : memref<32xf32, {{.*}}>, %[[SVS:[a-z0-9]+]] : memref<32xf32, {{.*}}>)
// CHECK: vector.load {{.*}} : memref<?x2x?x32xi8{{.*}}>, vector<8xi8>
// CHECK: arith.sitofp {{.*}} : vector<8xi8> to vector<8xf32>
// CHECK: arith.truncf {{.*}} : vector<8xf32> to vector<8xf16>
// CHECK: memref.load %[[KS]]
// CHECK: memref.store {{.*}}, %[[SKS]]
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: scf.for
// CHECK: nvgpu.mma.sync
// CHECK: vector.load %[[SKS]]
// CHECK: arith.mulf
// CHECK: vector.load %[[SVS]]
// CHECK: nvgpu.ldmatrix
// CHECK: } else {
func.func @decode_tiles_int8(%q: memref<?x4x?x32xf16>, %k: memref<?x2x?x32xi8>,
                             %v: memref<?x2x?x16xi8>, %ks: memref<?x2x?xf32>,
                             %vs: memref<?x2x?xf32>, %o: memref<?x4x?x16xf16>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %b = memref.dim %q, %c0 : memref<?x4x?x32xf16>
  %tq = memref.dim %q, %c2 : memref<?x4x?x32xf16>
  %tk = memref.dim %k, %c2 : memref<?x2x?x32xi8>
  %acc = memref.alloc(%b, %tq) : memref<?x4x16x?xf32>
  %max = memref.alloc(%b, %tq) : memref<?x4x?xf32>
  %sum = memref.alloc(%b, %tq) : memref<?x4x?xf32>
  attn.online_init %acc, %max, %sum : memref<?x4x16x?xf32>, memref<?x4x?xf32>, memref<?x4x?xf32>
  attn.online_update %q, %k, %v scales(%ks, %vs : memref<?x2x?xf32>, memref<?x2x?xf32>)
      into %acc, %max, %sum at [%c0, %c0, %c0, %c0]
      sizes [%b, %c4, %tq, %tk] seq_q %tq {num_heads = 4 : i64, scale = 0.125 : f64}
      : memref<?x4x?x32xf16>, memref<?x2x?x32xi8>, memref<?x2x?x16xi8>,
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
    %update = transform.structured.match ops{["attn.online_update"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %decode, %prefill = transform.attn.branch_on_query_rows %update rows = 16
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.attn.gather_cache %prefill columns = 8 : !transform.any_op
    %decodeTasks, %decodeTile = transform.attn.tile_queries %decode rows = 16 pack_heads
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %decodeKeys, %decodeBlock = transform.attn.tile_keys %decodeTile block = 32
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %tasks, %tile = transform.attn.tile_queries %prefill rows = 32
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %keys, %block = transform.attn.tile_keys %tile block = 32
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %loops = transform.structured.match ops{["scf.forall"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_to_mma %loops : !transform.any_op
    transform.yield
  }
}
