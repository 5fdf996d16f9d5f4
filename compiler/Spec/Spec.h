// The attention spec: what the user asks for, validated and canonical.
//
// A spec is one line of key=value pairs ("variant=sdpa heads=32 kv_heads=8 d_k=128
// mask=causal dtype=bf16") or a JSON object with the same keys. Parsing fills defaults and
// checks every key, value and combination; the canonical form sorts the keys that apply to
// the spec's variant, with defaults filled, and round-trips exactly. Its hash names artifacts
// and keys the tuning database. docs/spec.md lists every key.
#ifndef ATTNC_COMPILER_SPEC_SPEC_H
#define ATTNC_COMPILER_SPEC_SPEC_H

#include "Expr/ExprEval.h"
#include "Support/Errors.h"

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnc {

enum class Variant { Sdpa, Mha, Additive, Bilinear, Linear, Linformer };
enum class DType { F32, F16, BF16 };
enum class Layout { Bhsd, Bshd };
// Where keys and values live when the queries decode against a KV cache (docs/spec.md, "KV
// caches"): the plain k and v of one sequence each (none), per-sequence buffers [B, H_kv, Tk, d]
// filled to seq_lens[b] (contiguous), or pages of page_size rows that a block table maps each
// sequence's positions to (paged, vLLM's layout).
enum class KvCache { None, Contiguous, Paged };
// A page's dimension order (FlashInfer's names): [page_size, H_kv, d] (NHD, vLLM's and
// FlashInfer's default) or [H_kv, page_size, d] (HND: each head's rows of a page contiguous).
enum class PageLayout { Nhd, Hnd };
// A cache's element type: the spec's dtype, or int8 or FP8 E4M3 (bytes, as u8) with one f32
// scale per position and KV head (symmetric: k = k_scale * k_int8, k_scale * e4m3(k_bytes)).
enum class KvDType { Same, Int8, Fp8E4m3 };
// Where query row i sits among the keys when Tq != Tk: top-left puts it at position i,
// bottom-right at i + Tk - Tq (so the last query sees the last key, as in decoding).
enum class CausalAlign { TopLeft, BottomRight };
enum class FeatureMap { Elu1, Relu, Favor };
// RoPE pairs: "half" rotates (x_i, x_{i+d/2}) (GPT-NeoX, LLaMA); "interleaved" rotates
// (x_{2i}, x_{2i+1}) (GPT-J, the RoFormer paper).
enum class RopeStyle { Half, Interleaved };
enum class PositionalEncoding { None, Sinusoidal };

// Mask patterns. Constraints (causal, padding, tensor) intersect; sparsity patterns (window,
// global, strided, dilated, block_sparse, bigbird) are united, and their union intersects the
// constraints. With no sparsity pattern every key passes that stage.
enum class MaskKind : uint8_t {
  Causal,
  Padding,
  Window,
  Global,
  Strided,
  Dilated,
  BlockSparse,
  BigBird,
  Tensor,
  Count
};

// The sparsity patterns, which unite.
inline constexpr MaskKind kSparsityPatterns[] = {MaskKind::Window,  MaskKind::Global,
                                                 MaskKind::Strided, MaskKind::Dilated,
                                                 MaskKind::BlockSparse, MaskKind::BigBird};

struct MaskSet {
  uint16_t bits = 0;
  bool has(MaskKind k) const { return bits & (1u << static_cast<unsigned>(k)); }
  void add(MaskKind k) { bits |= 1u << static_cast<unsigned>(k); }
  bool empty() const { return bits == 0; }
  bool hasSparsityPattern() const;
  friend bool operator==(MaskSet, MaskSet) = default;
};

// A named scalar of params="cap=30 width=128", which expressions read by name: an int when written
// as one (within 32 bits, as kernels compute ints), else a float.
struct SpecParam {
  std::string name;
  expr::Value value;
};

// An auxiliary tensor of aux="doc:i32[B,Tk]": an extra kernel input, after the spec's own
// inputs in manifest order, that expressions index. Each dim is B, Tq, Tk, heads, kv_heads or a
// positive integer, as written.
struct AuxTensor {
  std::string name;
  expr::Type elementType; // Int: i32; Float: f32
  std::vector<std::string> dims;
};

// score_mod or mask_mod: the text (canonical once the spec is built) and its checked tree.
struct SpecExpression {
  std::string text;
  std::shared_ptr<const expr::Node> tree;
  bool given() const { return !text.empty(); }
  // Whether it calls philox(), which draws under the spec's seed (random::kExpressionStream).
  bool draws() const;
};

struct Spec {
  Variant variant = Variant::Sdpa;
  int64_t heads = 1;
  int64_t kvHeads = 0; // 0: heads
  int64_t dQ = 0;      // query dim of additive/bilinear; 0: d_k
  int64_t dK = 0;      // required
  int64_t dV = 0;      // 0: d_k
  int64_t dModel = 0;  // mha; 0: heads * d_k
  int64_t dAttn = 0;   // additive's hidden size; 0: d_k
  double scale = 0;    // 0: the variant's default
  MaskSet masks;
  CausalAlign causalAlign = CausalAlign::BottomRight;
  int64_t windowLeft = -1; // required by window and dilated
  int64_t windowRight = 0;
  int64_t globalTokens = 0;
  int64_t stride = 0;
  int64_t dilation = 0;
  int64_t block = 0;
  int64_t windowBlocks = 3;
  int64_t globalBlocks = 2;
  int64_t randomBlocks = 3;
  bool alibi = false;
  double softcap = 0; // 0: off
  bool bias = false;
  bool rope = false;
  double ropeTheta = 10000;
  int64_t ropeDims = 0; // 0: d_k
  RopeStyle ropeStyle = RopeStyle::Half;
  double dropout = 0;
  std::optional<uint64_t> seed;
  PositionalEncoding pe = PositionalEncoding::None;
  FeatureMap featureMap = FeatureMap::Elu1;
  int64_t features = 256;
  int64_t projLen = 0;
  bool lse = false;
  bool weights = false;
  // The bundle also holds the backward entry (docs/spec.md, "Backward"): from dL/do, the
  // gradients of every argument a model may learn (Abi/Arguments.h, backwardArguments).
  bool backward = false;
  // mha: the forward also returns the projections Q, K, V and the heads' output before W_O
  // (q_proj, k_proj, v_proj, o_heads), and the backward reads them where it would recompute
  // them: the tensors a framework saves for backward.
  bool saveProjections = false;
  // Attention sinks (gpt-oss): a learned logit per query head, sinks[h], in every row's softmax
  // denominator; no value is attached to it.
  bool sinks = false;
  KvCache kvCache = KvCache::None;
  int64_t pageSize = 0; // paged: rows per page, required
  PageLayout pageLayout = PageLayout::Nhd;
  KvDType kvDtype = KvDType::Same;
  // Ragged queries (with a KV cache): sequence b's query rows are rows [cu_seqlens_q[b],
  // cu_seqlens_q[b + 1]) of q [total_q, H, d_k] and o, its own Tq; the kernel compiled is the
  // spec without it (unragged), run by the runtime once per run of sequences with the same rows.
  bool raggedQueries = false;
  // The step's new keys and values (k_new, v_new, one row per query row) written into the cache
  // at the query rows' positions before attending: rotated by RoPE, quantised for an int8
  // cache. The runtime writes them (the kernel is kernelSpec()'s).
  bool kvAppend = false;
  DType dtype = DType::F32;
  Layout layout = Layout::Bhsd;
  // Attention expressions (docs/spec.md, "Expressions"): score_mod applies after the built-in
  // modifiers, mask_mod intersects the built-in masks.
  SpecExpression scoreMod, maskMod;
  std::vector<SpecParam> params; // sorted by name
  std::vector<AuxTensor> aux;    // in the order given

  // Derived facts the reference and backends share.
  int64_t groupSize() const { return heads / kvHeads; } // query heads per kv head
  bool cached() const { return kvCache != KvCache::None; }
  // The spec a run of a ragged batch's sequences with the same number of rows computes: this
  // one with its queries not packed (q, o [B, Tq, H, d], B the run's sequences, Tq their rows).
  Spec unragged() const;
  // The spec the bundle's kernel computes: unragged, and with the new rows already in the cache
  // (the runtime splits a ragged batch into runs and writes the new rows before calling it).
  Spec kernelSpec() const;
  // Whether the bundle's kernel computes another spec than this one.
  bool preparedByRuntime() const { return raggedQueries || kvAppend; }
  bool needsSeed() const;
  // True when some feature depends on where query rows sit among the keys.
  bool usesAlignment() const;

  std::string canonical() const;
  nlohmann::json toJson() const;
  // FNV-1a 64 of the canonical form, as 16 hex digits.
  std::string hash() const;
};

// A bad spec: the message names the key, the value and what is allowed.
class SpecError : public UsageError {
public:
  using UsageError::UsageError;
};

Spec parseSpec(std::string_view text);
Spec parseSpecJson(const nlohmann::json& object);
// A path to a .json file (a regular file of at most 1 MiB), or spec text.
Spec loadSpec(std::string_view textOrPath);
// JSON text parsed with repeated keys refused and syntax errors reported with their line and
// column; `what` names the text in messages. Throws SpecError.
nlohmann::json parseJsonObjectStrictly(std::string_view text, const std::string& what);

std::string_view variantName(Variant v);
std::string_view dtypeName(DType d);
std::string_view maskKindName(MaskKind k);

} // namespace attnc

#endif // ATTNC_COMPILER_SPEC_SPEC_H
