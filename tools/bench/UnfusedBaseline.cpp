#include "UnfusedBaseline.h"

#include "Reference/Array4.h"
#include "RunSupport.h"
#include "Semantics/Positions.h"
#include "Spec/BuiltinExpressions.h"
#include "Support/Threads.h"
#include "VectorTanh.h"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <limits>

namespace attnc::bench {
namespace {

// A head-major [B, heads, T, d] copy of a q/k/v tensor, as f32.
std::vector<float> headMajorF32(const Spec& spec, const HostTensor& t) {
  const auto& shape = t.shape();
  Array4 a(shape[0], shape[1], shape[2], shape[3]);
  a.data = t.values();
  if (spec.layout == Layout::Bshd)
    a = a.swapMiddle();
  return std::vector<float>(a.data.begin(), a.data.end());
}

std::vector<float> denseF32(const HostTensor& t) {
  std::vector<double> values = t.values();
  return std::vector<float>(values.begin(), values.end());
}

// C [m x n] = alpha A B (+ beta C), row-major, B transposed when asked.
void gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, bool transposeB, float* c, int64_t ldc, float beta = 0) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, transposeB ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

// gemm with the rows of C split over `threads` threads, each a one-thread OpenBLAS call:
// OpenBLAS's own workers spin after each call and would steal cores from the interleaved kernel.
void parallelGemm(int threads, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float* c, int64_t ldc) {
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(threads, m));
  forEachOnThreads(parts, parts, [&](int64_t part, int64_t) {
    const int64_t first = m * part / parts, last = m * (part + 1) / parts;
    gemm(last - first, n, k, 1, a + first * lda, lda, b, ldb, false, c + first * ldc, ldc);
  });
}

// What the baseline does for the variant, in a few words.
std::string variantSteps(const Spec& s) {
  switch (s.variant) {
  case Variant::Bilinear: return "OpenBLAS sgemm Q W, then sgemm + softmax + sgemm, f32";
  case Variant::Additive:
    return "sgemms W1 q, W2 k; stored Tq x Tk x d_attn tanh (libmvec); sgemv v_a; softmax; "
           "sgemm, f32";
  case Variant::Linformer: return "sgemms E K, F V, then sgemm + softmax + sgemm, f32";
  case Variant::Mha:
    return "sgemms x W_Q, x W_K, x W_V; sgemm + softmax + sgemm per head (or --attention); "
           "sgemm W_O, f32";
  default: return "OpenBLAS sgemm + softmax + sgemm, f32";
  }
}

// The built-in masks evaluated as expressions: all but causal and padding, which bound each
// row's keys. Linformer's keys are projections, which no mask selects (as in the reference).
std::optional<expr::Node> evaluatedMasks(const Spec& s) {
  if (s.variant == Variant::Linformer)
    return std::nullopt;
  std::vector<MaskKind> kinds;
  for (MaskKind k : kBuiltinMasks)
    if (k != MaskKind::Causal && k != MaskKind::Padding)
      kinds.push_back(k);
  return masksWithMaskMod(s, kinds);
}

// The params, the aux tensors and the kernel inputs the built-ins read, copied once as the
// eager evaluation reads them.
EagerInputs expressionInputs(const Call& call) {
  const Spec& s = call.spec;
  EagerInputs inputs;
  for (const SpecParam& p : s.params)
    inputs.params[p.name] = p.value;
  for (const ExpressionTensor& e : expressionTensors(s)) {
    const HostTensor& t = call.tensor(e.name);
    EagerInputs::Tensor& tensor = inputs.tensors[e.name];
    tensor.type = e.type;
    tensor.shape = t.shape();
    for (double v : t.values())
      if (e.type == expr::Type::Float)
        tensor.floats.push_back(static_cast<float>(v));
      else
        tensor.ints.push_back(static_cast<int64_t>(v));
  }
  return inputs;
}

} // namespace

const Coverage& UnfusedBaseline::coverage() {
  static const Coverage row = [] {
    Coverage row = fullCoverage(Device::Cpu);
    row.variants = {Variant::Sdpa, Variant::Mha, Variant::Additive, Variant::Bilinear,
                    Variant::Linformer};
    // Its causal rows end at a position common to the batch; a cache's differ per sequence.
    std::erase(row.modifiers, Modifier::ContiguousKvCache);
    std::erase(row.modifiers, Modifier::PagedKvCache);
    std::erase(row.modifiers, Modifier::Int8KvCache);
    std::erase(row.modifiers, Modifier::Fp8KvCache);
    std::erase(row.modifiers, Modifier::KvAppend);
    std::erase(row.outputs, Output::Backward); // forward GEMMs only
    std::erase(row.outputs, Output::AuxGradients);
    std::erase(row.outputs, Output::SavedProjections);
    row.products = "f32 (OpenBLAS sgemm on inputs widened to f32)";
    return row;
  }();
  return row;
}

std::optional<std::string> UnfusedBaseline::unsupported(const Spec& s) {
  std::optional<std::string> gap = firstGap(coverage(), s);
  if (!gap)
    return std::nullopt;
  return "the unfused baseline does not cover " + *gap + "; it covers " +
         describeCoverage(coverage()) +
         (s.variant == Variant::Linear ? " (linear attention: compare with --against an sdpa bundle)"
                                       : "");
}

std::string UnfusedBaseline::describe(const Spec& s) {
  std::string steps = variantSteps(s);
  if (s.rope)
    steps += "; RoPE from cos and sin tables";
  if (evaluatedMasks(s) || modifiersAsExpression(s) || scoreModAsExpression(s) ||
      dropoutAsExpression(s))
    steps += "; masks and modifiers as elementwise passes over the scores, as eager PyTorch";
  return steps;
}

UnfusedBaseline::UnfusedBaseline(const Call& call)
    : spec_(call.spec), batch_(call.sizes[SizeSymbol::Batch]), seqQ_(call.sizes[SizeSymbol::SeqQ]),
      seqK_(call.sizes[SizeSymbol::SeqK]) {
  const Spec& s = spec_;
  keys_ = s.variant == Variant::Linformer ? s.projLen : seqK_;
  if (s.variant == Variant::Mha) {
    q_ = denseF32(call.tensor("q"));
    k_ = denseF32(call.tensor("k"));
    v_ = denseF32(call.tensor("v"));
  } else {
    q_ = headMajorF32(s, call.tensor("q"));
    k_ = headMajorF32(s, call.tensor("k"));
    v_ = headMajorF32(s, call.tensor("v"));
  }
  for (const Argument& a : call.arguments)
    if (a.role == ArgumentRole::Param)
      params_[a.name] = denseF32(call.tensor(a.name));
  if (s.variant == Variant::Mha && s.pe == PositionalEncoding::Sinusoidal) {
    // The encodings are a table computed once, as a model stores them.
    const int64_t offset = positions::alignmentOffset(s, seqQ_, seqK_);
    auto table = [&](int64_t seq, int64_t first) {
      std::vector<float> pe(seq * s.dModel);
      for (int64_t t = 0; t < seq; ++t)
        for (int64_t m = 0; m < s.dModel; ++m)
          pe[t * s.dModel + m] = static_cast<float>(positions::sinusoidal(t + first, m, s.dModel));
      return pe;
    };
    params_["pe_q"] = table(seqQ_, offset);
    params_["pe_k"] = table(seqK_, 0);
  }
  if (s.masks.has(MaskKind::Padding))
    for (double length : call.tensor("lengths").values())
      lengths_.push_back(std::clamp<int64_t>(static_cast<int64_t>(length), 0, seqK_));
  else
    lengths_.assign(batch_, seqK_);
  if (s.rope) {
    const int64_t offset = positions::alignmentOffset(s, seqQ_, seqK_);
    auto table = [&](int64_t rows, int64_t first) {
      std::vector<float> cosSin;
      for (int64_t t = 0; t < rows; ++t)
        for (int64_t p = 0; p < s.ropeDims / 2; ++p) {
          const double angle = positions::ropeAngle(t + first, p, s.ropeDims, s.ropeTheta);
          cosSin.push_back(static_cast<float>(std::cos(angle)));
          cosSin.push_back(static_cast<float>(std::sin(angle)));
        }
      return cosSin;
    };
    ropeQuery_ = table(seqQ_, offset);
    ropeKey_ = table(seqK_, 0);
  }
  masks_ = evaluatedMasks(s);
  modifiers_ = modifiersAsExpression(s);
  scoreMod_ = scoreModAsExpression(s);
  dropout_ = dropoutAsExpression(s);
  expressionInputs_ = expressionInputs(call);
  const int64_t H = s.heads;
  heads_.assign(batch_ * H * seqQ_ * s.dV, 0.0f);
  if (s.variant == Variant::Mha)
    o_.assign(batch_ * seqQ_ * s.dModel, 0.0f);
}

void UnfusedBaseline::useAttentionBundle(const runtime::Bundle& sdpa) {
  const Spec& s = spec_;
  Spec expected = s;
  expected.variant = Variant::Sdpa;
  expected.layout = Layout::Bshd;
  expected.dtype = DType::F32;
  expected.pe = PositionalEncoding::None;
  expected.dModel = 0;
  const std::string given = tools::bundleSpec(sdpa).canonical();
  if (s.variant != Variant::Mha)
    throw UsageError("--attention: only variant=mha takes one; this spec is " + s.canonical());
  // Through the parser, so that keys that do not apply to sdpa drop out of the canonical form.
  const std::string wanted = parseSpec(expected.canonical()).canonical();
  if (given != wanted)
    throw UsageError("--attention: the bundle computes " + given + "; for this spec it must be " +
                     wanted);
  attention_ = &sdpa;
}

void UnfusedBaseline::softmaxTimesValues(float* scores, int64_t keys, int64_t b, int64_t h,
                                         const float* v, int64_t ldv, float* o,
                                         int64_t ldo) const {
  const Spec& s = spec_;
  const int64_t offset = positions::alignmentOffset(s, seqQ_, seqK_);
  const int64_t valid = lengths_[b];
  const bool linformer = s.variant == Variant::Linformer;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const HeadGrid grid{b, h, h / s.groupSize(), seqQ_, seqK_, keys, offset, scores};
  auto each = [&](const EagerArray& a, auto f) {
    for (int64_t i = 0; i < seqQ_; ++i)
      for (int64_t j = 0; j < keys; ++j)
        f(scores[i * keys + j], a, i, j);
  };
  // S = score_mod(modifiers(S)), each a new matrix; masked entries -inf.
  for (const expr::Node* scoreExpression : {modifiers_ ? &*modifiers_ : nullptr,
                                            scoreMod_ ? &*scoreMod_ : nullptr})
    if (scoreExpression)
      each(evaluateEagerly(*scoreExpression, grid, expressionInputs_),
           [](float& x, const EagerArray& a, int64_t i, int64_t j) { x = a.number(i, j); });
  if (masks_)
    each(evaluateEagerly(*masks_, grid, expressionInputs_),
         [&](float& x, const EagerArray& a, int64_t i, int64_t j) {
           if (!a.truth(i, j))
             x = kNegInf;
         });
  // P = softmax(S) row by row over the keys causal and padding leave (a fully masked row
  // stays 0), with the head's sink, when the spec has sinks, as one more logit in each row's
  // max and denominator.
  const float sink = s.sinks ? params_.at("sinks")[h] : kNegInf;
  for (int64_t i = 0; i < seqQ_; ++i) {
    float* row = &scores[i * keys];
    int64_t end = linformer ? (valid > 0 ? keys : 0) : valid;
    if (s.masks.has(MaskKind::Causal))
      end = std::clamp<int64_t>(i + offset + 1, 0, end);
    float m = sink;
    for (int64_t j = 0; j < end; ++j)
      m = std::max(m, row[j]);
    if (m == kNegInf)
      end = 0;
    float sum = m == kNegInf ? 0.0f : std::exp(sink - m);
    for (int64_t j = 0; j < end; ++j)
      sum += row[j] = std::exp(row[j] - m);
    for (int64_t j = 0; j < keys; ++j)
      row[j] = j < end ? row[j] / sum : 0.0f;
  }
  // Dropout's factor on P where it weights V.
  if (dropout_)
    each(evaluateEagerly(*dropout_, grid, expressionInputs_),
         [](float& p, const EagerArray& a, int64_t i, int64_t j) { p *= a.number(i, j); });
  gemm(seqQ_, s.dV, keys, 1.0f, scores, keys, v, ldv, false, o, ldo);
}

void UnfusedBaseline::run(int threads) {
  // Heads run in parallel on our threads, each GEMM on one OpenBLAS thread: OpenBLAS's own
  // workers spin after each call and would steal cores from the interleaved kernel runs.
  openblas_set_num_threads(1);
  const Spec& s = spec_;
  const int64_t B = batch_, H = s.heads, Hkv = s.kvHeads, dk = s.dK, dv = s.dV;
  const int64_t Tq = seqQ_, Tk = seqK_, keys = keys_;

  Operand query{q_.data(), H, Tq, s.dQ, false}, key{k_.data(), Hkv, Tk, dk, false},
      value{v_.data(), Hkv, Tk, dv, false};

  switch (s.variant) {
  case Variant::Mha: {
    // PE added to copies of the inputs, then one sgemm per projection over all B x T rows, its
    // rows spread over the threads.
    std::vector<float> xq = q_, xk = k_, xv = v_;
    if (s.pe == PositionalEncoding::Sinusoidal) {
      const std::vector<float>&peQ = params_.at("pe_q"), &peK = params_.at("pe_k");
      for (int64_t n = 0; n < B * Tq * s.dModel; ++n)
        xq[n] += peQ[n % (Tq * s.dModel)];
      for (int64_t n = 0; n < B * Tk * s.dModel; ++n) {
        xk[n] += peK[n % (Tk * s.dModel)];
        xv[n] += peK[n % (Tk * s.dModel)];
      }
    }
    queries_.resize(B * Tq * H * dk);
    keysIn_.resize(B * Tk * Hkv * dk);
    values_.resize(B * Tk * Hkv * dv);
    parallelGemm(threads, B * Tq, H * dk, s.dModel, xq.data(), s.dModel,
                 params_.at("w_q").data(), H * dk, queries_.data(), H * dk);
    parallelGemm(threads, B * Tk, Hkv * dk, s.dModel, xk.data(), s.dModel,
                 params_.at("w_k").data(), Hkv * dk, keysIn_.data(), Hkv * dk);
    parallelGemm(threads, B * Tk, Hkv * dv, s.dModel, xv.data(), s.dModel,
                 params_.at("w_v").data(), Hkv * dv, values_.data(), Hkv * dv);
    query = {queries_.data(), H, Tq, dk, true};
    key = {keysIn_.data(), Hkv, Tk, dk, true};
    value = {values_.data(), Hkv, Tk, dv, true};
    break;
  }
  case Variant::Bilinear: {
    // Q_h W_h per head, W [H, d_q, d_k].
    queries_.resize(B * H * Tq * dk);
    forEachOnThreads(threads, B * H, [&](int64_t bh, int64_t) {
      gemm(Tq, dk, s.dQ, 1, query.at(bh / H, bh % H), s.dQ,
           &params_.at("w")[(bh % H) * s.dQ * dk], dk, false, &queries_[bh * Tq * dk], dk);
    });
    query = {queries_.data(), H, Tq, dk, false};
    break;
  }
  case Variant::Additive: {
    // W1 q_i and W2 k_j per query head, W1 [H, d_attn, d_q] and W2 [H, d_attn, d_k].
    const int64_t da = s.dAttn;
    queries_.resize(B * H * Tq * da);
    keysIn_.resize(B * H * Tk * da);
    forEachOnThreads(threads, B * H, [&](int64_t bh, int64_t) {
      const int64_t b = bh / H, h = bh % H;
      gemm(Tq, da, s.dQ, 1, query.at(b, h), s.dQ, &params_.at("w1")[h * da * s.dQ], s.dQ, true,
           &queries_[bh * Tq * da], da);
      gemm(Tk, da, dk, 1, key.at(b, h / s.groupSize()), dk, &params_.at("w2")[h * da * dk], dk,
           true, &keysIn_[bh * Tk * da], da);
    });
    break;
  }
  case Variant::Linformer: {
    // E_g K_g and F_g V_g over the valid keys, E [Hkv, proj_len, Tk].
    keysIn_.assign(B * Hkv * keys * dk, 0.0f);
    values_.assign(B * Hkv * keys * dv, 0.0f);
    forEachOnThreads(threads, B * Hkv, [&](int64_t bg, int64_t) {
      const int64_t b = bg / Hkv, g = bg % Hkv, valid = lengths_[b];
      if (valid == 0)
        return;
      gemm(keys, dk, valid, 1, &params_.at("e")[g * keys * Tk], Tk, key.at(b, g), dk, false,
           &keysIn_[bg * keys * dk], dk);
      gemm(keys, dv, valid, 1, &params_.at("f")[g * keys * Tk], Tk, value.at(b, g), dv, false,
           &values_[bg * keys * dv], dv);
    });
    key = {keysIn_.data(), Hkv, keys, dk, false};
    value = {values_.data(), Hkv, keys, dv, false};
    break;
  }
  default: break;
  }
  if (s.rope) {
    if (s.variant == Variant::Sdpa) { // mha's projections are new tensors already
      queries_ = q_;
      keysIn_ = k_;
      query.data = queries_.data();
      key.data = keysIn_.data();
    }
    rotate(threads, queries_, query, ropeQuery_);
    rotate(threads, keysIn_, key, ropeKey_);
  }

  // Attention per head; mha writes the heads side by side ([B, Tq, H d_v]) for W_O.
  if (attention_) {
    runAttentionBundle(threads);
  } else {
    attendPerHead(threads, query, key, value);
  }
  if (s.variant == Variant::Mha)
    parallelGemm(threads, B * Tq, s.dModel, H * dv, heads_.data(), H * dv,
                 params_.at("w_o").data(), s.dModel, o_.data(), s.dModel);
}

void UnfusedBaseline::rotate(int threads, std::vector<float>& data, const Operand& x,
                             const std::vector<float>& table) const {
  const int64_t pairs = spec_.ropeDims / 2;
  forEachOnThreads(threads, batch_ * x.heads, [&](int64_t bh, int64_t) {
    float* head = data.data() + (x.at(bh / x.heads, bh % x.heads) - x.data);
    for (int64_t t = 0; t < x.rows; ++t) {
      float* row = head + t * x.rowStride();
      const float* cosSin = &table[t * pairs * 2];
      for (int64_t p = 0; p < pairs; ++p) {
        const auto [a, b] = positions::ropePairDims(p, spec_.ropeDims, spec_.ropeStyle);
        const float c = cosSin[2 * p], sn = cosSin[2 * p + 1], xa = row[a], xb = row[b];
        row[a] = xa * c - xb * sn;
        row[b] = xa * sn + xb * c;
      }
    }
  });
}

void UnfusedBaseline::runAttentionBundle(int threads) {
  // The projections are [B, T, heads, d] already: the sdpa bundle's BSHD q, k, v and o.
  const Spec& s = spec_;
  auto tensor = [](float* data, std::vector<int64_t>& shape) {
    DLTensor t{};
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape.data();
    return t;
  };
  std::vector<int64_t> qShape{batch_, seqQ_, s.heads, s.dK}, kShape{batch_, seqK_, s.kvHeads, s.dK},
      vShape{batch_, seqK_, s.kvHeads, s.dV}, oShape{batch_, seqQ_, s.heads, s.dV},
      lShape{batch_};
  DLTensor q = tensor(queries_.data(), qShape), k = tensor(keysIn_.data(), kShape),
           v = tensor(values_.data(), vShape), o = tensor(heads_.data(), oShape);
  std::vector<int32_t> lengths(lengths_.begin(), lengths_.end());
  DLTensor l = tensor(nullptr, lShape);
  l.data = lengths.data();
  l.dtype = {kDLInt, 32, 1};
  std::vector<attnc_named_tensor> named{{"q", &q}, {"k", &k}, {"v", &v}, {"o", &o}};
  if (s.masks.has(MaskKind::Padding))
    named.push_back({"lengths", &l});
  attention_->run(named, threads);
}

void UnfusedBaseline::attendPerHead(int threads, const Operand& query, const Operand& key,
                                    const Operand& value) {
  const Spec& s = spec_;
  const int64_t B = batch_, H = s.heads, dk = s.dK, dv = s.dV, Tq = seqQ_, Tk = seqK_,
                keys = keys_;
  const bool additive = s.variant == Variant::Additive;
  const int64_t perWorker = Tq * keys * (additive ? s.dAttn + 1 : 1);
  scratch_.resize(std::max<int64_t>(1, std::min<int64_t>(threads, B * H)) * perWorker);
  std::vector<float> scaledVa;
  if (additive)
    for (float a : params_.at("v_a"))
      scaledVa.push_back(a * static_cast<float>(s.scale));
  forEachOnThreads(threads, B * H, [&](int64_t bh, int64_t worker) {
    const int64_t b = bh / H, h = bh % H, g = h / s.groupSize();
    float* scores = &scratch_[worker * perWorker];
    if (additive) {
      // hidden[i, j, :] = tanh(W1 q_i + W2 k_j), stored; scores = hidden v_a.
      const int64_t da = s.dAttn;
      float* hidden = scores + Tq * keys;
      const float* qh = &queries_[bh * Tq * da];
      const float* kh = &keysIn_[bh * Tk * da];
      for (int64_t i = 0; i < Tq; ++i)
        for (int64_t j = 0; j < Tk; ++j)
          for (int64_t a = 0; a < da; ++a)
            hidden[(i * Tk + j) * da + a] = qh[i * da + a] + kh[j * da + a];
      tanhInPlace(hidden, static_cast<size_t>(Tq * Tk * da));
      cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(Tq * Tk), static_cast<int>(da),
                  1.0f, hidden, static_cast<int>(da), &scaledVa[h * da], 1, 0.0f, scores, 1);
    } else {
      gemm(Tq, keys, dk, static_cast<float>(s.scale), query.at(b, h), query.rowStride(),
           key.at(b, g), key.rowStride(), true, scores, keys);
    }
    float* o = s.variant == Variant::Mha ? &heads_[b * Tq * H * dv + h * dv]
                                         : &heads_[bh * Tq * dv];
    softmaxTimesValues(scores, keys, b, h, value.at(b, g), value.rowStride(), o,
                       s.variant == Variant::Mha ? H * dv : dv);
  });
}

std::vector<float> UnfusedBaseline::output() const {
  if (spec_.variant == Variant::Mha)
    return o_;
  if (spec_.layout == Layout::Bhsd)
    return heads_;
  Array4 a(batch_, spec_.heads, seqQ_, spec_.dV);
  a.data.assign(heads_.begin(), heads_.end());
  a = a.swapMiddle();
  return std::vector<float>(a.data.begin(), a.data.end());
}

} // namespace attnc::bench
