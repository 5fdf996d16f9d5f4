// RUN: attn-opt %s -transform-interpreter -canonicalize | FileCheck %s
// transform.attn.lower_to_vectors: query rows in lanes (48 rows = 3 x vector<16xf32>);
// scores in a [max_keys, rows] stack buffer; QK^T in register tiles of 2 keys x 3 vectors,
// then one key at a time for the rest; PV in tiles of 4 columns x 3 vectors.

// CHECK-LABEL: func.func @lower
// CHECK: scf.forall
// CHECK-DAG: %[[S:.*]] = memref.alloca() : memref<64x48xf32>
// CHECK-DAG: %[[PACKED:.*]] = memref.alloca() : memref<32x48xf32>
// pack_query: a scaled, transposed copy, 8 x 8 squares of masked row loads transposed in
// registers (q's rows are contiguous).
// CHECK: scf.for
// CHECK: vector.maskedload
// CHECK: vector.shuffle
// CHECK: vector.store %{{.*}}, %[[PACKED]]
// QK^T: 2 keys x 3 vectors of accumulators carried through the loop over d_k.
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-COUNT-3: vector.load %[[PACKED]]
// CHECK: vector.broadcast
// CHECK-COUNT-3: vector.fma
// Causal (mask_mod, no aux read: evaluated in every block): keys after a row's position get
// -inf.
// CHECK-NOT: scf.if
// CHECK: arith.cmpi sle, %{{.*}}, %{{.*}} : vector<16xi32>
// CHECK: arith.select
// CHECK: arith.maximumf
// CHECK: math.exp
// PV: 4 columns x 3 vectors.
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK-NOT: attn.online
// CHECK-NOT: attn.pack
func.func @lower(%q: memref<?x4x?x32xf32>, %k: memref<?x2x?x32xf32>, %v: memref<?x2x?x16xf32>,
                 %o: memref<?x4x?x16xf32>, %tasks: index, %tq: index, %tk: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c48 = arith.constant 48 : index
  %c64 = arith.constant 64 : index
  scf.forall (%t) in (%tasks) {
    %packed = memref.alloca() : memref<32x48xf32>
    %row = arith.muli %t, %c48 : index
    %n = arith.minsi %c48, %tq : index
    %acc = memref.alloca() : memref<1x1x16x48xf32>
    %max = memref.alloca() : memref<1x1x48xf32>
    %sum = memref.alloca() : memref<1x1x48xf32>
    attn.online_init %acc, %max, %sum : memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>
    attn.pack_query %q[%c0, %c0, %row] rows %n into %packed {scale = 0.125 : f64}
        : memref<?x4x?x32xf32>, memref<32x48xf32>
    scf.for %j = %c0 to %tk step %c64 {
      %nj = arith.minsi %c64, %tk : index
      attn.online_update %packed, %k, %v into %acc, %max, %sum at [%c0, %c0, %row, %j]
          sizes [%c1, %c1, %n, %nj] seq_q %tq
          {num_heads = 4 : i64, scale = 0.125 : f64, max_keys = 64 : i64}
          : memref<32x48xf32>, memref<?x2x?x32xf32>, memref<?x2x?x16xf32>,
            memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>
          mask_mod {
          ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %kv: i32, %p: i32, %tqi: i32, %tki: i32):
            %causal = arith.cmpi sle, %kv, %p : i32
            gpu.yield %causal : i1
          }
    }
    attn.online_finalize %acc, %max, %sum into %o at [%c0, %c0, %row] sizes [%c1, %c1, %n]
        : memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>, memref<?x4x?x16xf32>
  }
  return
}

// A mask_mod reading an aux tensor (documents): per block, its bounds over chunks of keys pick
// between the mask step without the region (a block it keeps whole) and the one with it.
// CHECK-LABEL: func.func @lower_aux
// CHECK: scf.forall
// CHECK: memref.load %{{.*}} : memref<?x?xi32>
// CHECK: scf.if %{{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK: memref.load %{{.*}} : memref<?x?xi32>
// CHECK: arith.cmpi eq, %{{.*}}, %{{.*}} : vector<16xi32>
// CHECK: arith.select
// CHECK: } else {
// CHECK-NOT: memref.load
// CHECK: arith.maximumf
// CHECK: scf.yield
func.func @lower_aux(%q: memref<?x4x?x32xf32>, %k: memref<?x2x?x32xf32>, %v: memref<?x2x?x16xf32>,
                     %o: memref<?x4x?x16xf32>, %doc: memref<?x?xi32>, %tasks: index,
                     %tq: index, %tk: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c48 = arith.constant 48 : index
  %c64 = arith.constant 64 : index
  scf.forall (%t) in (%tasks) {
    %packed = memref.alloca() : memref<32x48xf32>
    %row = arith.muli %t, %c48 : index
    %n = arith.minsi %c48, %tq : index
    %acc = memref.alloca() : memref<1x1x16x48xf32>
    %max = memref.alloca() : memref<1x1x48xf32>
    %sum = memref.alloca() : memref<1x1x48xf32>
    attn.online_init %acc, %max, %sum : memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>
    attn.pack_query %q[%c0, %c0, %row] rows %n into %packed {scale = 0.125 : f64}
        : memref<?x4x?x32xf32>, memref<32x48xf32>
    scf.for %j = %c0 to %tk step %c64 {
      %nj = arith.minsi %c64, %tk : index
      attn.online_update %packed, %k, %v aux(%doc : memref<?x?xi32>) into %acc, %max, %sum
          at [%c0, %c0, %row, %j] sizes [%c1, %c1, %n, %nj] seq_q %tq
          {num_heads = 4 : i64, scale = 0.125 : f64, max_keys = 64 : i64}
          : memref<32x48xf32>, memref<?x2x?x32xf32>, memref<?x2x?x16xf32>,
            memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>
          mask_mod {
          ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %kv: i32, %p: i32, %tqi: i32, %tki: i32):
            %qd = attn.aux_load 0 [%b, %i] : i32
            %kd = attn.aux_load 0 [%b, %kv] : i32
            %same = arith.cmpi eq, %qd, %kd : i32
            gpu.yield %same : i1
          }
    }
    attn.online_finalize %acc, %max, %sum into %o at [%c0, %c0, %row] sizes [%c1, %c1, %n]
        : memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>, memref<?x4x?x16xf32>
  }
  return
}

// A mask of bit operations (a draw's shape: a key block's number mixed with a constant). Its
// bounds evaluate the xor where its operands are one point over a chunk of keys (kv_idx // 16),
// so the scalar xor appears in the classifier beside the vector one per score; the key loops
// start at the first chunk the mask can keep. The remainder by kv_idx, whose range holds 0 in
// the first chunk, is evaluated with its divisor replaced by 1 unless it is a point other than
// 0 and -1 (the copy runs for every chunk).
// CHECK-LABEL: func.func @lower_points
// CHECK: scf.forall
// CHECK: arith.divsi %{{.*}}, %{{.*}} : i32
// CHECK: %[[DIVISOR:.*]] = arith.select %{{.*}}, %{{.*}}, %c1_i32 : i32
// CHECK-NEXT: arith.remsi %{{.*}}, %[[DIVISOR]] : i32
// CHECK: arith.xori %{{.*}}, %{{.*}} : i32
// CHECK: arith.minui
// CHECK: arith.xori %{{.*}}, %{{.*}} : vector<16xi32>
func.func @lower_points(%q: memref<?x4x?x32xf32>, %k: memref<?x2x?x32xf32>, %v: memref<?x2x?x16xf32>,
                        %o: memref<?x4x?x16xf32>, %tasks: index, %tq: index, %tk: index) {
  %c16 = arith.constant 16 : i32
  %c5 = arith.constant 5 : i32
  %c3 = arith.constant 3 : i32
  %one = arith.constant 1 : i32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c48 = arith.constant 48 : index
  %c64 = arith.constant 64 : index
  scf.forall (%t) in (%tasks) {
    %packed = memref.alloca() : memref<32x48xf32>
    %row = arith.muli %t, %c48 : index
    %n = arith.minsi %c48, %tq : index
    %acc = memref.alloca() : memref<1x1x16x48xf32>
    %max = memref.alloca() : memref<1x1x48xf32>
    %sum = memref.alloca() : memref<1x1x48xf32>
    attn.online_init %acc, %max, %sum : memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>
    attn.pack_query %q[%c0, %c0, %row] rows %n into %packed {scale = 0.125 : f64}
        : memref<?x4x?x32xf32>, memref<32x48xf32>
    scf.for %j = %c0 to %tk step %c64 {
      %nj = arith.minsi %c64, %tk : index
      attn.online_update %packed, %k, %v into %acc, %max, %sum
          at [%c0, %c0, %row, %j] sizes [%c1, %c1, %n, %nj] seq_q %tq
          {num_heads = 4 : i64, scale = 0.125 : f64, max_keys = 64 : i64}
          : memref<32x48xf32>, memref<?x2x?x32xf32>, memref<?x2x?x16xf32>,
            memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>
          mask_mod {
          ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %kv: i32, %p: i32, %tqi: i32, %tki: i32):
            %block = arith.divsi %kv, %c16 : i32
            %rest = arith.remsi %i, %kv : i32
            %shifted = arith.addi %block, %rest : i32
            %mixed = arith.xori %shifted, %c5 : i32
            %low = arith.andi %mixed, %c3 : i32
            %keep = arith.cmpi eq, %low, %one : i32
            gpu.yield %keep : i1
          }
    }
    attn.online_finalize %acc, %max, %sum into %o at [%c0, %c0, %row] sizes [%c1, %c1, %n]
        : memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>, memref<?x4x?x16xf32>
  }
  return
}

// A bias (score_mod reads an f32 tensor at exactly (b, h, q_idx, kv_idx)): per key block the
// tile's [max_keys, rows] patch of it, pack_query's transposing copy of the block's columns
// (masked row loads, shuffles, stores), the next block's rows prefetched, and the scores'
// elements of it one vector load each instead of a gather.
// CHECK-LABEL: func.func @lower_bias
// CHECK-SAME: %[[BIAS:[a-z0-9]+]]: memref<1x4x?x?xf32>
// CHECK: scf.forall
// CHECK: %[[PATCH:.*]] = memref.alloca() : memref<64x48xf32>
// CHECK: %[[COLUMNS:.*]] = memref.subview %[[BIAS]][0, 0, 0, %{{.*}}] [1, 4, %{{.*}}, %{{.*}}]
// CHECK: vector.create_mask
// CHECK: vector.maskedload %[[COLUMNS]]
// CHECK: vector.shuffle
// CHECK: vector.store %{{.*}}, %[[PATCH]]
// CHECK: memref.prefetch %[[BIAS]]
// CHECK-NOT: memref.load %[[BIAS]]
// CHECK: vector.load %[[PATCH]]
// CHECK: arith.maximumf
// CHECK-NOT: memref.load %[[BIAS]]
// CHECK: math.exp
func.func @lower_bias(%q: memref<?x4x?x32xf32>, %k: memref<?x2x?x32xf32>, %v: memref<?x2x?x16xf32>,
                      %o: memref<?x4x?x16xf32>, %bias: memref<1x4x?x?xf32>, %tasks: index,
                      %tq: index, %tk: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c48 = arith.constant 48 : index
  %c64 = arith.constant 64 : index
  scf.forall (%t) in (%tasks) {
    %packed = memref.alloca() : memref<32x48xf32>
    %row = arith.muli %t, %c48 : index
    %n = arith.minsi %c48, %tq : index
    %acc = memref.alloca() : memref<1x1x16x48xf32>
    %max = memref.alloca() : memref<1x1x48xf32>
    %sum = memref.alloca() : memref<1x1x48xf32>
    attn.online_init %acc, %max, %sum : memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>
    attn.pack_query %q[%c0, %c1, %row] rows %n into %packed {scale = 0.125 : f64}
        : memref<?x4x?x32xf32>, memref<32x48xf32>
    scf.for %j = %c0 to %tk step %c64 {
      %nj = arith.minsi %c64, %tk : index
      attn.online_update %packed, %k, %v aux(%bias : memref<1x4x?x?xf32>) into %acc, %max, %sum
          at [%c0, %c1, %row, %j] sizes [%c1, %c1, %n, %nj] seq_q %tq
          {num_heads = 4 : i64, scale = 0.125 : f64, max_keys = 64 : i64}
          : memref<32x48xf32>, memref<?x2x?x32xf32>, memref<?x2x?x16xf32>,
            memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>
          score_mod {
          ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %kv: i32, %p: i32, %tqi: i32, %tki: i32):
            %add = attn.aux_load 0 [%b, %h, %i, %kv] : f32
            %biased = arith.addf %s, %add : f32
            gpu.yield %biased : f32
          }
    }
    attn.online_finalize %acc, %max, %sum into %o at [%c0, %c1, %row] sizes [%c1, %c1, %n]
        : memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>, memref<?x4x?x16xf32>
  }
  return
}

// V of run-time strides, a kernel argument (not copied: a kernel argument's rows are taken
// as contiguous, ContiguousRows.h): PV reads its rows through a view of unit column stride where the
// column stride is 1 at run time (a step's columns constant offsets from one address), through
// the strides otherwise.
// CHECK-LABEL: func.func @lower_strided_values
// CHECK-SAME: %[[V:[a-z0-9]+]]: memref<?x2x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>
// CHECK-NOT: memref.alloc(
// CHECK: %[[VIEW:.*]] = memref.reinterpret_cast
// CHECK-SAME: strides: [%{{.*}}, %{{.*}}, %{{.*}}, 1]
// CHECK: scf.if
// CHECK: memref.load %[[VIEW]]
// CHECK: } else {
// CHECK: memref.load %[[V]]
func.func @lower_strided_values(%q: memref<?x4x?x32xf32>, %k: memref<?x2x?x32xf32>,
                                %v: memref<?x2x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>,
                                %o: memref<?x4x?x16xf32>, %tasks: index, %tq: index,
                                %tk: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c48 = arith.constant 48 : index
  %c64 = arith.constant 64 : index
  scf.forall (%t) in (%tasks) {
    %packed = memref.alloca() : memref<32x48xf32>
    %row = arith.muli %t, %c48 : index
    %n = arith.minsi %c48, %tq : index
    %acc = memref.alloca() : memref<1x1x16x48xf32>
    %max = memref.alloca() : memref<1x1x48xf32>
    %sum = memref.alloca() : memref<1x1x48xf32>
    attn.online_init %acc, %max, %sum : memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>
    attn.pack_query %q[%c0, %c1, %row] rows %n into %packed {scale = 0.125 : f64}
        : memref<?x4x?x32xf32>, memref<32x48xf32>
    scf.for %j = %c0 to %tk step %c64 {
      %nj = arith.minsi %c64, %tk : index
      attn.online_update %packed, %k, %v into %acc, %max, %sum
          at [%c0, %c1, %row, %j] sizes [%c1, %c1, %n, %nj] seq_q %tq
          {num_heads = 4 : i64, scale = 0.125 : f64, max_keys = 64 : i64}
          : memref<32x48xf32>, memref<?x2x?x32xf32>,
            memref<?x2x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>,
            memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>
    }
    attn.online_finalize %acc, %max, %sum into %o at [%c0, %c1, %row] sizes [%c1, %c1, %n]
        : memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>, memref<?x4x?x16xf32>
  }
  return
}

// K and V rows that a transposed view holds apart (layout=bshd's [B, T, H_kv, d] seen heads
// first): a phase before the attention's copies each into rows of its own (ContiguousRows.h),
// a row one vector load where its column stride is 1 at run time; the update reads the copies,
// freed at the kernel's end.
// CHECK-LABEL: func.func @lower_rows_apart
// CHECK-DAG: %[[VC:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x2x?x16xf32>
// CHECK-DAG: %[[KC:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x2x?x32xf32>
// CHECK: scf.forall
// CHECK: vector.store %{{.*}}, %[[VC]]
// CHECK: scf.forall
// CHECK: vector.store %{{.*}}, %[[KC]]
// CHECK: scf.forall
// CHECK-DAG: memref.load %[[KC]]
// CHECK-DAG: memref.load %[[VC]]
// CHECK-DAG: memref.dealloc %[[KC]]
// CHECK-DAG: memref.dealloc %[[VC]]
func.func @lower_rows_apart(%q: memref<?x4x?x32xf32>, %kr: memref<?x?x2x32xf32>,
                            %vr: memref<?x?x2x16xf32>, %o: memref<?x4x?x16xf32>,
                            %tasks: index, %tq: index, %tk: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c48 = arith.constant 48 : index
  %c64 = arith.constant 64 : index
  %k = memref.transpose %kr (d0, d1, d2, d3) -> (d0, d2, d1, d3)
      : memref<?x?x2x32xf32> to memref<?x2x?x32xf32, strided<[?, 32, 64, 1]>>
  %v = memref.transpose %vr (d0, d1, d2, d3) -> (d0, d2, d1, d3)
      : memref<?x?x2x16xf32> to memref<?x2x?x16xf32, strided<[?, 16, 32, 1]>>
  scf.forall (%t) in (%tasks) {
    %packed = memref.alloca() : memref<32x48xf32>
    %row = arith.muli %t, %c48 : index
    %n = arith.minsi %c48, %tq : index
    %acc = memref.alloca() : memref<1x1x16x48xf32>
    %max = memref.alloca() : memref<1x1x48xf32>
    %sum = memref.alloca() : memref<1x1x48xf32>
    attn.online_init %acc, %max, %sum : memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>
    attn.pack_query %q[%c0, %c1, %row] rows %n into %packed {scale = 0.125 : f64}
        : memref<?x4x?x32xf32>, memref<32x48xf32>
    scf.for %j = %c0 to %tk step %c64 {
      %nj = arith.minsi %c64, %tk : index
      attn.online_update %packed, %k, %v into %acc, %max, %sum
          at [%c0, %c1, %row, %j] sizes [%c1, %c1, %n, %nj] seq_q %tq
          {num_heads = 4 : i64, scale = 0.125 : f64, max_keys = 64 : i64}
          : memref<32x48xf32>, memref<?x2x?x32xf32, strided<[?, 32, 64, 1]>>,
            memref<?x2x?x16xf32, strided<[?, 16, 32, 1]>>,
            memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>
    }
    attn.online_finalize %acc, %max, %sum into %o at [%c0, %c1, %row] sizes [%c1, %c1, %n]
        : memref<1x1x16x48xf32>, memref<1x1x48xf32>, memref<1x1x48xf32>, memref<?x4x?x16xf32>
  }
  return
}

// The finalize with sinks: each row's sink (sinks[h]) folded into its max and sum before o and
// lse are formed.
// CHECK-LABEL: func.func @lower_sinks
// CHECK: memref.load %{{.*}} : memref<4xf32>
// CHECK: arith.maximumf %{{.*}}, %{{.*}} : f32
// CHECK: math.exp
// CHECK: math.log
func.func @lower_sinks(%acc: memref<1x1x16x8xf32>, %max: memref<1x1x8xf32>,
                       %sum: memref<1x1x8xf32>, %o: memref<?x4x?x16xf32>,
                       %lse: memref<?x4x?xf32>, %s: memref<4xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  attn.online_finalize %acc, %max, %sum into %o lse(%lse : memref<?x4x?xf32>)
      sinks(%s : memref<4xf32>) at [%c0, %c1, %c0] sizes [%c1, %c1, %n]
      : memref<1x1x16x8xf32>, memref<1x1x8xf32>, memref<1x1x8xf32>, memref<?x4x?x16xf32>
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_to_vectors %f vector_width = 16 key_unroll = 2 value_split = 4
        : !transform.any_op
    transform.yield
  }
}
