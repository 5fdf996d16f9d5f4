// RUN: attn-opt %s -split-input-file -transform-interpreter -canonicalize -verify-diagnostics | FileCheck %s
// transform.attn.lower_backward_mma: D's workspace, then two launches of 2 warps (rows = 32):
// the dQ kernel (blocks of 32 query rows of a batch and head: D stored, K and V tiles of 16
// keys copied by cp.async, S = Q K^T and dP = dO V^T, score_mod's tanh and its derivative,
// p = 2^(s log2 e - lse log2 e), dQ += G K by ldmatrix.trans) and the dK/dV kernel (blocks of
// 32 keys of a batch and KV head, over the group's heads and the query blocks the mask keeps:
// Q and dO tiles with their lse and D, dV += P^T dO, dK += G^T Q); with sinks a task per head
// sums their gradients. The aligned arguments are recorded for the bundle's entry. Then a
// bias's gradient summed in place, a table's through a copy per warp summed in order, two
// score-shaped gradients refused, and f32 tensors refused.

// CHECK: memref.global "public" constant @attnc_mma_backward_aligned_args : memref<i32> = dense<927>
// CHECK-LABEL: func.func @backward
// CHECK-SAME: llvm.emit_c_interface
// CHECK: %[[DELTA:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x4x?xf32>
// CHECK: gpu.launch
// CHECK-SAME: threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c64
// CHECK-SAME: workgroup(%{{.*}} : memref<16x24xf16, #gpu.address_space<workgroup>>, %{{.*}} : memref<16x24xf16, #gpu.address_space<workgroup>>)
// CHECK:   memref.store %{{.*}}, %[[DELTA]]
// CHECK:   scf.for
// CHECK:     nvgpu.device_async_copy
// CHECK:     nvgpu.mma.sync
// CHECK:     math.tanh
// CHECK:     math.exp2
// CHECK:     nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = true}
// CHECK:     nvgpu.mma.sync
// CHECK:     gpu.barrier
// CHECK: gpu.launch
// CHECK-SAME: workgroup(%{{.*}} : memref<16x24xf16, #gpu.address_space<workgroup>>, %{{.*}} : memref<16x24xf16, #gpu.address_space<workgroup>>, %{{.*}} : memref<16xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<16xf32, #gpu.address_space<workgroup>>)
// CHECK:   scf.for
// CHECK:     scf.for
// CHECK:       scf.if
// CHECK:         memref.load %[[DELTA]]
// CHECK:         nvgpu.mma.sync
// CHECK:         nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = true}
// CHECK:         gpu.barrier
// CHECK: scf.forall
// CHECK:   memref.load %[[DELTA]]
// CHECK:   memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<4xf32>
// CHECK: memref.dealloc %[[DELTA]]

func.func @backward(%q: memref<?x4x?x16xf16>, %k: memref<?x2x?x16xf16>, %v: memref<?x2x?x16xf16>,
                    %o: memref<?x4x?x16xf16>, %do: memref<?x4x?x16xf16>, %lse: memref<?x4x?xf32>,
                    %sinks: memref<4xf32>,
                    %dq: memref<?x4x?x16xf16>, %dk: memref<?x2x?x16xf16>, %dv: memref<?x2x?x16xf16>,
                    %dsinks: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %b = memref.dim %q, %c0 : memref<?x4x?x16xf16>
  %tq = memref.dim %q, %c2 : memref<?x4x?x16xf16>
  %tk = memref.dim %k, %c2 : memref<?x2x?x16xf16>
  attn.backward %q, %k, %v, %o, %do, %lse sinks(%sinks : memref<4xf32>) into %dq, %dk, %dv
      grad_sinks(%dsinks : memref<4xf32>)
      at [%c0, %c0, %c0, %c0] sizes [%b, %c4, %tq, %tk] seq_q %tq
      {num_heads = 4 : i64, scale = 0.25 : f64}
      : memref<?x4x?x16xf16>, memref<?x2x?x16xf16>, memref<?x2x?x16xf16>, memref<?x4x?x16xf16>,
        memref<?x4x?x16xf16>, memref<?x4x?xf32>, memref<?x4x?x16xf16>,
        memref<?x2x?x16xf16>, memref<?x2x?x16xf16>
      score_mod {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %t = math.tanh %s : f32
        gpu.yield %t : f32
      }
      mask_mod {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %keep = arith.cmpi sle, %ki, %qp : i32
        gpu.yield %keep : i1
      }
      score_grad {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %t = math.tanh %s : f32
        %t2 = arith.mulf %t, %t : f32
        %one = arith.constant 1.0 : f32
        %d = arith.subf %one, %t2 : f32
        gpu.yield %d : f32
      }
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_backward_mma %f rows = 32 key_block = 16 : !transform.any_op
    transform.yield
  }
}

// -----

// A bias's gradient (aux_grad_direct, [1, H, Tq, Tk] f16: broadcast over the batch) is summed
// in place by the dQ kernel: a block per (query tile, b', h') of the gradient's own extents
// zeroes its rows, then runs, in order, over every batch entry that reads them (and over one
// head: h = h' + j H'), adding p (dP - D) at each of its lane's kept scores.

// CHECK-LABEL: func.func @backward_bias
// CHECK-SAME: %[[DBIAS:[a-z0-9]+]]: memref<1x4x?x?xf16>)
// CHECK: gpu.launch
// CHECK:   scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c64
// CHECK:     memref.store %{{.*}}, %[[DBIAS]]
// CHECK:   gpu.barrier
// CHECK:   scf.for %{{.*}} = %c0 to %{{.*}} step %c1
// CHECK:     memref.store %{{.*}}, %{{.*}} : memref<?x4x?xf32>
// CHECK:     scf.for
// CHECK:       nvgpu.mma.sync
// CHECK:       scf.if
// CHECK:         memref.load %[[DBIAS]]
// CHECK:         memref.store %{{.*}}, %[[DBIAS]]
// CHECK:       nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = true}
// CHECK: gpu.launch
// CHECK-NOT: %[[DBIAS]]
// CHECK: memref.dealloc

func.func @backward_bias(%q: memref<?x4x?x16xf16>, %k: memref<?x2x?x16xf16>,
                         %v: memref<?x2x?x16xf16>, %o: memref<?x4x?x16xf16>,
                         %do: memref<?x4x?x16xf16>, %lse: memref<?x4x?xf32>,
                         %bias: memref<1x4x?x?xf16>, %dq: memref<?x4x?x16xf16>,
                         %dk: memref<?x2x?x16xf16>, %dv: memref<?x2x?x16xf16>,
                         %dbias: memref<1x4x?x?xf16>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %b = memref.dim %q, %c0 : memref<?x4x?x16xf16>
  %tq = memref.dim %q, %c2 : memref<?x4x?x16xf16>
  %tk = memref.dim %k, %c2 : memref<?x2x?x16xf16>
  attn.backward %q, %k, %v, %o, %do, %lse aux(%bias : memref<1x4x?x?xf16>)
      into %dq, %dk, %dv aux_grads(%dbias : memref<1x4x?x?xf16>)
      at [%c0, %c0, %c0, %c0] sizes [%b, %c4, %tq, %tk] seq_q %tq
      {num_heads = 4 : i64, scale = 0.25 : f64, aux_grad_targets = array<i64: 0>,
       aux_grad_direct = array<i64: 0>}
      : memref<?x4x?x16xf16>, memref<?x2x?x16xf16>, memref<?x2x?x16xf16>, memref<?x4x?x16xf16>,
        memref<?x4x?x16xf16>, memref<?x4x?xf32>, memref<?x4x?x16xf16>,
        memref<?x2x?x16xf16>, memref<?x2x?x16xf16>
      score_mod {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %x = attn.aux_load 0 [%bi, %h, %qi, %ki] : f16
        %w = arith.extf %x : f16 to f32
        %u = arith.addf %s, %w : f32
        gpu.yield %u : f32
      }
      score_grad {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %one = arith.constant 1.0 : f32
        gpu.yield %one : f32
      }
      aux_grad {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %one = arith.constant 1.0 : f32
        gpu.yield %bi, %h, %qi, %ki, %one : i32, i32, i32, i32, f32
      }
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_backward_mma %f rows = 32 key_block = 16 : !transform.any_op
    transform.yield
  }
}

// -----

// A table's gradient (many scores read each element): a copy per warp of the dQ kernel's
// (ceil(Tq / 32) B H blocks of 2 warps), zeroed by the warp's lanes; each fragment element's
// terms summed over the lanes that read its element (by xor shuffles where all read one, else
// 32 rounds of shuffles of the offset and the term), the first such lane adding the sum, then
// a warp barrier; after the dK/dV kernel a task per element sums the copies in order.

// CHECK-LABEL: func.func @table
// CHECK-SAME: %[[DREL:[a-z0-9]+]]: memref<9xf32>)
// CHECK: %[[COPIES:.*]] = memref.alloc() : memref<2x9xf32>
// CHECK: gpu.launch
// CHECK:   scf.for %{{.*}} = %{{.*}} to %c9 step %c32
// CHECK:     memref.store %{{.*}}, %[[COPIES]]
// CHECK:   nvvm.bar.warp.sync
// CHECK:   nvgpu.mma.sync
// CHECK:   nvvm.vote.ballot.sync
// CHECK:   math.cttz
// CHECK:   nvvm.vote.ballot.sync
// CHECK:   scf.if
// CHECK:     gpu.shuffle  xor %{{.*}}, %c16_i32, %c32_i32 : f32
// CHECK:     scf.if
// CHECK:       memref.load %[[COPIES]]
// CHECK:       memref.store %{{.*}}, %[[COPIES]]
// CHECK:   } else {
// CHECK:     scf.for %{{.*}} = %c0 to %c32 step %c1
// CHECK:       gpu.shuffle  idx %{{.*}} : i64
// CHECK:       gpu.shuffle  idx %{{.*}} : f32
// CHECK:     scf.if
// CHECK:       memref.load %[[COPIES]]
// CHECK:       memref.store %{{.*}}, %[[COPIES]]
// CHECK:   nvvm.bar.warp.sync
// CHECK: gpu.launch
// CHECK-NOT: %[[COPIES]]
// CHECK: scf.forall
// CHECK:   scf.for %{{.*}} = %c0 to %c2 step %c1
// CHECK:     memref.load %[[COPIES]]
// CHECK:   memref.store %{{.*}}, %[[DREL]]
// CHECK: memref.dealloc %[[COPIES]]

func.func @table(%q: memref<1x1x8x16xf16>, %k: memref<1x1x8x16xf16>, %v: memref<1x1x8x16xf16>,
                 %o: memref<1x1x8x16xf16>, %do: memref<1x1x8x16xf16>, %lse: memref<1x1x8xf32>,
                 %rel: memref<9xf32>, %dq: memref<1x1x8x16xf16>, %dk: memref<1x1x8x16xf16>,
                 %dv: memref<1x1x8x16xf16>, %drel: memref<9xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  attn.backward %q, %k, %v, %o, %do, %lse aux(%rel : memref<9xf32>)
      into %dq, %dk, %dv aux_grads(%drel : memref<9xf32>)
      at [%c0, %c0, %c0, %c0] sizes [%c1, %c1, %c8, %c8] seq_q %c8
      {num_heads = 1 : i64, scale = 0.25 : f64, aux_grad_targets = array<i64: 0>}
      : memref<1x1x8x16xf16>, memref<1x1x8x16xf16>, memref<1x1x8x16xf16>, memref<1x1x8x16xf16>,
        memref<1x1x8x16xf16>, memref<1x1x8xf32>, memref<1x1x8x16xf16>, memref<1x1x8x16xf16>,
        memref<1x1x8x16xf16>
      score_mod {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %d = arith.subi %ki, %qp : i32
        %r = attn.aux_load 0 [%d] : f32
        %u = arith.addf %s, %r : f32
        gpu.yield %u : f32
      }
      score_grad {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %one = arith.constant 1.0 : f32
        gpu.yield %one : f32
      }
      aux_grad {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %one = arith.constant 1.0 : f32
        %d = arith.subi %ki, %qp : i32
        gpu.yield %d, %one : i32, f32
      }
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_backward_mma %f rows = 32 key_block = 16 : !transform.any_op
    transform.yield
  }
}

// -----

// The dQ kernel's blocks sum one score-shaped gradient in place: two are refused.
func.func @two_biases(%q: memref<1x1x8x16xf16>, %k: memref<1x1x8x16xf16>,
                      %v: memref<1x1x8x16xf16>, %o: memref<1x1x8x16xf16>,
                      %do: memref<1x1x8x16xf16>, %lse: memref<1x1x8xf32>,
                      %b0: memref<1x1x8x8xf32>, %b1: memref<1x1x8x8xf32>,
                      %dq: memref<1x1x8x16xf16>, %dk: memref<1x1x8x16xf16>,
                      %dv: memref<1x1x8x16xf16>, %db0: memref<1x1x8x8xf32>,
                      %db1: memref<1x1x8x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  // expected-error @+1 {{lower_backward_mma: the dQ kernel's blocks sum one score-shaped gradient (aux_grad_direct) in place, not 2}}
  attn.backward %q, %k, %v, %o, %do, %lse aux(%b0, %b1 : memref<1x1x8x8xf32>, memref<1x1x8x8xf32>)
      into %dq, %dk, %dv aux_grads(%db0, %db1 : memref<1x1x8x8xf32>, memref<1x1x8x8xf32>)
      at [%c0, %c0, %c0, %c0] sizes [%c1, %c1, %c8, %c8] seq_q %c8
      {num_heads = 1 : i64, scale = 0.25 : f64, aux_grad_targets = array<i64: 0, 1>,
       aux_grad_direct = array<i64: 0, 1>}
      : memref<1x1x8x16xf16>, memref<1x1x8x16xf16>, memref<1x1x8x16xf16>, memref<1x1x8x16xf16>,
        memref<1x1x8x16xf16>, memref<1x1x8xf32>, memref<1x1x8x16xf16>, memref<1x1x8x16xf16>,
        memref<1x1x8x16xf16>
      score_mod {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %x = attn.aux_load 0 [%bi, %h, %qi, %ki] : f32
        %y = attn.aux_load 1 [%bi, %h, %qi, %ki] : f32
        %u = arith.addf %s, %x : f32
        %w = arith.addf %u, %y : f32
        gpu.yield %w : f32
      }
      score_grad {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %one = arith.constant 1.0 : f32
        gpu.yield %one : f32
      }
      aux_grad {
      ^bb0(%s: f32, %bi: i32, %h: i32, %g: i32, %qi: i32, %ki: i32, %qp: i32, %tqi: i32, %tki: i32):
        %one = arith.constant 1.0 : f32
        gpu.yield %bi, %h, %qi, %ki, %one, %bi, %h, %qi, %ki, %one
            : i32, i32, i32, i32, f32, i32, i32, i32, i32, f32
      }
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_backward_mma %f rows = 32 key_block = 16 : !transform.any_op
    transform.yield
  }
}

// -----

// f32 tensors have no tensor-core backward.
func.func @wide(%q: memref<1x1x8x16xf32>, %k: memref<1x1x8x16xf32>, %v: memref<1x1x8x16xf32>,
                %o: memref<1x1x8x16xf32>, %do: memref<1x1x8x16xf32>, %lse: memref<1x1x8xf32>,
                %dq: memref<1x1x8x16xf32>, %dk: memref<1x1x8x16xf32>,
                %dv: memref<1x1x8x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  // expected-error @+1 {{lower_backward_mma: tensor cores take f16 or bf16 storage, not 'f32'}}
  attn.backward %q, %k, %v, %o, %do, %lse into %dq, %dk, %dv
      at [%c0, %c0, %c0, %c0] sizes [%c1, %c1, %c8, %c8] seq_q %c8
      {num_heads = 1 : i64, scale = 0.25 : f64}
      : memref<1x1x8x16xf32>, memref<1x1x8x16xf32>, memref<1x1x8x16xf32>, memref<1x1x8x16xf32>,
        memref<1x1x8x16xf32>, memref<1x1x8xf32>, memref<1x1x8x16xf32>, memref<1x1x8x16xf32>,
        memref<1x1x8x16xf32>
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.attn.lower_backward_mma %f rows = 32 key_block = 16 : !transform.any_op
    transform.yield
  }
}
