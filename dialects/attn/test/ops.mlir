// RUN: attn-opt %s | attn-opt | FileCheck %s
// Round trip: printing and parsing again gives the same ops.

// CHECK-LABEL: func.func @sdpa_causal_gqa
// The causal mask as the mask_mod region (kv_idx <= qpos).
func.func @sdpa_causal_gqa(%q: tensor<2x8x?x64xf32>, %k: tensor<2x2x?x64xf32>,
                           %v: tensor<2x2x?x64xf32>) -> tensor<2x8x?x64xf32> {
  // CHECK: %[[O:.*]] = attn.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64}
  // CHECK-SAME: -> tensor<2x8x?x64xf32>
  // CHECK: mask_mod {
  // CHECK: arith.cmpi sle
  %o = attn.attention %q, %k, %v {scale = 0.125 : f64}
      : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x64xf32> -> tensor<2x8x?x64xf32>
      mask_mod {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %p: i32, %tq: i32, %tk: i32):
        %causal = arith.cmpi sle, %j, %p : i32
        gpu.yield %causal : i1
      }
  // CHECK: return %[[O]]
  return %o : tensor<2x8x?x64xf32>
}

// CHECK-LABEL: func.func @additive_gqa
// Bahdanau's score: the hidden query and key rows per query head (8), the values per KV head
// (2), the weights grouped by KV head.
func.func @additive_gqa(%q: tensor<2x8x?x32xf32>, %k: tensor<2x8x?x32xf32>,
                        %v: tensor<2x2x?x64xf32>, %w: tensor<2x4x32xbf16>,
                        %wm: memref<2x4x32xbf16>, %qm: memref<?x8x?x32xf32>,
                        %km: memref<?x8x?x32xf32>, %vm: memref<?x2x?x64xf32>,
                        %acc: memref<1x1x64x16xf32>, %m: memref<1x1x16xf32>, %i: index)
    -> tensor<2x8x?x64xf32> {
  // CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} score_weights(%{{.*}} : tensor<2x4x32xbf16>) {scale = 1.000000e+00 : f64}
  %o = attn.attention %q, %k, %v score_weights(%w : tensor<2x4x32xbf16>) {scale = 1.0 : f64}
      : tensor<2x8x?x32xf32>, tensor<2x8x?x32xf32>, tensor<2x2x?x64xf32> -> tensor<2x8x?x64xf32>
  // CHECK: attn.online_update %{{.*}}, %{{.*}}, %{{.*}} score_weights(%{{.*}} : memref<2x4x32xbf16>) into
  attn.online_update %qm, %km, %vm score_weights(%wm : memref<2x4x32xbf16>) into %acc, %m, %m
      at [%i, %i, %i, %i] sizes [%i, %i, %i, %i] seq_q %i {num_heads = 8 : i64, scale = 1.0 : f64}
      : memref<?x8x?x32xf32>, memref<?x8x?x32xf32>, memref<?x2x?x64xf32>,
        memref<1x1x64x16xf32>, memref<1x1x16xf32>, memref<1x1x16xf32>
  return %o : tensor<2x8x?x64xf32>
}

// CHECK-LABEL: func.func @padding_window_bias_lse
// The kernel inputs the built-ins read are aux operands: the key lengths (padding) that
// mask_mod reads beside a window, and a bias in the spec's dtype (bf16) that score_mod reads and
// widens.
func.func @padding_window_bias_lse(%q: tensor<?x4x?x32xbf16>, %k: tensor<?x4x?x32xbf16>,
                                   %v: tensor<?x4x?x16xbf16>, %len: tensor<?xi32>,
                                   %bias: tensor<1x4x?x?xbf16>)
    -> (tensor<?x4x?x16xbf16>, tensor<?x4x?xf32>) {
  // CHECK: attn.attention {{.*}} aux(%{{.*}}, %{{.*}} : tensor<?xi32>, tensor<1x4x?x?xbf16>)
  // CHECK-SAME: causal_align = "top_left"
  // CHECK-SAME: -> tensor<?x4x?x16xbf16>, tensor<?x4x?xf32>
  // CHECK: attn.aux_load 1[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : bf16
  // CHECK: mask_mod {
  // CHECK: attn.aux_load 0[%{{.*}}] : i32
  %o, %lse = attn.attention %q, %k, %v aux(%len, %bias : tensor<?xi32>, tensor<1x4x?x?xbf16>)
      {scale = 1.0 : f64, causal_align = "top_left"}
      : tensor<?x4x?x32xbf16>, tensor<?x4x?x32xbf16>, tensor<?x4x?x16xbf16>
      -> tensor<?x4x?x16xbf16>, tensor<?x4x?xf32>
      score_mod {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %p: i32, %tq: i32, %tk: i32):
        %stored = attn.aux_load 1 [%b, %h, %i, %j] : bf16
        %wide = arith.extf %stored : bf16 to f32
        %t = arith.addf %s, %wide : f32
        gpu.yield %t : f32
      } mask_mod {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %p: i32, %tq: i32, %tk: i32):
        %length = attn.aux_load 0 [%b] : i32
        %padding = arith.cmpi slt, %j, %length : i32
        %c16 = arith.constant 16 : i32
        %left = arith.subi %p, %c16 : i32
        %inWindow = arith.cmpi sge, %j, %left : i32
        %notAfter = arith.cmpi sle, %j, %p : i32
        %window = arith.andi %inWindow, %notAfter : i1
        %keep = arith.andi %padding, %window : i1
        gpu.yield %keep : i1
      }
  return %o, %lse : tensor<?x4x?x16xbf16>, tensor<?x4x?xf32>
}

// The weights as a second result, and the op that computes them on buffers, with a head's sink
// and a mask_mod region over an aux tensor.
// CHECK-LABEL: func.func @weights
func.func @weights(%q: tensor<?x4x?x32xf32>, %k: tensor<?x2x?x32xf32>, %v: tensor<?x2x?x16xf32>,
                   %qb: memref<?x4x?x32xf32>, %kb: memref<?x2x?x32xf32>,
                   %sinks: memref<4xf32>, %w: memref<?x4x?x?xf32>, %doc: memref<?xi32>,
                   %n: index) -> tensor<?x4x?x?xf32> {
  // CHECK: attn.attention {{.*}} -> tensor<?x4x?x16xf32> weights tensor<?x4x?x?xf32>
  %o, %p = attn.attention %q, %k, %v {scale = 0.125 : f64}
      : tensor<?x4x?x32xf32>, tensor<?x2x?x32xf32>, tensor<?x2x?x16xf32>
      -> tensor<?x4x?x16xf32> weights tensor<?x4x?x?xf32>
  // CHECK: attn.weights %{{.*}}, %{{.*}} aux(%{{.*}} : memref<?xi32>) sinks(%{{.*}} : memref<4xf32>) into %{{.*}} at[{{.*}}] sizes[{{.*}}] seq_q %{{.*}} {num_heads = 4 : i64, scale = 1.250000e-01 : f64}
  // CHECK-SAME: : memref<?x4x?x32xf32>, memref<?x2x?x32xf32>, memref<?x4x?x?xf32>
  // CHECK: mask_mod {
  // CHECK: attn.aux_load 0[%{{.*}}] : i32
  attn.weights %qb, %kb aux(%doc : memref<?xi32>) sinks(%sinks : memref<4xf32>) into %w
      at [%n, %n, %n, %n] sizes [%n, %n, %n, %n] seq_q %n {num_heads = 4 : i64, scale = 0.125 : f64}
      : memref<?x4x?x32xf32>, memref<?x2x?x32xf32>, memref<?x4x?x?xf32>
      mask_mod {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %pos: i32, %tq: i32, %tk: i32):
        %d = attn.aux_load 0 [%j] : i32
        %keep = arith.cmpi ne, %d, %b : i32
        gpu.yield %keep : i1
      }
  return %p : tensor<?x4x?x?xf32>
}

// The backward on buffers: sinks with their gradient, and the regions score_mod, score_grad
// (its derivative) and dropout.
// CHECK-LABEL: func.func @backward
func.func @backward(%q: memref<?x4x?x16xf32>, %k: memref<?x2x?x16xf32>, %v: memref<?x2x?x8xf32>,
                    %o: memref<?x4x?x8xf32>, %lse: memref<?x4x?xf32>, %sinks: memref<4xf32>,
                    %dsinks: memref<4xf32>, %n: index) {
  // CHECK: attn.backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} sinks(%{{.*}} : memref<4xf32>) into %{{.*}}, %{{.*}}, %{{.*}} grad_sinks(%{{.*}} : memref<4xf32>)
  // CHECK: score_mod {
  // CHECK: score_grad {
  // CHECK: dropout {
  attn.backward %q, %k, %v, %o, %o, %lse sinks(%sinks : memref<4xf32>) into %q, %k, %v
      grad_sinks(%dsinks : memref<4xf32>)
      at [%n, %n, %n, %n] sizes [%n, %n, %n, %n] seq_q %n {num_heads = 4 : i64, scale = 0.25 : f64}
      : memref<?x4x?x16xf32>, memref<?x2x?x16xf32>, memref<?x2x?x8xf32>, memref<?x4x?x8xf32>,
        memref<?x4x?x8xf32>, memref<?x4x?xf32>, memref<?x4x?x16xf32>, memref<?x2x?x16xf32>,
        memref<?x2x?x8xf32>
      score_mod {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %pos: i32, %tq: i32, %tk: i32):
        %t = math.tanh %s : f32
        gpu.yield %t : f32
      }
      score_grad {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %pos: i32, %tq: i32, %tk: i32):
        %t = math.tanh %s : f32
        %t2 = arith.mulf %t, %t : f32
        %one = arith.constant 1.0 : f32
        %d = arith.subf %one, %t2 : f32
        gpu.yield %d : f32
      }
      dropout {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %pos: i32, %tq: i32, %tk: i32):
        %two = arith.constant 2.0 : f32
        gpu.yield %two : f32
      }
  return
}

// The gradient of a float aux table: aux_grad yields the read's index and its partial.
// CHECK-LABEL: func.func @backward_aux
func.func @backward_aux(%q: memref<?x4x?x16xf32>, %k: memref<?x2x?x16xf32>,
                        %v: memref<?x2x?x8xf32>, %o: memref<?x4x?x8xf32>,
                        %lse: memref<?x4x?xf32>, %rel: memref<4xf32>, %drel: memref<4xf32>,
                        %n: index) {
  // CHECK: attn.backward {{.*}} aux_grads(%{{.*}} : memref<4xf32>) at
  // CHECK-SAME: aux_grad_targets = array<i64: 0>
  // CHECK: aux_grad {
  attn.backward %q, %k, %v, %o, %o, %lse aux(%rel : memref<4xf32>) into %q, %k, %v
      aux_grads(%drel : memref<4xf32>)
      at [%n, %n, %n, %n] sizes [%n, %n, %n, %n] seq_q %n
      {num_heads = 4 : i64, scale = 0.25 : f64, aux_grad_targets = array<i64: 0>}
      : memref<?x4x?x16xf32>, memref<?x2x?x16xf32>, memref<?x2x?x8xf32>, memref<?x4x?x8xf32>,
        memref<?x4x?x8xf32>, memref<?x4x?xf32>, memref<?x4x?x16xf32>, memref<?x2x?x16xf32>,
        memref<?x2x?x8xf32>
      score_mod {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %pos: i32, %tq: i32, %tk: i32):
        %r = attn.aux_load 0 [%h] : f32
        %t = arith.addf %s, %r : f32
        gpu.yield %t : f32
      }
      aux_grad {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %pos: i32, %tq: i32, %tk: i32):
        %one = arith.constant 1.0 : f32
        gpu.yield %h, %one : i32, f32
      }
  return
}

// A document mask and a score_mod as regions over the op's aux tensors.
// CHECK-LABEL: func.func @expressions
func.func @expressions(%q: tensor<?x2x?x16xf32>, %k: tensor<?x2x?x16xf32>,
                       %v: tensor<?x2x?x16xf32>, %doc: tensor<?x?xi32>, %rel: tensor<2x9xf32>)
    -> tensor<?x2x?x16xf32> {
  // CHECK: attn.attention {{.*}} aux(%{{.*}}, %{{.*}} : tensor<?x?xi32>, tensor<2x9xf32>)
  // CHECK: score_mod {
  // CHECK: attn.aux_load 1[%{{.*}}, %{{.*}}] : f32
  // CHECK: gpu.yield %{{.*}} : f32
  // CHECK: mask_mod {
  // CHECK: attn.aux_load 0[%{{.*}}, %{{.*}}] : i32
  // CHECK: gpu.yield %{{.*}} : i1
  %o = attn.attention %q, %k, %v aux(%doc, %rel : tensor<?x?xi32>, tensor<2x9xf32>)
      {scale = 0.25 : f64}
      : tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32> -> tensor<?x2x?x16xf32>
      score_mod {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %p: i32, %tq: i32, %tk: i32):
        %c0 = arith.constant 0 : i32
        %bias = attn.aux_load 1 [%h, %c0] : f32
        %t = arith.addf %s, %bias : f32
        gpu.yield %t : f32
      } mask_mod {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %p: i32, %tq: i32, %tk: i32):
        %qd = attn.aux_load 0 [%b, %i] : i32
        %kd = attn.aux_load 0 [%b, %j] : i32
        %same = arith.cmpi eq, %qd, %kd : i32
        gpu.yield %same : i1
      }
  return %o : tensor<?x2x?x16xf32>
}

// Dropout's factor as a region: 2 where a key's parity keeps it, else 0.
// CHECK-LABEL: func.func @dropout_factor
func.func @dropout_factor(%q: tensor<?x2x?x16xf32>, %k: tensor<?x2x?x16xf32>,
                          %v: tensor<?x2x?x16xf32>) -> tensor<?x2x?x16xf32> {
  // CHECK: dropout {
  // CHECK: gpu.yield %{{.*}} : f32
  %o = attn.attention %q, %k, %v {scale = 0.25 : f64}
      : tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32> -> tensor<?x2x?x16xf32>
      dropout {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %p: i32, %tq: i32, %tk: i32):
        %c1 = arith.constant 1 : i32
        %c0 = arith.constant 0 : i32
        %two = arith.constant 2.0 : f32
        %zero = arith.constant 0.0 : f32
        %bit = arith.andi %j, %c1 : i32
        %even = arith.cmpi eq, %bit, %c0 : i32
        %f = arith.select %even, %two, %zero : f32
        gpu.yield %f : f32
      }
  return %o : tensor<?x2x?x16xf32>
}

// block_sparse as a mask region: the u8 layout is an i8 aux tensor, read unsigned.
// CHECK-LABEL: func.func @byte_layout
func.func @byte_layout(%q: tensor<?x2x?x16xf32>, %k: tensor<?x2x?x16xf32>,
                       %v: tensor<?x2x?x16xf32>, %layout: tensor<?x?x?xi8>)
    -> tensor<?x2x?x16xf32> {
  // CHECK: attn.aux_load 0[%{{.*}}, %{{.*}}, %{{.*}}] : i8
  // CHECK: arith.extui %{{.*}} : i8 to i32
  %o = attn.attention %q, %k, %v aux(%layout : tensor<?x?x?xi8>)
      {scale = 0.25 : f64}
      : tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32> -> tensor<?x2x?x16xf32>
      mask_mod {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %p: i32, %tq: i32, %tk: i32):
        %c64 = arith.constant 64 : i32
        %c0 = arith.constant 0 : i32
        %qb = arith.divsi %i, %c64 : i32
        %kb = arith.divsi %j, %c64 : i32
        %byte = attn.aux_load 0 [%h, %qb, %kb] : i8
        %word = arith.extui %byte : i8 to i32
        %live = arith.cmpi ne, %word, %c0 : i32
        gpu.yield %live : i1
      }
  return %o : tensor<?x2x?x16xf32>
}

// attn.matmul: a product into a buffer, a factor's batch of 1 and fewer heads broadcast; with
// a limit on the contraction (Linformer's padding) and mha's sinusoid on lhs.
// CHECK-LABEL: func.func @matmul
// CHECK: attn.matmul %{{.*}}, %{{.*}} into %{{.*}} : memref<?x8x?x64xf32>, memref<1x8x64x32xbf16>, memref<?x8x?x32xf32>
// CHECK: attn.matmul %{{.*}}, %{{.*}} into %{{.*}} limit %{{.*}} : memref<1x2x16x?xf32>, memref<?x2x?x64xf32>, memref<?x2x16x64xf32>, memref<?xi32>
// CHECK: attn.matmul %{{.*}}, %{{.*}} into %{{.*}} sinusoid %{{.*}} : memref<?x1x?x64xf32>, memref<1x1x64x128xf32>, memref<?x1x?x128xf32>
func.func @matmul(%q: memref<?x8x?x64xf32>, %w: memref<1x8x64x32xbf16>, %qw: memref<?x8x?x32xf32>,
                  %e: memref<1x2x16x?xf32>, %k: memref<?x2x?x64xf32>, %ek: memref<?x2x16x64xf32>,
                  %lengths: memref<?xi32>, %x: memref<?x1x?x64xf32>, %wq: memref<1x1x64x128xf32>,
                  %xw: memref<?x1x?x128xf32>, %offset: index) {
  attn.matmul %q, %w into %qw : memref<?x8x?x64xf32>, memref<1x8x64x32xbf16>, memref<?x8x?x32xf32>
  attn.matmul %e, %k into %ek limit %lengths
      : memref<1x2x16x?xf32>, memref<?x2x?x64xf32>, memref<?x2x16x64xf32>, memref<?xi32>
  attn.matmul %x, %wq into %xw sinusoid %offset
      : memref<?x1x?x64xf32>, memref<1x1x64x128xf32>, memref<?x1x?x128xf32>
  return
}

// Linear attention's ops: feature rows (a chunked destination, rows from an offset, a length
// limit), FAVOR+'s features in place, the prefix over chunks, the output and the weights; the
// chunk products as attn.matmul with causal and accumulate.
// CHECK-LABEL: func.func @linear
// CHECK: attn.feature_rows %{{.*}} into %{{.*}} rows from %{{.*}} limit %{{.*}} {map = "elu1"} : memref<?x2x?x16xbf16>, memref<?x2x64x16xf32>, memref<?xi32>
// CHECK: attn.feature_rows %{{.*}} into %{{.*}} rows from %{{.*}} {map = "value"} : memref<?x2x?x16xbf16>, memref<?x2x64x17xf32>
// CHECK: attn.favor_features %{{.*}}, %{{.*}} into %{{.*}} {scale = 2.500000e-01 : f64}
// CHECK: attn.chunk_prefix %{{.*}} from %{{.*}} : memref<?x2x16x17xf32>, memref<?x2x16x17xf32>
// CHECK: attn.matmul %{{.*}}, %{{.*}} into %{{.*}} {accumulate, causal}
// CHECK: attn.normalize_rows %{{.*}} into %{{.*}} : memref<?x2x64x17xf32>, memref<?x2x?x16xbf16>
// CHECK: attn.linear_weights %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} causal_offset %{{.*}} :
func.func @linear(%k: memref<?x2x?x16xbf16>, %phi: memref<?x2x64x16xf32>, %rows: memref<?x2x64x17xf32>,
                  %lengths: memref<?xi32>, %projected: memref<?x2x64x32xf32>,
                  %sums: memref<?x2x16x17xf32>, %head: memref<?x2x16x17xf32>,
                  %scores: memref<?x2x64x64xf32>, %o: memref<?x2x?x16xbf16>,
                  %keys: memref<?x2x?x16xf32>, %w: memref<?x2x?x?xf32>, %offset: index) {
  attn.feature_rows %k into %phi rows from %offset limit %lengths {map = "elu1"}
      : memref<?x2x?x16xbf16>, memref<?x2x64x16xf32>, memref<?xi32>
  attn.feature_rows %k into %rows rows from %offset {map = "value"}
      : memref<?x2x?x16xbf16>, memref<?x2x64x17xf32>
  attn.favor_features %rows, %projected into %projected {scale = 0.25 : f64}
      : memref<?x2x64x17xf32>, memref<?x2x64x32xf32>, memref<?x2x64x32xf32>
  attn.chunk_prefix %sums from %head : memref<?x2x16x17xf32>, memref<?x2x16x17xf32>
  attn.matmul %scores, %rows into %rows {accumulate, causal}
      : memref<?x2x64x64xf32>, memref<?x2x64x17xf32>, memref<?x2x64x17xf32>
  attn.normalize_rows %rows into %o : memref<?x2x64x17xf32>, memref<?x2x?x16xbf16>
  attn.linear_weights %phi, %keys, %rows into %w causal_offset %offset
      : memref<?x2x64x16xf32>, memref<?x2x?x16xf32>, memref<?x2x64x17xf32>, memref<?x2x?x?xf32>
  return
}
