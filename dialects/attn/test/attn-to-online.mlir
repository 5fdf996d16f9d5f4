// RUN: attn-opt %s -attn-to-online | FileCheck %s
// attn.attention at the kernel boundary becomes init, one update over the whole domain and
// finalize into the destinations, with the state in heap buffers, rows innermost.

!Q = memref<?x4x?x32xf32, strided<[?, ?, ?, ?], offset: ?>>
!K = memref<?x2x?x32xf32, strided<[?, ?, ?, ?], offset: ?>>
!V = memref<?x2x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>
!O = memref<?x4x?x16xf32, strided<[?, ?, ?, ?], offset: ?>>
!L = memref<?x4x?xf32, strided<[?, ?, ?], offset: ?>>

// CHECK-LABEL: func.func @kernel
// CHECK-SAME: (%[[Q:.*]]: memref<?x4x?x32xf32{{.*}}>, %[[K:.*]]: memref{{.*}}, %[[V:.*]]: memref{{.*}}, %[[LEN:.*]]: memref<?xi32>, %[[O:.*]]: memref{{.*}}, %[[LSE:.*]]: memref
func.func @kernel(%q: !Q, %k: !K, %v: !V, %len: memref<?xi32>, %o: !O, %lse: !L) {
  // CHECK-NOT: bufferization.to_tensor
  // CHECK: %[[B:.*]] = memref.dim %[[Q]], %c0
  // CHECK: %[[TQ:.*]] = memref.dim %[[Q]], %c2
  // CHECK: %[[TK:.*]] = memref.dim %[[K]], %c2
  // CHECK: %[[ACC:.*]] = memref.alloc(%[[B]], %[[TQ]]) : memref<?x4x16x?xf32>
  // CHECK: %[[MAX:.*]] = memref.alloc(%[[B]], %[[TQ]]) : memref<?x4x?xf32>
  // CHECK: %[[SUM:.*]] = memref.alloc(%[[B]], %[[TQ]]) : memref<?x4x?xf32>
  // CHECK: attn.online_init %[[ACC]], %[[MAX]], %[[SUM]]
  // CHECK: attn.online_update %[[Q]], %[[K]], %[[V]] aux(%[[LEN]] : memref<?xi32>) into %[[ACC]], %[[MAX]], %[[SUM]]
  // CHECK-SAME: sizes[%[[B]], %c4, %[[TQ]], %[[TK]]] seq_q %[[TQ]]
  // CHECK-SAME: {num_heads = 4 : i64, scale = 1.250000e-01 : f64}
  // CHECK: mask_mod {
  // CHECK: attn.aux_load 0[%{{.*}}] : i32
  // CHECK: attn.online_finalize %[[ACC]], %[[MAX]], %[[SUM]] into %[[O]] lse(%[[LSE]]
  // CHECK-COUNT-3: memref.dealloc
  // CHECK-NOT: materialize_in_destination
  %qt = bufferization.to_tensor %q restrict : !Q
  %kt = bufferization.to_tensor %k restrict : !K
  %vt = bufferization.to_tensor %v restrict : !V
  %lt = bufferization.to_tensor %len restrict : memref<?xi32>
  %out, %l = attn.attention %qt, %kt, %vt aux(%lt : tensor<?xi32>) {scale = 0.125 : f64}
      : tensor<?x4x?x32xf32>, tensor<?x2x?x32xf32>, tensor<?x2x?x16xf32>
      -> tensor<?x4x?x16xf32>, tensor<?x4x?xf32>
      mask_mod {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %pos: i32, %tq: i32, %tk: i32):
        %length = attn.aux_load 0 [%b] : i32
        %padding = arith.cmpi slt, %j, %length : i32
        %causal = arith.cmpi sle, %j, %pos : i32
        %keep = arith.andi %causal, %padding : i1
        gpu.yield %keep : i1
      }
  bufferization.materialize_in_destination %out in restrict writable %o
      : (tensor<?x4x?x16xf32>, !O) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse
      : (tensor<?x4x?xf32>, !L) -> ()
  return
}

// The weights without lse: attn.weights after the finalize, which gets the attributes, the sinks
// and a copy of mask_mod (the update keeps its own); no lse buffer, as the weights form each
// row's max and sum themselves.
// CHECK-LABEL: func.func @weights
// CHECK-SAME: (%[[Q:.*]]: memref<?x4x?x32xf32{{.*}}>, %[[K:.*]]: memref{{.*}}, %[[V:.*]]: memref{{.*}}, %[[S:.*]]: memref<4xf32>, %[[O:.*]]: memref{{.*}}, %[[W:.*]]: memref
func.func @weights(%q: !Q, %k: !K, %v: !V, %sinks: memref<4xf32>, %o: !O,
                   %w: memref<?x4x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>) {
  // CHECK: %[[TQ:.*]] = memref.dim %[[Q]], %c2
  // CHECK: %[[TK:.*]] = memref.dim %[[K]], %c2
  // CHECK: memref.alloc({{.*}}) : memref<?x4x16x?xf32>
  // CHECK-COUNT-2: memref.alloc({{.*}}) : memref<?x4x?xf32>
  // CHECK-NOT: memref.alloc
  // CHECK: attn.online_update
  // CHECK: mask_mod
  // CHECK: attn.online_finalize {{.*}} into %[[O]] sinks(%[[S]] : memref<4xf32>)
  // CHECK: attn.weights %[[Q]], %[[K]] sinks(%[[S]] : memref<4xf32>) into %[[W]] at[%c0, %c0, %c0, %c0] sizes[%{{.*}}, %c4, %[[TQ]], %[[TK]]] seq_q %[[TQ]] {num_heads = 4 : i64, scale = 1.250000e-01 : f64}
  // CHECK: mask_mod
  // CHECK: arith.cmpi sge
  // CHECK-COUNT-3: memref.dealloc
  // CHECK-NOT: memref.dealloc
  %qt = bufferization.to_tensor %q restrict : !Q
  %kt = bufferization.to_tensor %k restrict : !K
  %vt = bufferization.to_tensor %v restrict : !V
  %st = bufferization.to_tensor %sinks restrict : memref<4xf32>
  %out, %p = attn.attention %qt, %kt, %vt sinks(%st : tensor<4xf32>) {scale = 0.125 : f64}
      : tensor<?x4x?x32xf32>, tensor<?x2x?x32xf32>, tensor<?x2x?x16xf32>
      -> tensor<?x4x?x16xf32> weights tensor<?x4x?x?xf32>
      mask_mod {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %pos: i32, %tq: i32, %tk: i32):
        %c3 = arith.constant 3 : i32
        %keep = arith.cmpi sge, %j, %c3 : i32
        gpu.yield %keep : i1
      }
  bufferization.materialize_in_destination %out in restrict writable %o
      : (tensor<?x4x?x16xf32>, !O) -> ()
  bufferization.materialize_in_destination %p in restrict writable %w
      : (tensor<?x4x?x?xf32>, memref<?x4x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>) -> ()
  return
}

// RoPE: workspace buffers for the rotated query and keys, allocated before the state is used,
// the query rotated at offset Tk - Tq (bottom_right), the keys at 0; the update reads them, and
// they are freed with the state.
// CHECK-LABEL: func.func @rope
// CHECK-SAME: (%[[Q:.*]]: memref<?x4x?x32xf32{{.*}}>, %[[K:.*]]: memref{{.*}}, %[[V:.*]]: memref{{.*}}, %[[O:.*]]: memref
func.func @rope(%q: !Q, %k: !K, %v: !V, %o: !O) {
  // CHECK: %[[TQ:.*]] = memref.dim %[[Q]], %c2
  // CHECK: %[[TK:.*]] = memref.dim %[[K]], %c2
  // CHECK: %[[RQ:.*]] = memref.alloc({{.*}}) : memref<?x4x?x32xf32>
  // CHECK: %[[RK:.*]] = memref.alloc({{.*}}) : memref<?x2x?x32xf32>
  // CHECK: %[[OFFSET:.*]] = arith.subi %[[TK]], %[[TQ]]
  // CHECK: attn.rope %[[Q]] into %[[RQ]] offset %[[OFFSET]] {dims = 16 : i64, style = "interleaved", theta = 5.000000e+05 : f64}
  // CHECK: attn.rope %[[K]] into %[[RK]] offset %c0 {dims = 16 : i64, style = "interleaved", theta = 5.000000e+05 : f64}
  // CHECK: attn.online_update %[[RQ]], %[[RK]], %[[V]] into
  // CHECK-COUNT-5: memref.dealloc
  %qt = bufferization.to_tensor %q restrict : !Q
  %kt = bufferization.to_tensor %k restrict : !K
  %vt = bufferization.to_tensor %v restrict : !V
  %out = attn.attention %qt, %kt, %vt
      {scale = 0.125 : f64, rope = "interleaved", rope_theta = 5.0e5 : f64,
       rope_dims = 16 : i64}
      : tensor<?x4x?x32xf32>, tensor<?x2x?x32xf32>, tensor<?x2x?x16xf32>
      -> tensor<?x4x?x16xf32>
  bufferization.materialize_in_destination %out in restrict writable %o
      : (tensor<?x4x?x16xf32>, !O) -> ()
  return
}

// RoPE over a KV cache (query_ends: seq_lens): only the query rotates, at offset -Tq from each
// batch's end; the cache's keys are read as they are.
// CHECK-LABEL: func.func @rope_over_a_cache
// CHECK-SAME: (%[[Q:.*]]: memref<?x4x?x32xf32{{.*}}>, %[[K:.*]]: memref{{.*}}, %[[V:.*]]: memref{{.*}}, %[[ENDS:.*]]: memref<?xi32>, %[[O:.*]]: memref
func.func @rope_over_a_cache(%q: !Q, %k: !K, %v: !V, %ends: memref<?xi32>, %o: !O) {
  // CHECK: %[[TQ:.*]] = memref.dim %[[Q]], %c2
  // CHECK: %[[RQ:.*]] = memref.alloc({{.*}}) : memref<?x4x?x32xf32>
  // CHECK-NOT: memref.alloc({{.*}}) : memref<?x2x?x32xf32>
  // CHECK: %[[OFFSET:.*]] = arith.subi %c0, %[[TQ]]
  // CHECK: attn.rope %[[Q]] into %[[RQ]] offset %[[OFFSET]] ends %[[ENDS]] {dims = 32 : i64, style = "half", theta = 1.000000e+04 : f64}
  // CHECK-NOT: attn.rope
  // CHECK: attn.online_update %[[RQ]], %[[K]], %[[V]] into
  %qt = bufferization.to_tensor %q restrict : !Q
  %kt = bufferization.to_tensor %k restrict : !K
  %vt = bufferization.to_tensor %v restrict : !V
  %et = bufferization.to_tensor %ends restrict : memref<?xi32>
  %out = attn.attention %qt, %kt, %vt query_ends(%et : tensor<?xi32>)
      {scale = 0.125 : f64, rope = "half", rope_dims = 32 : i64}
      : tensor<?x4x?x32xf32>, tensor<?x2x?x32xf32>, tensor<?x2x?x16xf32>
      -> tensor<?x4x?x16xf32>
  bufferization.materialize_in_destination %out in restrict writable %o
      : (tensor<?x4x?x16xf32>, !O) -> ()
  return
}

// Attention sinks: the [heads] buffer goes to the finalize, which folds each head's sink into its
// rows' state.
// CHECK-LABEL: func.func @sinks
// CHECK-SAME: (%[[Q:.*]]: memref<?x4x?x32xf32{{.*}}>, %[[K:.*]]: memref{{.*}}, %[[V:.*]]: memref{{.*}}, %[[S:.*]]: memref<4xf32>, %[[O:.*]]: memref
func.func @sinks(%q: !Q, %k: !K, %v: !V, %s: memref<4xf32>, %o: !O) {
  // CHECK: attn.online_finalize %{{.*}}, %{{.*}}, %{{.*}} into %[[O]] sinks(%[[S]] : memref<4xf32>)
  %qt = bufferization.to_tensor %q restrict : !Q
  %kt = bufferization.to_tensor %k restrict : !K
  %vt = bufferization.to_tensor %v restrict : !V
  %st = bufferization.to_tensor %s restrict : memref<4xf32>
  %out = attn.attention %qt, %kt, %vt sinks(%st : tensor<4xf32>) {scale = 0.125 : f64}
      : tensor<?x4x?x32xf32>, tensor<?x2x?x32xf32>, tensor<?x2x?x16xf32>
      -> tensor<?x4x?x16xf32>
  bufferization.materialize_in_destination %out in restrict writable %o
      : (tensor<?x4x?x16xf32>, !O) -> ()
  return
}
