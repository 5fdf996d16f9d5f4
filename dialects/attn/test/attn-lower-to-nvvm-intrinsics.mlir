// RUN: attn-opt %s -attn-lower-to-nvvm-intrinsics | FileCheck %s
// What MLIR 19's NVVM lowering lacks: bf16 mma.sync and f32 exp2, as intrinsic calls.

// CHECK-LABEL: func.func @bf16_mma
// Each bf16 pair of A (4) and B (2) as one i32, then C's 4 floats.
// CHECK-COUNT-6: vector.bitcast {{.*}} : vector<2xbf16> to vector<1xi32>
// CHECK: %[[D:.*]] = llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.bf16"({{.*}}) : (i32, i32, i32, i32, i32, i32, f32, f32, f32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK-COUNT-4: llvm.extractvalue %[[D]]
// CHECK-NOT: nvgpu.mma.sync
func.func @bf16_mma(%a: vector<4x2xbf16>, %b: vector<2x2xbf16>, %c: vector<2x2xf32>) -> vector<2x2xf32> {
  %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 16]}
      : (vector<4x2xbf16>, vector<2x2xbf16>, vector<2x2xf32>) -> vector<2x2xf32>
  return %d : vector<2x2xf32>
}

// f16 stays for convert-nvgpu-to-nvvm.
// CHECK-LABEL: func.func @f16_mma
// CHECK: nvgpu.mma.sync
func.func @f16_mma(%a: vector<4x2xf16>, %b: vector<2x2xf16>, %c: vector<2x2xf32>) -> vector<2x2xf32> {
  %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 16]}
      : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
  return %d : vector<2x2xf32>
}

// CHECK-LABEL: func.func @exp2
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"(%{{.*}}) : (f32) -> f32
// CHECK-COUNT-4: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK-NOT: math.exp2
func.func @exp2(%x: f32, %v: vector<2x2xf32>) -> (f32, vector<2x2xf32>) {
  %y = math.exp2 %x : f32
  %w = math.exp2 %v : vector<2x2xf32>
  return %y, %w : f32, vector<2x2xf32>
}
