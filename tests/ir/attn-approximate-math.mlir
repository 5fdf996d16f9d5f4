// RUN: attn-opt %s -attn-approximate-math | FileCheck %s
// exp, log and tanh become polynomials on the vector lanes, with no libm calls left.

// CHECK-LABEL: func.func @math
// CHECK-NOT: math.exp
// CHECK-NOT: math.log
// CHECK-NOT: math.tanh
// CHECK: arith.mulf {{.*}} : vector<16xf32>
func.func @math(%x: vector<16xf32>, %s: f32) -> (vector<16xf32>, f32, vector<16xf32>) {
  %e = math.exp %x : vector<16xf32>
  %l = math.log %s : f32
  %t = math.tanh %x : vector<16xf32>
  return %e, %l, %t : vector<16xf32>, f32, vector<16xf32>
}
