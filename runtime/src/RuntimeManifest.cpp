#include "RuntimeManifest.h"

#include "attnc/DType.hpp"
#include "attnc/Hash.hpp"
#include "attnc/SequenceViews.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace attnc::runtime {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("manifest: " + what);
}

const json& field(const json& object, const char* name, json::value_t type) {
  auto it = object.find(name);
  if (it == object.end())
    fail(std::string("missing field '") + name + "'");
  bool ok = it->type() == type || (type == json::value_t::number_unsigned &&
                                   it->is_number_integer() && it->get<int64_t>() >= 0);
  if (!ok)
    fail(std::string("field '") + name + "' has the wrong type");
  return *it;
}

// The arguments kv_append reads and writes, each of the rank the runtime indexes it with, on a
// CPU target (the runtime writes the rows on the host).
void checkKvAppend(const KvAppend& a, const RuntimeManifest& m) {
  for (const TargetSpec& target : m.targets)
    if (target.device != "cpu")
      fail("kv_append writes the new rows on the host; the bundle targets " + target.device);
  const bool paged = a.order == "nhd" || a.order == "hnd";
  auto require = [&](const std::string& name, size_t rank) -> const ArgumentSpec& {
    for (const ArgumentSpec& arg : m.arguments)
      if (arg.name == name) {
        if (arg.shape.size() != rank)
          fail("kv_append needs '" + name + "' of rank " + std::to_string(rank));
        return arg;
      }
    fail("kv_append needs the argument '" + name + "'");
  };
  const size_t rowsRank = a.rowsOrder == "packed" ? 3 : 4;
  const ArgumentSpec& keys = require("k_new", rowsRank);
  require("v_new", rowsRank);
  require("seq_lens", 1);
  require(paged ? "k_pages" : "k", 4);
  require(paged ? "v_pages" : "v", 4);
  if (paged)
    require("block_table", 2);
  for (const ArgumentSpec& arg : m.arguments)
    if (arg.name == "k_scale" || arg.name == "v_scale")
      require(arg.name, 3);
  const DimExpr& headDim = keys.shape.back();
  if (headDim.symbol || a.ropeDims > headDim.value)
    fail("kv_append's rope_dims " + std::to_string(a.ropeDims) + " exceeds k_new's head dim");
}

// Whether kv_append writes into the argument named `name`: a contiguous or paged cache, or a
// quantized cache's scales.
bool appendedInto(std::string_view name) {
  for (std::string_view cache : {"k", "v", "k_pages", "v_pages", "k_scale", "v_scale"})
    if (name == cache)
      return true;
  return false;
}

ArgumentSpec parseArgument(const json& entry) {
  if (!entry.is_object())
    fail("an argument is not an object");
  ArgumentSpec arg;
  arg.name = field(entry, "name", json::value_t::string).get<std::string>();
  std::string role = field(entry, "role", json::value_t::string).get<std::string>();
  if (role == "input" || role == "param")
    arg.role = ArgumentRole::Input;
  else if (role == "output")
    arg.role = ArgumentRole::Output;
  else
    fail("argument '" + arg.name + "' has role '" + role + "'; allowed: input, param, output");
  for (const json& name : field(entry, "dtypes", json::value_t::array)) {
    auto dtype = name.is_string() ? parseDType(name.get<std::string>()) : std::nullopt;
    if (!dtype)
      fail("argument '" + arg.name + "' has an unknown dtype " + name.dump());
    arg.dtypes.push_back(*dtype);
  }
  if (arg.dtypes.empty())
    fail("argument '" + arg.name + "' lists no dtype");
  for (const json& dim : field(entry, "shape", json::value_t::array)) {
    std::optional<DimExpr> expr;
    if (dim.is_number_integer() && dim.get<int64_t>() >= 1)
      expr = DimExpr::constant(dim.get<int64_t>());
    else if (dim.is_string())
      expr = DimExpr::parse(dim.get<std::string>());
    if (!expr)
      fail("argument '" + arg.name + "' has a bad dimension " + dim.dump());
    arg.shape.push_back(*expr);
  }
  return arg;
}

TargetSpec parseTarget(const json& target) {
  if (!target.is_object())
    fail("a target is not an object");
  TargetSpec t;
  t.name = target.value("name", std::string("host"));
  t.arch = field(target, "arch", json::value_t::string).get<std::string>();
  t.device = field(target, "device", json::value_t::string).get<std::string>();
  if (t.device == "cuda")
    t.cudaArch = field(target, "cuda_arch", json::value_t::string).get<std::string>();
  for (const json& feature : field(target, "cpu_features", json::value_t::array)) {
    if (!feature.is_string())
      fail("target.cpu_features holds a non-string");
    t.cpuFeatures.push_back(feature.get<std::string>());
  }
  return t;
}

// The backward entry's manifest: the forward's targets, the "backward" arguments, all passed to
// the kernel. A backward has no KV cache, ragged batch or new rows (backward=true takes none),
// so none of their arguments, whose checks the runtime would then run, may appear.
std::shared_ptr<const RuntimeManifest> parseBackward(const json& entry,
                                                     const RuntimeManifest& forward) {
  if (forward.kvAppend)
    fail("a bundle with kv_append has no backward entry");
  auto backward = std::make_shared<RuntimeManifest>();
  backward->abiVersion = forward.abiVersion;
  backward->targets = forward.targets;
  backward->fat = forward.fat;
  backward->sharedRuntime = forward.sharedRuntime;
  constexpr std::string_view kCacheArguments[] = {"seq_lens", "block_table", "cu_seqlens_q",
                                                  "k_pages",  "v_pages",     "k_scale",
                                                  "v_scale",  "k_new",       "v_new"};
  for (const json& argument : field(entry, "arguments", json::value_t::array)) {
    ArgumentSpec arg = parseArgument(argument);
    if (std::find(std::begin(kCacheArguments), std::end(kCacheArguments), arg.name) !=
            std::end(kCacheArguments) ||
        std::any_of(arg.shape.begin(), arg.shape.end(), [](const DimExpr& d) {
          return d.symbol && *d.symbol != SizeSymbol::Batch && *d.symbol != SizeSymbol::SeqQ &&
                 *d.symbol != SizeSymbol::SeqK;
        }))
      fail("backward argument '" + arg.name +
           "' is a KV cache's or a ragged batch's, which a "
           "backward entry never takes");
    arg.written = arg.role == ArgumentRole::Output;
    backward->arguments.push_back(std::move(arg));
    backward->kernelArguments.push_back(backward->kernelArguments.size());
  }
  return backward;
}

} // namespace

RuntimeManifest parseRuntimeManifest(std::string_view text) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object())
    fail("not a JSON object");
  // The compiler stamps the hash of everything else (Manifest.cpp's stampContentHash); a
  // manifest edited or damaged since no longer matches it.
  const std::string stamped = field(root, "content_hash", json::value_t::string).get<std::string>();
  root.erase("content_hash");
  if (const std::string actual = fnv1a64Hex(root.dump()); actual != stamped)
    fail("content_hash is " + stamped + " but the manifest hashes to " + actual +
         "; the bundle was altered or damaged after attnc compiled it");
  RuntimeManifest m;
  m.abiVersion = field(root, "abi_version", json::value_t::number_unsigned).get<uint32_t>();
  m.fat = root.contains("targets");
  if (m.fat) {
    for (const json& target : field(root, "targets", json::value_t::array))
      m.targets.push_back(parseTarget(target));
    if (m.targets.empty())
      fail("field 'targets' lists no target");
  } else {
    m.targets.push_back(parseTarget(field(root, "target", json::value_t::object)));
  }
  for (const json& entry : field(root, "arguments", json::value_t::array))
    m.arguments.push_back(parseArgument(entry));
  if (root.contains("shared_runtime"))
    m.sharedRuntime = field(root, "shared_runtime", json::value_t::string).get<std::string>();
  if (root.contains("kv_append")) {
    // The cache's order, and k_new's.
    const json& append = field(root, "kv_append", json::value_t::object);
    KvAppend a;
    a.order = field(append, "order", json::value_t::string).get<std::string>();
    a.rowsOrder = field(append, "rows_order", json::value_t::string).get<std::string>();
    a.ropeDims = field(append, "rope_dims", json::value_t::number_unsigned).get<int64_t>();
    a.ropeTheta = field(append, "rope_theta", json::value_t::number_float).get<double>();
    a.ropeInterleaved = field(append, "rope_interleaved", json::value_t::boolean).get<bool>();
    if (a.order != "bshd" && a.order != "bhsd" && a.order != "nhd" && a.order != "hnd")
      fail("kv_append's order '" + a.order + "' is none of bshd, bhsd, nhd, hnd");
    if (a.rowsOrder != "bshd" && a.rowsOrder != "bhsd" && a.rowsOrder != "packed")
      fail("kv_append's rows_order '" + a.rowsOrder + "' is none of bshd, bhsd, packed");
    if (a.ropeDims % 2 != 0)
      fail("kv_append's rope_dims " + std::to_string(a.ropeDims) + " is odd");
    checkKvAppend(a, m);
    m.kvAppend = a;
  }
  if (root.contains("backward"))
    m.backward = parseBackward(field(root, "backward", json::value_t::object), m);
  for (size_t i = 0; i < m.arguments.size(); ++i) {
    ArgumentSpec& arg = m.arguments[i];
    m.ragged = m.ragged || isQueryOffsets(arg.shape);
    arg.written = arg.role == ArgumentRole::Output || (m.kvAppend && appendedInto(arg.name));
    if (!m.kvAppend || (arg.name != "k_new" && arg.name != "v_new"))
      m.kernelArguments.push_back(i);
  }
  return m;
}

DLTensor* argumentNamed(const RuntimeManifest& manifest, const std::vector<DLTensor*>& tensors,
                        std::string_view name) {
  for (size_t a = 0; a < manifest.arguments.size(); ++a)
    if (manifest.arguments[a].name == name)
      return tensors[a];
  return nullptr;
}

} // namespace attnc::runtime
