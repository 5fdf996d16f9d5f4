#include "Abi/Arguments.h"

#include "Spec/SpecNames.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace attnc {
namespace {

DimExpr c(int64_t v) {
  return DimExpr::constant(v);
}
const DimExpr kB = DimExpr::of(SizeSymbol::Batch);
const DimExpr kTq = DimExpr::of(SizeSymbol::SeqQ);
const DimExpr kTk = DimExpr::of(SizeSymbol::SeqK);
const DimExpr kRows = DimExpr::of(SizeSymbol::QueryRows);

// [B, heads, T, dim] or [B, T, heads, dim] as the layout orders them.
std::vector<DimExpr> headTensor(const Spec& s, DimExpr seq, int64_t heads, int64_t dim) {
  if (s.layout == Layout::Bshd)
    return {kB, seq, c(heads), c(dim)};
  return {kB, c(heads), seq, c(dim)};
}

} // namespace

std::string_view roleName(ArgumentRole role) {
  switch (role) {
  case ArgumentRole::Input: return "input";
  case ArgumentRole::Param: return "param";
  case ArgumentRole::Output: return "output";
  }
  return "?";
}

std::vector<Argument> kernelArguments(const Spec& s) {
  const std::string dtype(dtypeName(s.dtype));
  const std::vector<std::string> data{dtype};
  std::vector<Argument> args;
  auto add = [&](std::string name, ArgumentRole role, std::vector<std::string> dtypes,
                 std::vector<DimExpr> shape, ArgumentFill fill, std::string doc,
                 int fanInDim = -1) {
    args.push_back({std::move(name), role, std::move(dtypes), std::move(shape), fill,
                    std::move(doc), fanInDim});
  };
  const int64_t H = s.heads, Hkv = s.kvHeads;

  if (s.variant == Variant::Mha) {
    add("q", ArgumentRole::Input, data, {kB, kTq, c(s.dModel)}, ArgumentFill::Normal,
        "query input");
    add("k", ArgumentRole::Input, data, {kB, kTk, c(s.dModel)}, ArgumentFill::Normal, "key input");
    add("v", ArgumentRole::Input, data, {kB, kTk, c(s.dModel)}, ArgumentFill::Normal,
        "value input");
  } else if (s.raggedQueries) {
    add("q", ArgumentRole::Input, data, {kRows, c(H), c(s.dQ)}, ArgumentFill::Normal,
        "every sequence's query rows, packed");
  } else {
    add("q", ArgumentRole::Input, data, headTensor(s, kTq, H, s.dQ), ArgumentFill::Normal,
        "queries");
  }
  if (s.variant != Variant::Mha) {
    // A quantized cache's rows (int8, or FP8 E4M3 bytes as u8: DLPack 0.6 has no float8 code),
    // and each position's scale per KV head: k = k_scale * k_int8, k_scale * e4m3(k_bytes).
    const bool int8 = s.kvDtype == KvDType::Int8, fp8 = s.kvDtype == KvDType::Fp8E4m3;
    const bool quantized = int8 || fp8;
    const std::vector<std::string> cacheData = int8  ? std::vector<std::string>{"i8"}
                                               : fp8 ? std::vector<std::string>{"u8"}
                                                     : data;
    const ArgumentFill cacheFill = int8  ? ArgumentFill::Int8Values
                                   : fp8 ? ArgumentFill::Fp8Values
                                         : ArgumentFill::Normal;
    if (s.kvCache == KvCache::Paged) {
      // [pages, page_size, kv_heads, d] (nhd: vLLM's and FlashInfer's default) or
      // [pages, kv_heads, page_size, d] (hnd).
      const DimExpr pages = DimExpr::of(SizeSymbol::Pages);
      auto page = [&](int64_t dim) {
        return s.pageLayout == PageLayout::Nhd
                   ? std::vector<DimExpr>{pages, c(s.pageSize), c(Hkv), c(dim)}
                   : std::vector<DimExpr>{pages, c(Hkv), c(s.pageSize), c(dim)};
      };
      add("k_pages", ArgumentRole::Input, cacheData, page(s.dK), cacheFill, "key cache pages");
      add("v_pages", ArgumentRole::Input, cacheData, page(s.dV), cacheFill, "value cache pages");
      if (quantized) {
        std::vector<DimExpr> scales = page(1);
        scales.pop_back();
        add("k_scale", ArgumentRole::Input, {"f32"}, scales, ArgumentFill::RowScales,
            "each key row's scale, as k_pages without d");
        add("v_scale", ArgumentRole::Input, {"f32"}, scales, ArgumentFill::RowScales,
            "each value row's scale, as v_pages without d");
      }
    } else {
      add("k", ArgumentRole::Input, cacheData, headTensor(s, kTk, Hkv, s.dK), cacheFill,
          s.cached() ? "key cache, filled to seq_lens[b]" : "keys");
      add("v", ArgumentRole::Input, cacheData, headTensor(s, kTk, Hkv, s.dV), cacheFill,
          s.cached() ? "value cache, filled to seq_lens[b]" : "values");
      if (quantized) {
        std::vector<DimExpr> scales = headTensor(s, kTk, Hkv, 1);
        scales.pop_back();
        add("k_scale", ArgumentRole::Input, {"f32"}, scales, ArgumentFill::RowScales,
            "each key row's scale, as k without d");
        add("v_scale", ArgumentRole::Input, {"f32"}, scales, ArgumentFill::RowScales,
            "each value row's scale, as v without d");
      }
    }
  }
  if (s.kvAppend) {
    // A row per query row, shaped as q with the KV heads.
    auto rows = [&](int64_t dim) {
      return s.raggedQueries ? std::vector<DimExpr>{kRows, c(Hkv), c(dim)}
                             : headTensor(s, kTq, Hkv, dim);
    };
    add("k_new", ArgumentRole::Input, data, rows(s.dK), ArgumentFill::Normal,
        "the step's new keys, written into the cache at the query rows' positions");
    add("v_new", ArgumentRole::Input, data, rows(s.dV), ArgumentFill::Normal,
        "the step's new values, written as k_new");
  }
  if (s.cached())
    add("seq_lens", ArgumentRole::Input, {"i32"}, {kB}, ArgumentFill::Lengths,
        "keys per sequence, at most Tk; the query rows (Tq, or a ragged batch's own) are its last "
        "positions");
  if (s.raggedQueries)
    add("cu_seqlens_q", ArgumentRole::Input, {"i32"}, {DimExpr::plusConstant(SizeSymbol::Batch, 1)},
        ArgumentFill::QueryOffsets,
        "sequence b's query rows are rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of q and o; "
        "0 first, never decreasing, total_q last");
  if (s.kvCache == KvCache::Paged)
    add("block_table", ArgumentRole::Input, {"i32"}, {kB, DimExpr::exactDiv(SizeSymbol::SeqK, s.pageSize)},
        ArgumentFill::BlockTable,
        "the page holding each sequence's positions [p page_size, (p + 1) page_size); "
        "entries past its length are not read");
  if (s.masks.has(MaskKind::Padding))
    add("lengths", ArgumentRole::Input, {"i32"}, {kB}, ArgumentFill::Lengths,
        "valid keys per batch: key j is masked when j >= lengths[b]");
  if (s.masks.has(MaskKind::Tensor))
    add("mask", ArgumentRole::Input, {"u8"}, {kB.orOne(), c(H).orOne(), kTq, kTk},
        ArgumentFill::MaskBits, "explicit mask: nonzero keeps the score");
  if (s.masks.has(MaskKind::BlockSparse))
    add("block_layout", ArgumentRole::Input, {"u8"},
        {c(H).orOne(), DimExpr::ceilDiv(SizeSymbol::SeqQ, s.block),
         DimExpr::ceilDiv(SizeSymbol::SeqK, s.block)},
        ArgumentFill::BlockLayout, "block-sparse layout: nonzero keeps the block");
  if (s.bias)
    add("bias", ArgumentRole::Input, data, {kB.orOne(), c(H).orOne(), kTq, kTk},
        ArgumentFill::Normal, "added to the scores");
  for (const AuxTensor& aux : s.aux) {
    std::vector<DimExpr> shape;
    for (const std::string& dim : aux.dims)
      shape.push_back(dim == "B"          ? kB
                      : dim == "Tq"       ? kTq
                      : dim == "Tk"       ? kTk
                      : dim == "heads"    ? c(H)
                      : dim == "kv_heads" ? c(Hkv)
                                          : c(std::stoll(dim)));
    const bool ints = aux.elementType == expr::Type::Int;
    add(aux.name, ArgumentRole::Input, {ints ? "i32" : "f32"}, std::move(shape),
        ints ? ArgumentFill::SmallIntegers : ArgumentFill::Normal,
        "aux tensor read by the spec's expressions");
  }

  switch (s.variant) {
  case Variant::Mha:
    add("w_q", ArgumentRole::Param, data, {c(s.dModel), c(H * s.dK)}, ArgumentFill::ScaledNormal,
        "Q = x_q W_Q", 0);
    add("w_k", ArgumentRole::Param, data, {c(s.dModel), c(Hkv * s.dK)}, ArgumentFill::ScaledNormal,
        "K = x_k W_K", 0);
    add("w_v", ArgumentRole::Param, data, {c(s.dModel), c(Hkv * s.dV)}, ArgumentFill::ScaledNormal,
        "V = x_v W_V", 0);
    add("w_o", ArgumentRole::Param, data, {c(H * s.dV), c(s.dModel)}, ArgumentFill::ScaledNormal,
        "O = Concat(head_1..head_H) W_O", 0);
    break;
  case Variant::Additive:
    add("w1", ArgumentRole::Param, data, {c(H), c(s.dAttn), c(s.dQ)}, ArgumentFill::ScaledNormal,
        "score = v_a . tanh(W1 q + W2 k)", 2);
    add("w2", ArgumentRole::Param, data, {c(H), c(s.dAttn), c(s.dK)}, ArgumentFill::ScaledNormal,
        "score = v_a . tanh(W1 q + W2 k)", 2);
    add("v_a", ArgumentRole::Param, data, {c(H), c(s.dAttn)}, ArgumentFill::ScaledNormal,
        "score = v_a . tanh(W1 q + W2 k)", 1);
    break;
  case Variant::Bilinear:
    add("w", ArgumentRole::Param, data, {c(H), c(s.dQ), c(s.dK)}, ArgumentFill::ScaledNormal,
        "score = q^T W k", 1);
    break;
  case Variant::Linformer:
    add("e", ArgumentRole::Param, data, {c(Hkv), c(s.projLen), kTk}, ArgumentFill::ScaledNormal,
        "projected keys E K", 2);
    add("f", ArgumentRole::Param, data, {c(Hkv), c(s.projLen), kTk}, ArgumentFill::ScaledNormal,
        "projected values F V", 2);
    break;
  case Variant::Linear:
    if (s.featureMap == FeatureMap::Favor)
      add("omega", ArgumentRole::Param, data, {c(s.features), c(s.dK)}, ArgumentFill::FavorFeatures,
          "FAVOR+ random features");
    break;
  case Variant::Sdpa: break;
  }

  if (s.sinks)
    add("sinks", ArgumentRole::Param, {"f32"}, {c(H)}, ArgumentFill::Normal,
        "attention sink logit per head: in every row's softmax denominator, with no value");

  const int64_t keysSeen = s.variant == Variant::Linformer ? s.projLen : 0;
  if (s.variant == Variant::Mha)
    add("o", ArgumentRole::Output, data, {kB, kTq, c(s.dModel)}, ArgumentFill::None, "output");
  else if (s.raggedQueries)
    add("o", ArgumentRole::Output, data, {kRows, c(H), c(s.dV)}, ArgumentFill::None,
        "output, packed as q");
  else
    add("o", ArgumentRole::Output, data, headTensor(s, kTq, H, s.dV), ArgumentFill::None, "output");
  // FlashAttention's varlen order for a ragged batch: [H, total_q].
  if (s.lse)
    add("lse", ArgumentRole::Output, {"f32"},
        s.raggedQueries ? std::vector<DimExpr>{c(H), kRows} : std::vector<DimExpr>{kB, c(H), kTq},
        ArgumentFill::None, "log-sum-exp of each score row (-inf when fully masked)");
  if (s.weights)
    add("weights", ArgumentRole::Output, {"f32"}, {kB, c(H), kTq, keysSeen ? c(keysSeen) : kTk},
        ArgumentFill::None, "normalised attention weights, before dropout");
  // The last outputs (the Python front takes them so from the manifest's end).
  if (s.saveProjections) {
    add("q_proj", ArgumentRole::Output, {"f32"}, {kB, kTq, c(H * s.dK)}, ArgumentFill::None,
        "Q = (x_q + PE) W_Q before RoPE, heads side by side, for the backward");
    add("k_proj", ArgumentRole::Output, {"f32"}, {kB, kTk, c(Hkv * s.dK)}, ArgumentFill::None,
        "K = (x_k + PE) W_K before RoPE, heads side by side, for the backward");
    add("v_proj", ArgumentRole::Output, {"f32"}, {kB, kTk, c(Hkv * s.dV)}, ArgumentFill::None,
        "V = (x_v + PE) W_V, heads side by side, for the backward");
    add("o_heads", ArgumentRole::Output, {"f32"}, {kB, kTq, c(H * s.dV)}, ArgumentFill::None,
        "Concat(head_1..head_H), W_O's input, for the backward");
  }
  return args;
}

bool learnable(const Argument& a) {
  const bool floats = a.dtypes.front().front() == 'f' || a.dtypes.front() == "bf16";
  return a.role != ArgumentRole::Output && floats && a.name != "omega";
}

std::string gradientName(std::string_view name) {
  return std::string(kGradientPrefix) + std::string(name);
}

std::string learnedName(std::string_view gradient) {
  return std::string(gradient.substr(kGradientPrefix.size()));
}

std::vector<Argument> backwardArguments(const Spec& s) {
  const std::vector<Argument> forward = kernelArguments(s);
  std::vector<Argument> args;
  for (const Argument& a : forward)
    if (a.role != ArgumentRole::Output)
      args.push_back(a);
  // What the backward reads of the forward's outputs: all but the weights (o, lse, and mha's
  // saved projections).
  for (const Argument& a : forward)
    if (a.role == ArgumentRole::Output && a.name != "weights")
      args.push_back({a.name, ArgumentRole::Input, a.dtypes, a.shape, ArgumentFill::None,
                      "the forward's " + a.name, -1});
  const Argument& o = *std::find_if(forward.begin(), forward.end(),
                                    [](const Argument& a) { return a.name == "o"; });
  args.push_back({gradientName("o"), ArgumentRole::Input, o.dtypes, o.shape, ArgumentFill::Normal,
                  "dL/do, the loss's gradient by the forward's output", -1});
  for (const Argument& a : forward)
    if (learnable(a))
      args.push_back({gradientName(a.name), ArgumentRole::Output, a.dtypes, a.shape,
                      ArgumentFill::None, "dL/d" + a.name, -1});
  return args;
}

namespace {

// kernelArguments of a spec with every optional argument on (each mask's
// tensor, bias, sinks, lse, weights, kv_append's new rows, mha's saved projections), under every
// combination of the keys that choose among the others: the variant, the cache, its dtype, the
// feature map and packed queries. Each enumeration is read from its name table, so a value added
// there is covered here.
std::set<std::string> collectBuiltinArgumentNames() {
  Spec s;
  for (unsigned k = 0; k < static_cast<unsigned>(MaskKind::Count); ++k)
    s.masks.add(static_cast<MaskKind>(k));
  s.bias = s.sinks = s.lse = s.weights = s.kvAppend = s.saveProjections = true;
  s.pageSize = s.block = 1;
  std::set<std::string> names;
  for (const auto& variant : variantNames())
    for (const auto& cache : kvCacheNames())
      for (const auto& kvDtype : kvDTypeNames())
        for (const auto& map : featureMapNames())
          for (bool ragged : {false, true}) {
            s.variant = variant.second;
            s.kvCache = cache.second;
            s.kvDtype = kvDtype.second;
            s.featureMap = map.second;
            s.raggedQueries = ragged;
            for (const Argument& a : kernelArguments(s))
              names.insert(a.name);
          }
  return names;
}

} // namespace

const std::set<std::string>& builtinArgumentNames() {
  static const std::set<std::string> names = collectBuiltinArgumentNames();
  return names;
}

nlohmann::json argumentsToJson(const std::vector<Argument>& arguments) {
  nlohmann::json list = nlohmann::json::array();
  for (const Argument& a : arguments) {
    nlohmann::json shape = nlohmann::json::array();
    for (const DimExpr& d : a.shape) {
      if (!d.symbol && !d.broadcastable)
        shape.push_back(d.value);
      else
        shape.push_back(d.str());
    }
    list.push_back({{"name", a.name},
                    {"role", roleName(a.role)},
                    {"dtypes", a.dtypes},
                    {"shape", shape},
                    {"doc", a.doc}});
  }
  return list;
}

} // namespace attnc
