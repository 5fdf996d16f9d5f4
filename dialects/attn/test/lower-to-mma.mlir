// RUN: attn-opt %s -transform-interpreter -canonicalize | FileCheck %s
// RUN: attn-opt %s -transform-interpreter -canonicalize | FileCheck %s --check-prefix=F16-SCALE
// RUN: sed s/f16/bf16/g %s | attn-opt -transform-interpreter -canonicalize | FileCheck %s --check-prefix=BF16-SCALE
// transform.attn.lower_to_mma: one block per task of 32 query rows (2 warps of 16), K and V
// tiles of 32 keys in padded shared memory, QK^T and PV as m16n8k16 MMAs.

// P is rounded to the storage type for the PV MMA: f16 takes no e^-c scale (2^-31 is below its
// smallest subnormal; Variants/OnlineSoftmax.h), bf16 takes c = ln 2^31.
// F16-SCALE-NOT: 21.4875
// BF16-SCALE: arith.constant 21.4875{{[0-9]*}} : f32

// CHECK-LABEL: func.func @lower
// CHECK-SAME: llvm.emit_c_interface
// The tensors as unit-stride views (the bundle's entry checks the strides).
// CHECK: memref.cast %{{.*}} to memref<{{.*}}strided<[?, ?, ?, 1], offset: ?>>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c64,
// CHECK-SAME: workgroup(%[[SK:[a-z0-9]+]] : memref<32x40xf16, #gpu.address_space<workgroup>>, %[[SV:[a-z0-9]+]] : memref<32x24xf16, #gpu.address_space<workgroup>>)
// Q's A fragments: 2 per row of 32 columns, loaded as pairs.
// CHECK-COUNT-8: vector.load {{.*}} vector<2xf16>
// The first K tile.
// CHECK: nvgpu.device_async_copy {{.*}}, %[[SK]][{{.*}}], 8, %{{.*}} {bypassL1}
// CHECK: nvgpu.device_async_create_group
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK: gpu.barrier
// The key loop carries m and l for two rows and O as two 16x8 C fragments.
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, vector<2x2xf32>, vector<2x2xf32>)
// CHECK: nvgpu.device_async_copy {{.*}}, %[[SV]]
// CHECK: nvgpu.ldmatrix %[[SK]][{{.*}}] {numTiles = 4 : i32, transpose = false}
// CHECK: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// Causal (the mask_mod region), then the block's end.
// CHECK: arith.cmpi sle
// CHECK: arith.cmpi slt
// The row max over the quad.
// CHECK: gpu.shuffle  xor
// CHECK: gpu.shuffle  xor
// CHECK: math.exp2
// CHECK: gpu.barrier
// CHECK: nvgpu.device_async_copy {{.*}}, %[[SK]]
// P as A fragments, V's by ldmatrix.trans.
// CHECK: vector.shuffle {{.*}} [0, 1, 2, 3] : vector<2x2xf16>, vector<2x2xf16>
// CHECK: nvgpu.ldmatrix %[[SV]][{{.*}}] {numTiles = 4 : i32, transpose = true}
// CHECK: nvgpu.mma.sync
// CHECK: gpu.barrier
// CHECK: scf.yield
// Finalize: the row sums over the quad, the rows < Tq stored as pairs.
// CHECK: gpu.shuffle  xor
// CHECK: scf.if
// CHECK: vector.store {{.*}} vector<2xf16>
// CHECK-NOT: attn.online
// CHECK-NOT: scf.forall (
func.func @lower(%q: memref<?x4x?x32xf16>, %k: memref<?x2x?x32xf16>, %v: memref<?x2x?x16xf16>,
                 %o: memref<?x4x?x16xf16>, %tasks: index, %tq: index, %tk: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  scf.forall (%t) in (%tasks) {
    %row = arith.muli %t, %c32 : index
    %n = arith.minsi %c32, %tq : index
    %acc = memref.alloca() : memref<1x1x16x32xf32>
    %max = memref.alloca() : memref<1x1x32xf32>
    %sum = memref.alloca() : memref<1x1x32xf32>
    attn.online_init %acc, %max, %sum : memref<1x1x16x32xf32>, memref<1x1x32xf32>, memref<1x1x32xf32>
    scf.for %j = %c0 to %tk step %c32 {
      %nj = arith.minsi %c32, %tk : index
      attn.online_update %q, %k, %v into %acc, %max, %sum at [%c0, %c0, %row, %j]
          sizes [%c1, %c1, %n, %nj] seq_q %tq
          {num_heads = 4 : i64, scale = 0.125 : f64, max_keys = 32 : i64}
          : memref<?x4x?x32xf16>, memref<?x2x?x32xf16>, memref<?x2x?x16xf16>,
            memref<1x1x16x32xf32>, memref<1x1x32xf32>, memref<1x1x32xf32>
          mask_mod {
          ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %kv: i32, %p: i32, %tqi: i32, %tki: i32):
            %causal = arith.cmpi sle, %kv, %p : i32
            gpu.yield %causal : i1
          }
    }
    attn.online_finalize %acc, %max, %sum into %o at [%c0, %c0, %row] sizes [%c1, %c1, %n]
        : memref<1x1x16x32xf32>, memref<1x1x32xf32>, memref<1x1x32xf32>, memref<?x4x?x16xf16>
  }
  return
}

// A key extent of one static block (Linformer's proj_len keys): the canonicalizer folded
// tile_keys' loop away, and lower_to_mma puts it back around the update.
// CHECK-LABEL: func.func @lower_one_key_block
// CHECK: gpu.launch
// CHECK: nvgpu.device_async_copy
// CHECK: nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]}
// CHECK-NOT: attn.online
func.func @lower_one_key_block(%q: memref<?x4x?x32xf16>, %k: memref<?x2x20x32xf16>,
                               %v: memref<?x2x20x16xf16>, %o: memref<?x4x?x16xf16>,
                               %tasks: index, %tq: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c20 = arith.constant 20 : index
  %c32 = arith.constant 32 : index
  scf.forall (%t) in (%tasks) {
    %row = arith.muli %t, %c32 : index
    %n = arith.minsi %c32, %tq : index
    %acc = memref.alloca() : memref<1x1x16x32xf32>
    %max = memref.alloca() : memref<1x1x32xf32>
    %sum = memref.alloca() : memref<1x1x32xf32>
    attn.online_init %acc, %max, %sum : memref<1x1x16x32xf32>, memref<1x1x32xf32>, memref<1x1x32xf32>
    attn.online_update %q, %k, %v into %acc, %max, %sum at [%c0, %c0, %row, %c0]
        sizes [%c1, %c1, %n, %c20] seq_q %tq
        {num_heads = 4 : i64, scale = 0.125 : f64, max_keys = 32 : i64}
        : memref<?x4x?x32xf16>, memref<?x2x20x32xf16>, memref<?x2x20x16xf16>,
          memref<1x1x16x32xf32>, memref<1x1x32xf32>, memref<1x1x32xf32>
    attn.online_finalize %acc, %max, %sum into %o at [%c0, %c0, %row] sizes [%c1, %c1, %n]
        : memref<1x1x16x32xf32>, memref<1x1x32xf32>, memref<1x1x32xf32>, memref<?x4x?x16xf16>
  }
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %tasks = transform.structured.match ops{["scf.forall"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_to_mma %tasks : !transform.any_op
    transform.yield
  }
}
