// RUN: attn-opt %s | attn-opt | FileCheck %s
// Round trip: printing and parsing again gives the same ops.

// CHECK-LABEL: func.func @sdpa_causal_gqa
func.func @sdpa_causal_gqa(%q: tensor<2x8x?x64xf32>, %k: tensor<2x2x?x64xf32>,
                           %v: tensor<2x2x?x64xf32>) -> tensor<2x8x?x64xf32> {
  // CHECK: %[[O:.*]] = attn.attention %{{.*}}, %{{.*}}, %{{.*}} {masks = ["causal"], scale = 1.250000e-01 : f64}
  // CHECK-SAME: -> tensor<2x8x?x64xf32>
  %o = attn.attention %q, %k, %v {masks = ["causal"], scale = 0.125 : f64}
      : tensor<2x8x?x64xf32>, tensor<2x2x?x64xf32>, tensor<2x2x?x64xf32> -> tensor<2x8x?x64xf32>
  // CHECK: return %[[O]]
  return %o : tensor<2x8x?x64xf32>
}

// CHECK-LABEL: func.func @padding_window_bias_lse
func.func @padding_window_bias_lse(%q: tensor<?x4x?x32xbf16>, %k: tensor<?x4x?x32xbf16>,
                                   %v: tensor<?x4x?x16xbf16>, %len: tensor<?xi32>,
                                   %bias: tensor<1x4x?x?xbf16>)
    -> (tensor<?x4x?x16xbf16>, tensor<?x4x?xf32>) {
  // CHECK: attn.attention {{.*}} lengths(%{{.*}} : tensor<?xi32>) bias(%{{.*}} : tensor<1x4x?x?xbf16>)
  // CHECK-SAME: alibi
  // CHECK-SAME: causal_align = "top_left"
  // CHECK-SAME: window_left = 16
  // CHECK-SAME: -> tensor<?x4x?x16xbf16>, tensor<?x4x?xf32>
  %o, %lse = attn.attention %q, %k, %v lengths(%len : tensor<?xi32>) bias(%bias : tensor<1x4x?x?xbf16>)
      {masks = ["padding", "window"], window_left = 16, scale = 1.0 : f64, softcap = 30.0 : f64,
       alibi, causal_align = "top_left"}
      : tensor<?x4x?x32xbf16>, tensor<?x4x?x32xbf16>, tensor<?x4x?x16xbf16>
      -> tensor<?x4x?x16xbf16>, tensor<?x4x?xf32>
  return %o, %lse : tensor<?x4x?x16xbf16>, tensor<?x4x?xf32>
}
