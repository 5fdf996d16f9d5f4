// The unfused attention a user writes without attnc, for side-by-side benchmarks: each step a
// library call or a plain loop over a stored intermediate, as in eager PyTorch.
//   sdpa       S = scale Q K^T (an OpenBLAS sgemm per head), masked entries -inf, a softmax per
//              row, O = P V (a second sgemm). It stores the whole Tq x Tk score matrix of a head.
//              The modifiers, score_mod, the masks past causal and padding, mask_mod and
//              dropout's factor are their expressions (Spec/BuiltinExpressions) evaluated over
//              that matrix op by op, as eager PyTorch evaluates them (EagerExpression.h).
//   bilinear   Q W first (an sgemm per head), then as sdpa with scale.
//   additive   W1 q and W2 k (sgemms), the Tq x Tk x d_attn tensor tanh(W1 q_i + W2 k_j) stored
//              (libmvec's vector tanh), scores = that tensor times v_a (an sgemv), then as sdpa.
//   linformer  E K and F V (sgemms over the valid keys), then as sdpa over proj_len keys.
//   RoPE       rotates copies of the queries and keys (mha's projections in place) from cos
//              and sin tables computed once, as a model's rotary embedding does.
//   mha        x W_Q, x W_K, x W_V (one sgemm each on all threads, PE added first), sdpa per
//              head, then Concat(heads) W_O (an sgemm): separate GEMM and attention calls. The
//              attention is the unfused one, or an attnc sdpa bundle (useAttentionBundle).
#ifndef ATTNC_TOOLS_BENCH_UNFUSEDBASELINE_H
#define ATTNC_TOOLS_BENCH_UNFUSEDBASELINE_H

#include "Backends/Coverage.h"
#include "CallSetup.h"
#include "EagerExpression.h"
#include "attnc/Runtime.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace attnc::bench {

using tools::Call;

class UnfusedBaseline {
public:
  // Its row of the capability table (attnc backends): the softmax variants with every mask and
  // modifier, on the CPU.
  static const Coverage& coverage();
  // Why the baseline cannot run this spec (the row's first gap), or nullopt.
  static std::optional<std::string> unsupported(const Spec& spec);
  // What run() does, in a few words.
  static std::string describe(const Spec& spec);

  // Copies the call's inputs to dense f32 once, outside the timing.
  explicit UnfusedBaseline(const Call& call);
  // mha: run the attention of the projected heads through `sdpa`, a bundle of the same heads,
  // dims and mask with layout=bshd and dtype=f32 (throws UsageError naming what differs).
  void useAttentionBundle(const runtime::Bundle& sdpa);
  // One forward pass, heads spread over `threads` threads.
  void run(int threads);
  // o as the kernel lays it out (BHSD or BSHD, or mha's [B, Tq, d_model]).
  std::vector<float> output() const;

private:
  // An operand of the attention as (pointer of head (b, h), row stride): head-major tensors, or
  // mha's [B, T, heads * d] projections.
  struct Operand {
    const float* data;
    int64_t heads, rows, width;
    bool tokenMajor; // [B, T, heads, width] rather than [B, heads, T, width]
    const float* at(int64_t b, int64_t h) const {
      return tokenMajor ? data + b * rows * heads * width + h * width
                        : data + ((b * heads + h) * rows) * width;
    }
    int64_t rowStride() const { return tokenMajor ? heads * width : width; }
  };
  // RoPE on the rows of `x`, whose elements are `data`'s, in place; `table` holds each row's
  // (cos, sin) per pair.
  void rotate(int threads, std::vector<float>& data, const Operand& x,
              const std::vector<float>& table) const;
  void attendPerHead(int threads, const Operand& query, const Operand& key, const Operand& value);
  void runAttentionBundle(int threads);
  // Modifiers, masks, the softmax, dropout and P V of head h of batch entry `batch` whose
  // scaled scores are in `scores` [Tq x keys]; v and o are row-major with row strides ldv, ldo.
  void softmaxTimesValues(float* scores, int64_t keys, int64_t batch, int64_t h, const float* v,
                          int64_t ldv, float* o, int64_t ldo) const;

  Spec spec_;
  int64_t batch_, seqQ_, seqK_, keys_;     // keys_: Tk, or proj_len
  std::vector<float> q_, k_, v_;            // head-major [B, H|Hkv, T, d]; mha: [B, T, d_model]
  std::map<std::string, std::vector<float>> params_; // and mha's sinusoidal tables
  std::vector<float> queries_, keysIn_, values_;      // operands after the variant's projections
  std::vector<float> heads_, o_; // heads_: head-major, or mha's [B, Tq, H d_v]; o_: mha's output
  std::vector<float> scratch_; // per worker: the score matrix (and additive's hidden tensor)
  std::vector<int64_t> lengths_;
  std::vector<float> ropeQuery_, ropeKey_; // [T, rope_dims / 2, (cos, sin)] at the rows' positions
  // The expressions evaluated over a head's scores: the built-in modifiers, the masks past
  // causal and padding (which bound each row's keys) with mask_mod, dropout's factor.
  std::optional<expr::Node> modifiers_, scoreMod_, masks_, dropout_;
  EagerInputs expressionInputs_;
  const runtime::Bundle* attention_ = nullptr;
};

} // namespace attnc::bench

#endif // ATTNC_TOOLS_BENCH_UNFUSEDBASELINE_H
