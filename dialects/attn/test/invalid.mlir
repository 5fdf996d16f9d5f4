// RUN: attn-opt %s -split-input-file -verify-diagnostics

func.func @heads_do_not_divide(%q: tensor<1x8x4x16xf32>, %k: tensor<1x3x4x16xf32>, %v: tensor<1x3x4x16xf32>) {
  // expected-error @+1 {{key/value heads 3 must divide query heads 8}}
  %o = attn.attention %q, %k, %v {scale = 0.25 : f64}
      : tensor<1x8x4x16xf32>, tensor<1x3x4x16xf32>, tensor<1x3x4x16xf32> -> tensor<1x8x4x16xf32>
  return
}

// -----

func.func @head_dims_differ(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x32xf32>, %v: tensor<1x2x4x32xf32>) {
  // expected-error @+1 {{query d_k 16 differs from key d_k 32}}
  %o = attn.attention %q, %k, %v {scale = 0.25 : f64}
      : tensor<1x2x4x16xf32>, tensor<1x2x4x32xf32>, tensor<1x2x4x32xf32> -> tensor<1x2x4x32xf32>
  return
}

// -----

func.func @bad_output(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{output must be [B, heads, Tq, d_v] of the query and value}}
  %o = attn.attention %q, %k, %v {scale = 0.25 : f64}
      : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x16xf32>
  return
}

// -----

func.func @bad_alignment(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x16xf32>) {
  // expected-error @+1 {{causal_align must be "bottom_right" or "top_left", got "middle"}}
  %o = attn.attention %q, %k, %v {causal_align = "middle", scale = 0.25 : f64}
      : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  return
}

// -----

func.func @bad_lse(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x16xf32>) {
  // expected-error @+1 {{lse must be [B, heads, Tq]}}
  %o, %lse = attn.attention %q, %k, %v {scale = 0.25 : f64}
      : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>
      -> tensor<1x2x4x16xf32>, tensor<1x2xf32>
  return
}

// -----

func.func @bad_sinks(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x16xf32>,
                     %s: tensor<3xf32>) {
  // expected-error @+1 {{sinks must be [heads] (2)}}
  %o = attn.attention %q, %k, %v sinks(%s : tensor<3xf32>) {scale = 0.25 : f64}
      : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
  return
}

// -----

func.func @additive_weights_shape(%q: tensor<1x4x4x16xf32>, %k: tensor<1x4x4x16xf32>,
                                  %v: tensor<1x2x4x8xf32>, %w: tensor<4x16xf32>) {
  // expected-error @+1 {{score_weights must be [H_kv, H / H_kv, d_k] with 4 query heads and d_k 16}}
  %o = attn.attention %q, %k, %v score_weights(%w : tensor<4x16xf32>) {scale = 1.0 : f64}
      : tensor<1x4x4x16xf32>, tensor<1x4x4x16xf32>, tensor<1x2x4x8xf32> -> tensor<1x4x4x8xf32>
  return
}

// -----

func.func @additive_key_heads(%q: tensor<1x4x4x16xf32>, %k: tensor<1x2x4x16xf32>,
                              %v: tensor<1x2x4x8xf32>, %w: tensor<2x2x16xf32>) {
  // expected-error @+1 {{with score_weights the key has one head per query head (4) and the value one per KV head (2)}}
  %o = attn.attention %q, %k, %v score_weights(%w : tensor<2x2x16xf32>) {scale = 1.0 : f64}
      : tensor<1x4x4x16xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x8xf32> -> tensor<1x4x4x8xf32>
  return
}

// -----

func.func @update_domain_rank(%q: memref<?x4x?x32xf32>, %k: memref<?x2x?x32xf32>,
                              %acc: memref<1x1x32x16xf32>, %m: memref<1x1x16xf32>, %i: index) {
  // expected-error @+1 {{needs 4 offsets and 4 sizes, got 3 and 4}}
  attn.online_update %q, %k, %k into %acc, %m, %m at [%i, %i, %i] sizes [%i, %i, %i, %i]
      seq_q %i {num_heads = 4 : i64, scale = 1.0 : f64}
      : memref<?x4x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>,
        memref<1x1x32x16xf32>, memref<1x1x16xf32>, memref<1x1x16xf32>
  return
}

// -----

func.func @update_gqa_heads(%q: memref<?x3x?x32xf32>, %k: memref<?x2x?x32xf32>,
                            %acc: memref<1x1x32x16xf32>, %m: memref<1x1x16xf32>, %i: index) {
  // expected-error @+1 {{num_heads 3 must be a multiple of the key heads 2}}
  attn.online_update %q, %k, %k into %acc, %m, %m at [%i, %i, %i, %i] sizes [%i, %i, %i, %i]
      seq_q %i {num_heads = 3 : i64, scale = 1.0 : f64}
      : memref<?x3x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x32xf32>,
        memref<1x1x32x16xf32>, memref<1x1x16xf32>, memref<1x1x16xf32>
  return
}

// -----

func.func @state_shapes(%acc: memref<1x1x32x16xf32>, %m: memref<1x1x8xf32>) {
  // expected-error @+1 {{acc [nb, nh, d_v, rows] and max/sum [nb, nh, rows] disagree}}
  attn.online_init %acc, %m, %m : memref<1x1x32x16xf32>, memref<1x1x8xf32>, memref<1x1x8xf32>
  return
}

// -----

func.func @pack_width(%q: memref<?x4x?x32xf32>, %p: memref<16x48xf32>, %i: index) {
  // expected-error @+1 {{packed tile must be [at least d_k = 32, rows]}}
  attn.pack_query %q[%i, %i, %i] rows %i into %p {scale = 1.0 : f64}
      : memref<?x4x?x32xf32>, memref<16x48xf32>
  return
}


// -----

func.func @mask_mod_yields_a_float(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x16xf32>) {
  // expected-error @+1 {{mask_mod must end in gpu.yield of one 'i1'}}
  %o = attn.attention %q, %k, %v {scale = 0.25 : f64}
      : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
      mask_mod {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %p: i32, %tq: i32, %tk: i32):
        gpu.yield %s : f32
      }
  return
}

// -----

func.func @dropout_yields_a_bool(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x16xf32>) {
  // expected-error @+1 {{dropout must end in gpu.yield of one 'f32'}}
  %o = attn.attention %q, %k, %v {scale = 0.25 : f64}
      : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
      dropout {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %p: i32, %tq: i32, %tk: i32):
        %t = arith.constant true
        gpu.yield %t : i1
      }
  return
}

// -----

func.func @score_mod_signature(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x16xf32>) {
  // expected-error @+1 {{score_mod takes (f32, i32 x 8): score, b, h, g, q_idx, kv_idx, qpos, Tq, Tk}}
  %o = attn.attention %q, %k, %v {scale = 0.25 : f64}
      : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
      score_mod {
      ^bb0(%s: f32):
        gpu.yield %s : f32
      }
  return
}

// -----

func.func @aux_load_rank(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x16xf32>,
                         %doc: tensor<1x4xi32>) {
  %o = attn.attention %q, %k, %v aux(%doc : tensor<1x4xi32>) {scale = 0.25 : f64}
      : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
      mask_mod {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %p: i32, %tq: i32, %tk: i32):
        // expected-error @+1 {{takes 2 indices for aux tensor 0, got 1}}
        %d = attn.aux_load 0 [%j] : i32
        %c = arith.cmpi eq, %d, %i : i32
        gpu.yield %c : i1
      }
  return
}

// -----

func.func @aux_load_missing(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf32>, %v: tensor<1x2x4x16xf32>) {
  %o = attn.attention %q, %k, %v {scale = 0.25 : f64}
      : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
      mask_mod {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %p: i32, %tq: i32, %tk: i32):
        // expected-error @+1 {{reads aux tensor 0 of an op that has 0}}
        %d = attn.aux_load 0 [%j] : i32
        %c = arith.cmpi eq, %d, %i : i32
        gpu.yield %c : i1
      }
  return
}

// -----

func.func @rope_style(%x: memref<?x2x?x8xf32>, %o: index) {
  // expected-error @+1 {{rope style must be "half" or "interleaved", got "odd"}}
  attn.rope %x into %x offset %o {style = "odd", theta = 1.0e4 : f64, dims = 8 : i64}
      : memref<?x2x?x8xf32>, memref<?x2x?x8xf32>
  return
}

// -----

func.func @query_ends_without_rope(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x6x16xf32>,
                                   %v: tensor<1x2x6x16xf32>, %ends: tensor<1xi32>) {
  // expected-error @+1 {{query_ends places the rotated queries; it needs rope}}
  %o = attn.attention %q, %k, %v query_ends(%ends : tensor<1xi32>) {scale = 0.25 : f64}
      : tensor<1x2x4x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32> -> tensor<1x2x4x16xf32>
  return
}

// -----

func.func @query_ends_rank(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x6x16xf32>,
                           %v: tensor<1x2x6x16xf32>, %ends: tensor<1x1xi32>) {
  // expected-error @+1 {{query_ends must be rank 1 ([B] i32), got rank 2}}
  %o = attn.attention %q, %k, %v query_ends(%ends : tensor<1x1xi32>)
      {scale = 0.25 : f64, rope = "half"}
      : tensor<1x2x4x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32> -> tensor<1x2x4x16xf32>
  return
}

// -----

func.func @rope_dims(%x: memref<?x2x?x8xf32>, %o: index) {
  // expected-error @+1 {{rope dims must be even and in [2, 8], got 5}}
  attn.rope %x into %x offset %o {style = "half", theta = 1.0e4 : f64, dims = 5 : i64}
      : memref<?x2x?x8xf32>, memref<?x2x?x8xf32>
  return
}

// -----

func.func @bad_weights(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x6x16xf32>, %v: tensor<1x2x6x16xf32>) {
  // expected-error @+1 {{weights must be [B, heads, Tq, Tk]}}
  %o, %w = attn.attention %q, %k, %v {scale = 0.25 : f64}
      : tensor<1x2x4x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x16xf32>
      -> tensor<1x2x4x16xf32> weights tensor<1x2x4x4xf32>
  return
}

// -----

func.func @weights_heads(%q: memref<?x4x?x32xf32>, %k: memref<?x2x?x32xf32>,
                         %w: memref<?x2x?x?xf32>, %i: index) {
  // expected-error @+1 {{weights [B, H, Tq, Tk] need num_heads heads}}
  attn.weights %q, %k into %w at [%i, %i, %i, %i] sizes [%i, %i, %i, %i] seq_q %i
      {num_heads = 4 : i64, scale = 1.0 : f64}
      : memref<?x4x?x32xf32>, memref<?x2x?x32xf32>, memref<?x2x?x?xf32>
  return
}

// -----

func.func @weights_sinks(%q: memref<?x4x?x32xf32>, %k: memref<?x2x?x32xf32>,
                         %sinks: memref<2xf32>, %w: memref<?x4x?x?xf32>, %i: index) {
  // expected-error @+1 {{sinks must have num_heads elements}}
  attn.weights %q, %k sinks(%sinks : memref<2xf32>) into %w at [%i, %i, %i, %i]
      sizes [%i, %i, %i, %i] seq_q %i {num_heads = 4 : i64, scale = 1.0 : f64}
      : memref<?x4x?x32xf32>, memref<?x2x?x32xf32>, memref<?x4x?x?xf32>
  return
}

// -----

func.func @aux_load_type(%q: tensor<1x2x4x16xbf16>, %k: tensor<1x2x4x16xbf16>, %v: tensor<1x2x4x16xbf16>,
                         %bias: tensor<1x2x4x4xbf16>) {
  %o = attn.attention %q, %k, %v aux(%bias : tensor<1x2x4x4xbf16>) {scale = 0.25 : f64}
      : tensor<1x2x4x16xbf16>, tensor<1x2x4x16xbf16>, tensor<1x2x4x16xbf16> -> tensor<1x2x4x16xbf16>
      score_mod {
      ^bb0(%s: f32, %b: i32, %h: i32, %g: i32, %i: i32, %j: i32, %p: i32, %tq: i32, %tk: i32):
        // expected-error @+1 {{result must be the aux tensor's element type, 'bf16'}}
        %x = attn.aux_load 0 [%b, %h, %i, %j] : f32
        %t = arith.addf %s, %x : f32
        gpu.yield %t : f32
      }
  return
}

// -----

func.func @finalize_bad_sinks(%acc: memref<1x1x16x8xf32>, %max: memref<1x1x8xf32>,
                              %sum: memref<1x1x8xf32>, %o: memref<?x4x?x16xf32>,
                              %s: memref<2xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{sinks must have one element per head of the output}}
  attn.online_finalize %acc, %max, %sum into %o sinks(%s : memref<2xf32>)
      at [%c0, %c0, %c0] sizes [%c1, %c1, %n]
      : memref<1x1x16x8xf32>, memref<1x1x8xf32>, memref<1x1x8xf32>, memref<?x4x?x16xf32>
  return
}

// -----

func.func @pages_without_lengths(%q: tensor<1x2x4x16xf32>, %k: tensor<3x2x4x16xf32>,
                                 %v: tensor<3x2x4x16xf32>, %t: tensor<1x2xi32>) {
  // expected-error @+1 {{a paged cache needs both block_table and seq_lens}}
  %o = "attn.attention"(%q, %k, %v, %t) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0>,
      resultSegmentSizes = array<i32: 1, 0, 0>, scale = 0.25 : f64}> ({}, {}, {})
      : (tensor<1x2x4x16xf32>, tensor<3x2x4x16xf32>, tensor<3x2x4x16xf32>, tensor<1x2xi32>)
      -> tensor<1x2x4x16xf32>
  return
}

// -----

func.func @int8_key_without_scales(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xi8>,
                                   %v: tensor<1x2x4x16xi8>) {
  // expected-error @+1 {{the key is int8 or fp8 E4M3 exactly when it has scales}}
  %o = attn.attention %q, %k, %v {scale = 0.25 : f64}
      : tensor<1x2x4x16xf32>, tensor<1x2x4x16xi8>, tensor<1x2x4x16xi8> -> tensor<1x2x4x16xf32>
  return
}

// -----

func.func @e5m2_key(%q: tensor<1x2x4x16xf32>, %k: tensor<1x2x4x16xf8E5M2>,
                    %v: tensor<1x2x4x16xf8E5M2>) {
  // expected-error @+1 {{the key's 8-bit floats must be f8E4M3FN}}
  %o = attn.attention %q, %k, %v {scale = 0.25 : f64}
      : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf8E5M2>, tensor<1x2x4x16xf8E5M2>
      -> tensor<1x2x4x16xf32>
  return
}

// -----

func.func @matmul_contraction(%a: memref<?x2x?x16xf32>, %b: memref<1x2x8x4xf32>,
                              %o: memref<?x2x?x4xf32>) {
  // expected-error @+1 {{lhs's steps and rhs's rows (the contraction) disagree}}
  attn.matmul %a, %b into %o : memref<?x2x?x16xf32>, memref<1x2x8x4xf32>, memref<?x2x?x4xf32>
  return
}

// -----

func.func @matmul_heads(%a: memref<?x3x?x16xf32>, %b: memref<1x2x16x4xf32>,
                        %o: memref<?x2x?x4xf32>) {
  // expected-error @+1 {{lhs's heads (3) must be static and divide out's (2)}}
  attn.matmul %a, %b into %o : memref<?x3x?x16xf32>, memref<1x2x16x4xf32>, memref<?x2x?x4xf32>
  return
}

// -----

func.func @matmul_columns(%a: memref<?x2x?x16xf32>, %b: memref<1x2x16x?xf32>,
                          %o: memref<?x2x?x?xf32>) {
  // expected-error @+1 {{rhs and out must have the same static columns}}
  attn.matmul %a, %b into %o : memref<?x2x?x16xf32>, memref<1x2x16x?xf32>, memref<?x2x?x?xf32>
  return
}

// -----

func.func @matmul_batch_sum_out(%a: memref<?x1x?x16xf32>, %b: memref<?x1x?x4xf32>,
                                %o: memref<?x1x16x4xf32>) {
  // expected-error @+1 {{batch_sum sums over the factors' batches into out's batch of 1}}
  attn.matmul %a, %b into %o {lhs_transposed, batch_sum}
      : memref<?x1x?x16xf32>, memref<?x1x?x4xf32>, memref<?x1x16x4xf32>
  return
}

// -----

func.func @matmul_batch_sum_batches(%a: memref<2x1x?x16xf32>, %b: memref<3x1x?x4xf32>,
                                    %o: memref<1x1x16x4xf32>) {
  // expected-error @+1 {{batch_sum: lhs's and rhs's batches must agree (none broadcast)}}
  attn.matmul %a, %b into %o {lhs_transposed, batch_sum}
      : memref<2x1x?x16xf32>, memref<3x1x?x4xf32>, memref<1x1x16x4xf32>
  return
}

// -----

func.func @matmul_batch_sum_broadcast(%a: memref<1x1x?x16xf32>, %b: memref<?x1x?x4xf32>,
                                      %o: memref<1x1x16x4xf32>) {
  // expected-error @+1 {{batch_sum: lhs's and rhs's batches must agree (none broadcast)}}
  attn.matmul %a, %b into %o {lhs_transposed, batch_sum}
      : memref<1x1x?x16xf32>, memref<?x1x?x4xf32>, memref<1x1x16x4xf32>
  return
}

// -----

func.func @matmul_transposed_causal(%a: memref<?x1x8x16xf32>, %b: memref<?x1x8x4xf32>,
                                    %o: memref<?x1x16x4xf32>) {
  // expected-error @+1 {{causal compares a step with a row: lhs's steps and out's rows must agree}}
  attn.matmul %a, %b into %o {lhs_transposed, causal}
      : memref<?x1x8x16xf32>, memref<?x1x8x4xf32>, memref<?x1x16x4xf32>
  return
}

// -----

func.func @matmul_transposed_rows(%a: memref<?x1x?x16xf32>, %b: memref<?x1x?x4xf32>,
                                  %o: memref<1x1x8x4xf32>) {
  // expected-error @+1 {{lhs and out must have the same rows}}
  attn.matmul %a, %b into %o {lhs_transposed, batch_sum}
      : memref<?x1x?x16xf32>, memref<?x1x?x4xf32>, memref<1x1x8x4xf32>
  return
}

// -----

func.func @matmul_sinusoid(%a: memref<?x1x?x15xf32>, %b: memref<1x1x15x4xf32>,
                           %o: memref<?x1x?x4xf32>, %p: index) {
  // expected-error @+1 {{the sinusoidal encoding needs lhs's last dim static and even}}
  attn.matmul %a, %b into %o sinusoid %p
      : memref<?x1x?x15xf32>, memref<1x1x15x4xf32>, memref<?x1x?x4xf32>
  return
}

// -----

func.func @feature_rows_map(%x: memref<?x2x?x16xf32>, %o: memref<?x2x64x16xf32>, %f: index) {
  // expected-error @+1 {{map must be elu1, relu or value, not tanh}}
  attn.feature_rows %x into %o rows from %f {map = "tanh"} : memref<?x2x?x16xf32>, memref<?x2x64x16xf32>
  return
}

// -----

func.func @feature_rows_value_width(%x: memref<?x2x?x16xf32>, %o: memref<?x2x64x16xf32>, %f: index) {
  // expected-error @+1 {{map value appends a 1 to the row's 16 dims, out has 16}}
  attn.feature_rows %x into %o rows from %f {map = "value"} : memref<?x2x?x16xf32>, memref<?x2x64x16xf32>
  return
}

// -----

func.func @favor_rows(%r: memref<?x2x64x1xf32>, %p: memref<?x2x64x8xf32>) {
  // expected-error @+1 {{rows must hold a row and its existence flag (at least 2 dims)}}
  attn.favor_features %r, %p into %p {scale = 1.0 : f64}
      : memref<?x2x64x1xf32>, memref<?x2x64x8xf32>, memref<?x2x64x8xf32>
  return
}

// -----

func.func @chunk_prefix_shapes(%s: memref<?x2x16x17xf32>, %i: memref<?x2x16x9xf32>) {
  // expected-error @+1 {{sums and initial must have the same heads, rows and columns}}
  attn.chunk_prefix %s from %i : memref<?x2x16x17xf32>, memref<?x2x16x9xf32>
  return
}

// -----

func.func @normalize_columns(%t: memref<?x2x64x17xf32>, %o: memref<?x2x?x17xf32>) {
  // expected-error @+1 {{out's rows must be total's without its last column (the denominator)}}
  attn.normalize_rows %t into %o : memref<?x2x64x17xf32>, memref<?x2x?x17xf32>
  return
}

// -----

func.func @linear_weights_heads(%q: memref<?x4x64x16xf32>, %k: memref<?x3x?x16xf32>,
                                %t: memref<?x4x64x17xf32>, %w: memref<?x4x?x?xf32>) {
  // expected-error @+1 {{keys' heads (3) must be static and divide the queries' (4)}}
  attn.linear_weights %q, %k, %t into %w
      : memref<?x4x64x16xf32>, memref<?x3x?x16xf32>, memref<?x4x64x17xf32>, memref<?x4x?x?xf32>
  return
}

// -----

func.func @feature_rows_dynamic_dims(%x: memref<?x2x?x?xf32>, %o: memref<?x2x64x16xf32>, %f: index) {
  // expected-error @+1 {{x must have static, positive heads and columns}}
  attn.feature_rows %x into %o rows from %f {map = "elu1"} : memref<?x2x?x?xf32>, memref<?x2x64x16xf32>
  return
}

// -----

func.func @linear_weights_keys(%q: memref<?x4x64x16xf32>, %k: memref<?x2x30x16xf32>,
                               %t: memref<?x4x64x17xf32>, %w: memref<?x4x?x31xf32>) {
  // expected-error @+1 {{out must have a column per key}}
  attn.linear_weights %q, %k, %t into %w
      : memref<?x4x64x16xf32>, memref<?x2x30x16xf32>, memref<?x4x64x17xf32>, memref<?x4x?x31xf32>
  return
}

// -----

func.func @matmul_causal_steps(%a: memref<?x2x64x32xf32>, %b: memref<?x2x32x8xf32>,
                               %o: memref<?x2x64x8xf32>) {
  // expected-error @+1 {{causal compares a step with a row: lhs's steps and out's rows must agree}}
  attn.matmul %a, %b into %o {causal} : memref<?x2x64x32xf32>, memref<?x2x32x8xf32>, memref<?x2x64x8xf32>
  return
}

// -----

func.func @backward_gradient_shape(%q: memref<?x4x?x16xf32>, %k: memref<?x2x?x16xf32>,
                                   %v: memref<?x2x?x8xf32>, %o: memref<?x4x?x8xf32>,
                                   %lse: memref<?x4x?xf32>, %dk: memref<?x2x?x8xf32>,
                                   %n: index) {
  // expected-error @+1 {{each gradient must have its tensor's shape}}
  attn.backward %q, %k, %v, %o, %o, %lse into %q, %dk, %v
      at [%n, %n, %n, %n] sizes [%n, %n, %n, %n] seq_q %n {num_heads = 4 : i64, scale = 0.25 : f64}
      : memref<?x4x?x16xf32>, memref<?x2x?x16xf32>, memref<?x2x?x8xf32>, memref<?x4x?x8xf32>,
        memref<?x4x?x8xf32>, memref<?x4x?xf32>, memref<?x4x?x16xf32>, memref<?x2x?x8xf32>,
        memref<?x2x?x8xf32>
  return
}

// -----

func.func @backward_score_grad_alone(%q: memref<?x4x?x16xf32>, %k: memref<?x2x?x16xf32>,
                                     %v: memref<?x2x?x8xf32>, %o: memref<?x4x?x8xf32>,
                                     %lse: memref<?x4x?xf32>, %n: index) {
  // expected-error @+1 {{score_grad is the derivative of score_mod, which is empty}}
  attn.backward %q, %k, %v, %o, %o, %lse into %q, %k, %v
      at [%n, %n, %n, %n] sizes [%n, %n, %n, %n] seq_q %n {num_heads = 4 : i64, scale = 0.25 : f64}
      : memref<?x4x?x16xf32>, memref<?x2x?x16xf32>, memref<?x2x?x8xf32>, memref<?x4x?x8xf32>,
        memref<?x4x?x8xf32>, memref<?x4x?xf32>, memref<?x4x?x16xf32>, memref<?x2x?x16xf32>,
        memref<?x2x?x8xf32>
      score_grad {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        gpu.yield %s : f32
      }
  return
}

// -----

func.func @backward_aux_grad_yields(%q: memref<?x4x?x16xf32>, %k: memref<?x2x?x16xf32>,
                                    %v: memref<?x2x?x8xf32>, %o: memref<?x4x?x8xf32>,
                                    %lse: memref<?x4x?xf32>, %drel: memref<4x9xf32>, %n: index) {
  // expected-error @+1 {{aux_grad must yield, per read, its i32 indices and an f32 partial}}
  attn.backward %q, %k, %v, %o, %o, %lse into %q, %k, %v aux_grads(%drel : memref<4x9xf32>)
      at [%n, %n, %n, %n] sizes [%n, %n, %n, %n] seq_q %n
      {num_heads = 4 : i64, scale = 0.25 : f64, aux_grad_targets = array<i64: 0>}
      : memref<?x4x?x16xf32>, memref<?x2x?x16xf32>, memref<?x2x?x8xf32>, memref<?x4x?x8xf32>,
        memref<?x4x?x8xf32>, memref<?x4x?xf32>, memref<?x4x?x16xf32>, memref<?x2x?x16xf32>,
        memref<?x2x?x8xf32>
      aux_grad {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        gpu.yield %h, %s : i32, f32
      }
  return
}
