#include "RuntimeManifest.h"

#include "attnc/DType.hpp"

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

} // namespace

RuntimeManifest parseRuntimeManifest(std::string_view text) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object())
    fail("not a JSON object");
  RuntimeManifest m;
  m.abiVersion = field(root, "abi_version", json::value_t::number_unsigned).get<uint32_t>();
  const json& target = field(root, "target", json::value_t::object);
  m.arch = field(target, "arch", json::value_t::string).get<std::string>();
  m.device = field(target, "device", json::value_t::string).get<std::string>();
  if (m.device == "cuda")
    m.cudaArch = field(target, "cuda_arch", json::value_t::string).get<std::string>();
  for (const json& feature : field(target, "cpu_features", json::value_t::array)) {
    if (!feature.is_string())
      fail("target.cpu_features holds a non-string");
    m.cpuFeatures.push_back(feature.get<std::string>());
  }
  m.workspaceBytes = field(root, "workspace_bytes", json::value_t::number_unsigned).get<uint64_t>();
  for (const json& entry : field(root, "arguments", json::value_t::array))
    m.arguments.push_back(parseArgument(entry));
  if (root.contains("shared_runtime"))
    m.sharedRuntime = field(root, "shared_runtime", json::value_t::string).get<std::string>();
  return m;
}

} // namespace attnc::runtime
