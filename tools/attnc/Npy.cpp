#include "Npy.h"

#include "Support/Errors.h"
#include "attnc/DType.hpp"
#include "attnc/TensorSpan.hpp"

#include <cctype>
#include <charconv>
#include <cstring>
#include <fstream>
#include <set>

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

// NumPy writes headers of a few hundred bytes and reads none past 10 000 by default.
constexpr uint64_t kMaxHeaderBytes = 1 << 16;

// The header: a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// with exactly these three keys, parsed strictly: anything else is refused, never guessed at.
struct Header {
  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;
  std::string shapeText;
};

class HeaderParser {
public:
  HeaderParser(std::string_view text, const std::filesystem::path& path)
      : text_(text), path_(path) {}

  Header parse() {
    if (auto control = controlCharacter(text_)) // messages echo keys and descr
      bad(path_, "bad header: it holds " + *control);
    Header header;
    std::set<std::string> seen;
    expect('{');
    while (!peekIs('}')) {
      const std::string key = quoted();
      if (!seen.insert(key).second)
        fail("key '" + key + "' is given twice");
      expect(':');
      if (key == "descr")
        header.descr = quoted();
      else if (key == "fortran_order")
        header.fortranOrder = boolean();
      else if (key == "shape")
        header.shape = tuple(header.shapeText);
      else
        fail("unknown key '" + key + "'; a .npy header has descr, fortran_order and shape");
      if (!peekIs('}'))
        expect(',');
    }
    expect('}');
    skipSpace();
    if (pos_ != text_.size())
      fail("text after the header's dict");
    for (const char* key : {"descr", "fortran_order", "shape"})
      if (!seen.count(key))
        fail(std::string("header has no '") + key + "'");
    return header;
  }

private:
  [[noreturn]] void fail(const std::string& what) {
    bad(path_, "bad header at byte " + std::to_string(pos_) + ": " + what);
  }
  void skipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])))
      ++pos_;
  }
  bool peekIs(char c) {
    skipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  void expect(char c) {
    if (!peekIs(c))
      fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string quoted() {
    skipSpace();
    const char quote = pos_ < text_.size() ? text_[pos_] : '\0';
    if (quote != '\'' && quote != '"')
      fail("expected a quoted string");
    const size_t close = text_.find(quote, pos_ + 1);
    if (close == std::string_view::npos)
      fail("unterminated string");
    std::string value(text_.substr(pos_ + 1, close - pos_ - 1));
    pos_ = close + 1;
    return value;
  }
  bool boolean() {
    skipSpace();
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}})
      if (text_.substr(pos_).starts_with(word)) {
        pos_ += std::string_view(word).size();
        return value;
      }
    fail("expected True or False");
  }
  // (n0, n1, ...) of non-negative decimal integers; (n,) and () too.
  std::vector<int64_t> tuple(std::string& text) {
    skipSpace();
    const size_t start = pos_;
    expect('(');
    std::vector<int64_t> dims;
    while (!peekIs(')')) {
      int64_t v = 0;
      const char* first = text_.data() + pos_;
      auto [end, ec] = std::from_chars(first, text_.data() + text_.size(), v);
      if (ec != std::errc() || v < 0)
        fail("shape holds something other than a non-negative integer that fits 64 bits");
      pos_ += static_cast<size_t>(end - first);
      dims.push_back(v);
      if (dims.size() > static_cast<size_t>(kMaxTensorRank))
        fail("shape has more than " + std::to_string(kMaxTensorRank) + " dims");
      if (!peekIs(')'))
        expect(',');
    }
    expect(')');
    text = std::string(text_.substr(start, pos_ - start));
    return dims;
  }

  std::string_view text_;
  const std::filesystem::path& path_;
  size_t pos_ = 0;
};

// Reads exactly `bytes` bytes, or refuses the file as truncated.
void readExactly(std::ifstream& in, void* out, uint64_t bytes, const std::filesystem::path& path,
                 const char* what) {
  if (!in.read(static_cast<char*>(out), static_cast<std::streamsize>(bytes)))
    bad(path, std::string("truncated ") + what);
}

} // namespace

HostTensor read(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error))
    bad(path, std::filesystem::exists(path, error) ? "not a regular file" : "cannot open: no such file");
  const uint64_t fileBytes = std::filesystem::file_size(path, error);
  std::ifstream in(path, std::ios::binary);
  if (!in || error)
    bad(path, "cannot open");
  unsigned char preamble[8];
  if (fileBytes < 10 || !in.read(reinterpret_cast<char*>(preamble), 8) ||
      std::memcmp(preamble, "\x93NUMPY", 6) != 0)
    bad(path, "not a .npy file");
  const unsigned major = preamble[6];
  if (major < 1 || major > 3 || preamble[7] != 0)
    bad(path, "format version " + std::to_string(major) + "." + std::to_string(preamble[7]) +
                  "; this reader knows 1.0, 2.0 and 3.0");
  // Version 1 stores the header length in 2 bytes, later versions in 4 (little-endian).
  const uint64_t lengthBytes = major == 1 ? 2 : 4;
  unsigned char length[4] = {0, 0, 0, 0};
  readExactly(in, length, lengthBytes, path, "header length");
  const uint64_t headerBytes =
      length[0] | (length[1] << 8) | (uint64_t{length[2]} << 16) | (uint64_t{length[3]} << 24);
  const uint64_t dataOffset = 8 + lengthBytes + headerBytes;
  if (headerBytes > kMaxHeaderBytes)
    bad(path, "header length " + std::to_string(headerBytes) + " is past the " +
                  std::to_string(kMaxHeaderBytes) + " bytes a .npy header may take");
  if (dataOffset > fileBytes)
    bad(path, "truncated header: it declares " + std::to_string(headerBytes) +
                  " bytes and the file has " + std::to_string(fileBytes));
  std::string headerText(headerBytes, '\0');
  readExactly(in, headerText.data(), headerBytes, path, "header");
  const Header header = HeaderParser(headerText, path).parse();

  const char* dtypeName = nullptr;
  for (const Descr& d : kDescrs)
    if (header.descr == d.text)
      dtypeName = d.dtype;
  if (!dtypeName)
    bad(path, "unsupported dtype '" + header.descr + "'; allowed: <f8 <f4 <f2 <i8 <i4 |u1 |b1");
  if (header.fortranOrder)
    bad(path, "Fortran-order arrays are not supported; save with np.ascontiguousarray");
  const DLDataType dtype = *parseDType(dtypeName);
  // Sized before anything is allocated: the data must be exactly what the header declares.
  const std::optional<int64_t> count =
      elementCount(header.shape.data(), static_cast<int32_t>(header.shape.size()));
  const std::optional<int64_t> bytes = count ? byteCount(*count, dtype) : std::nullopt;
  if (!bytes)
    bad(path, "shape " + header.shapeText + " of " + header.descr +
                  " has more bytes than the address space holds");
  const uint64_t dataBytes = fileBytes - dataOffset;
  if (dataBytes != static_cast<uint64_t>(*bytes))
    bad(path, "holds " + std::to_string(dataBytes) + " bytes of data; its shape " +
                  header.shapeText + " of " + header.descr + " needs exactly " +
                  std::to_string(*bytes));
  HostTensor tensor(dtype, header.shape);
  readExactly(in, tensor.data(), tensor.bytes(), path, "data");
  return tensor;
}

namespace {

// The .npy encoding of `tensor`: a version 1.0 header padded to 64 bytes, then the data.
std::string encode(const HostTensor& tensor) {
  const std::string name = dtypeName(tensor.dtype());
  const HostTensor* source = &tensor;
  HostTensor widened(*parseDType("f32"), name == "bf16" ? tensor.shape() : std::vector<int64_t>{});
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

  std::string contents = "\x93NUMPY\x01";
  contents += '\0';
  contents += static_cast<char>(header.size() & 0xFF);
  contents += static_cast<char>(header.size() >> 8);
  contents += header;
  contents.append(static_cast<const char*>(source->data()), source->bytes());
  return contents;
}

} // namespace

PendingWrite::PendingWrite(const std::filesystem::path& path, const HostTensor& tensor)
    : file_(path, encode(tensor)) {}

void write(const std::filesystem::path& path, const HostTensor& tensor) {
  PendingWrite(path, tensor).commit();
}

} // namespace attnc::npy
