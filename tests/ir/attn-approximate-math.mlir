// RUN: attn-opt %s -attn-approximate-math | FileCheck %s
// RUN: attn-opt %s -attn-approximate-math=no-libdevice | FileCheck %s --check-prefix=NVVM
// exp, log and tanh become polynomials on the vector lanes, with no libm calls left; for NVVM
// the floor and fabs inside them become conversions and bit masks (no libdevice calls).

// NVVM-LABEL: func.func @math
// NVVM-NOT: math.floor
// NVVM-NOT: math.absf
// NVVM: arith.andi {{.*}} : vector<16xi32>

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
