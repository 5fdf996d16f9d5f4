// RUN: attn-opt %s -transform-interpreter -canonicalize | FileCheck %s
// transform.attn.lower_to_mma with key splits (decoding): on the host, splits =
// clamp(ceil(fill_blocks / tasks), 1, min(max_key_splits, key blocks)); more than one runs the
// split kernel on blocks (tasks, splits) and a merge over a workspace on the caller's stream.

// CHECK-LABEL: func.func @split
// CHECK: %[[BLOCKS:.*]] = arith.ceildivui %{{.*}}, %c32
// CHECK: %[[WANTED:.*]] = arith.ceildivui %c256, %{{.*}}
// CHECK: %[[CAP:.*]] = arith.minui %[[BLOCKS]], %c8
// CHECK: %[[SPLITS:.*]] = arith.maxui %{{.*}}, %c1
// CHECK: scf.if
// CHECK: gpu.wait async
// CHECK: gpu.alloc async [{{.*}}] (%[[SPLITS]], %{{.*}}) : memref<?x?x16xf32>
// CHECK-COUNT-2: gpu.alloc async {{.*}} : memref<?x?xf32>
// The split kernel: its share of the key blocks, the state written unnormalised.
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %{{.*}}, {{.*}} = %[[SPLITS]], {{.*}}) threads({{.*}}) in ({{.*}} = %c64,
// CHECK: arith.ceildivsi
// CHECK: nvgpu.mma.sync
// CHECK: vector.store {{.*}} : memref<?x?x16xf32>, vector<2xf32>
// CHECK: memref.store {{.*}} : memref<?x?xf32>
// The merge: the block's 64 threads take the tile's (row, column) pairs in turn, 16 columns
// per row.
// CHECK: gpu.launch blocks({{.*}}) threads({{.*}}) in ({{.*}} = %c64,
// CHECK: %[[TX:.*]] = gpu.thread_id x
// CHECK: %[[PAIRS:.*]] = arith.muli %{{.*}}, %c16
// CHECK: scf.for %[[PAIR:.*]] = %[[TX]] to %[[PAIRS]] step %c64 {
// CHECK: arith.remui %[[PAIR]], %c16
// CHECK: scf.for {{.*}} -> (f32)
// CHECK: arith.maximumf
// CHECK: math.exp2
// CHECK: gpu.dealloc async
// CHECK: gpu.wait [
// One split: the single-pass kernel.
// CHECK: } else {
// CHECK: gpu.launch
// CHECK-NOT: scf.forall (
func.func @split(%q: memref<?x4x?x32xf16>, %k: memref<?x2x?x32xf16>, %v: memref<?x2x?x16xf16>,
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

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %tasks = transform.structured.match ops{["scf.forall"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_to_mma %tasks {max_key_splits = 8, fill_blocks = 256} : !transform.any_op
    transform.yield
  }
}
