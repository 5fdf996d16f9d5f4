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

// The polynomial e^x converts x log2 e to an int, which LLVM makes poison for a NaN x: a
// select passes NaN on.
// CHECK-LABEL: func.func @exp_of_nan(
// CHECK-SAME: %[[X:.*]]: vector<16xf32>
// CHECK: %[[NAN:.*]] = arith.cmpf uno, %[[X]], %[[X]] : vector<16xf32>
// CHECK: %[[E:.*]] = arith.select %[[NAN]], %[[X]], %{{.*}} : vector<16xi1>, vector<16xf32>
// CHECK: return %[[E]]
func.func @exp_of_nan(%x: vector<16xf32>) -> vector<16xf32> {
  %e = math.exp %x : vector<16xf32>
  return %e : vector<16xf32>
}

// floor without libdevice: through i32 below 2^23 only (no i64 conversion, poison for NaN,
// infinities and |x| >= 2^63), t - 1 only where the truncation t is above x, x itself beyond.
// NVVM-LABEL: func.func @floor(
// NVVM-SAME: %[[X:.*]]: f32
// NVVM-NOT: i64
// NVVM: %[[SMALL:.*]] = arith.cmpf olt, %{{.*}}, %{{.*}} : f32
// NVVM: %[[IN:.*]] = arith.select %[[SMALL]], %[[X]], %{{.*}} : f32
// NVVM: %[[I:.*]] = arith.fptosi %[[IN]] : f32 to i32
// NVVM: %[[T:.*]] = arith.sitofp %[[I]] : i32 to f32
// NVVM: %[[ABOVE:.*]] = arith.cmpf ogt, %[[T]], %[[IN]] : f32
// NVVM: %[[F:.*]] = arith.select %[[ABOVE]], %{{.*}}, %[[T]] : f32
// NVVM: %[[SIGNED:.*]] = math.copysign %[[F]], %[[X]] : f32
// NVVM: %[[R:.*]] = arith.select %[[SMALL]], %[[SIGNED]], %[[X]] : f32
// NVVM: return %[[R]]
// CHECK-LABEL: func.func @floor(
// CHECK: math.floor
func.func @floor(%x: f32) -> f32 {
  %f = math.floor %x : f32
  return %f : f32
}

// f32 to bf16 rounded to nearest even as integer ops: NaN made the quiet 0x7fc00000 on the
// f32's bits (2143289344) before (bits + 0x7fff + lsb) >> 16, so no select is left on the
// truncated bits for LLVM to move onto bf16 values.
// CHECK-LABEL: func.func @to_bf16(
// CHECK-SAME: %[[X:.*]]: vector<8xf32>
// CHECK: %[[BITS:.*]] = arith.bitcast %[[X]] : vector<8xf32> to vector<8xi32>
// CHECK: %[[NAN:.*]] = arith.cmpi ugt
// CHECK: %[[QUIET:.*]] = arith.select %[[NAN]], %{{.*}}, %[[BITS]] : vector<8xi1>, vector<8xi32>
// CHECK: arith.shrui %[[QUIET]]
// CHECK: %[[SUM:.*]] = arith.addi %[[QUIET]], %{{.*}} : vector<8xi32>
// CHECK: %[[HIGH:.*]] = arith.shrui %[[SUM]], %{{.*}} : vector<8xi32>
// CHECK: %[[HALF:.*]] = arith.trunci %[[HIGH]] : vector<8xi32> to vector<8xi16>
// CHECK: %[[R:.*]] = arith.bitcast %[[HALF]] : vector<8xi16> to vector<8xbf16>
// CHECK-NOT: arith.select
// CHECK: return %[[R]]
func.func @to_bf16(%x: vector<8xf32>) -> vector<8xbf16> {
  %r = arith.truncf %x : vector<8xf32> to vector<8xbf16>
  return %r : vector<8xbf16>
}
