#include "Npy.h"

#include "Support/Errors.h"
#include "attnc/DType.hpp"

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

namespace attnc::npy {
namespace {

struct Descr {
  const char* text;
  const char* dtype;
};
// NumPy type strings and the attnc dtype each becomes.
constexpr Descr kDescrs[] = {{"<f8", "f64"}, {"<f4", "f32"}, {"<f2", "f16"}, {"<i8", "i64"},
                             {"<i4", "i32"}, {"|u1", "u8"},  {"|b1", "u8"}};

[[noreturn]] void bad(const std::filesystem::path& path, const std::string& what) {
  throw UsageError(path.string() + ": " + what);
}

// The value of 'key' in the header's Python dict literal.
std::string dictValue(const std::string& header, const std::string& key,
                      const std::filesystem::path& path) {
  std::smatch match;
  std::regex pattern("'" + key + "'\\s*:\\s*('[^']*'|True|False|\\([^)]*\\))");
  if (!std::regex_search(header, match, pattern))
    bad(path, "header has no '" + key + "'");
  return match[1];
}

} // namespace

HostTensor read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    bad(path, "cannot open");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    bad(path, "not a .npy file");
  uint32_t headerLength = 0;
  if (magic[6] == 1) {
    unsigned char len[2];
    in.read(reinterpret_cast<char*>(len), 2);
    headerLength = len[0] | (len[1] << 8);
  } else {
    unsigned char len[4];
    in.read(reinterpret_cast<char*>(len), 4);
    headerLength = len[0] | (len[1] << 8) | (len[2] << 16) | (uint32_t(len[3]) << 24);
  }
  std::string header(headerLength, '\0');
  if (!in.read(header.data(), headerLength))
    bad(path, "truncated header");

  std::string descr = dictValue(header, "descr", path);
  descr = descr.substr(1, descr.size() - 2);
  const char* dtypeName = nullptr;
  for (const Descr& d : kDescrs)
    if (descr == d.text)
      dtypeName = d.dtype;
  if (!dtypeName)
    bad(path, "unsupported dtype '" + descr + "'; allowed: <f8 <f4 <f2 <i8 <i4 |u1 |b1");
  if (dictValue(header, "fortran_order", path) != "False")
    bad(path, "Fortran-order arrays are not supported; save with np.ascontiguousarray");
  std::string shapeText = dictValue(header, "shape", path);
  std::vector<int64_t> shape;
  std::stringstream dims(shapeText.substr(1, shapeText.size() - 2));
  std::string dim;
  while (std::getline(dims, dim, ',')) {
    if (dim.find_first_not_of(" ") == std::string::npos)
      continue;
    try {
      shape.push_back(std::stoll(dim));
    } catch (const std::exception&) {
      bad(path, "bad shape " + shapeText);
    }
  }
  HostTensor tensor(*parseDType(dtypeName), shape);
  if (!in.read(static_cast<char*>(tensor.data()), static_cast<std::streamsize>(tensor.bytes())))
    bad(path, "holds fewer elements than its shape " + shapeText + " says");
  return tensor;
}

void write(const std::filesystem::path& path, const HostTensor& tensor) {
  const std::string name = dtypeName(tensor.dtype());
  const HostTensor* source = &tensor;
  HostTensor widened(*parseDType("f32"), tensor.shape());
  if (name == "bf16") {
    widened.assign(tensor.values());
    source = &widened;
  }
  std::string descr;
  for (const Descr& d : kDescrs)
    if (dtypeName(source->dtype()) == d.dtype && descr.empty())
      descr = d.text;
  if (descr.empty())
    throw UsageError("cannot write dtype " + name + " to .npy");

  std::string shape = "(";
  for (int64_t extent : source->shape())
    shape += std::to_string(extent) + ",";
  if (source->shape().size() > 1)
    shape.pop_back();
  shape += ")";
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';

  std::filesystem::path temporary = path;
  temporary += ".partial";
  {
    std::ofstream out(temporary, std::ios::binary);
    uint16_t length = static_cast<uint16_t>(header.size());
    out.write("\x93NUMPY\x01\x00", 8);
    out.put(static_cast<char>(length & 0xFF));
    out.put(static_cast<char>(length >> 8));
    out << header;
    out.write(static_cast<const char*>(source->data()),
              static_cast<std::streamsize>(source->bytes()));
    if (!out.flush()) {
      std::filesystem::remove(temporary);
      throw JobError("cannot write " + path.string());
    }
  }
  std::filesystem::rename(temporary, path);
}

} // namespace attnc::npy
