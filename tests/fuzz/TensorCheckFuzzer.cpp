// The runtime's tensor checks on DLTensors a hostile caller builds: any rank, extents, strides,
// byte offsets and data addresses. checkTensors must return a verdict without reading a field
// it has not validated (ASan catches a read of ndim shape entries past the given array), and
// a tensor it accepts must have a span that fits the address space and the manifest's shape,
// checked again here with the kernel entries' own contract (bundle/ShapeContract.h).
#include "RuntimeManifest.h"
#include "TensorCheck.h"
#include "attnc/Hash.hpp"
#include "attnc/TensorSpan.hpp"
#include "bundle/ShapeContract.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

// sdpa with GQA, a padding mask and lse: inputs q, k, v, lengths; outputs o, lse.
constexpr const char* kManifest = R"json({"abi_version": 3,
  "target": {"arch": "x86_64", "device": "cpu", "cpu_features": []},
  "arguments": [
    {"name": "q", "role": "input", "dtypes": ["f32"], "shape": ["B", 4, "Tq", 8]},
    {"name": "k", "role": "input", "dtypes": ["f32"], "shape": ["B", 2, "Tk", 8]},
    {"name": "v", "role": "input", "dtypes": ["f32"], "shape": ["B", 2, "Tk", 8]},
    {"name": "lengths", "role": "input", "dtypes": ["i32"], "shape": ["B"]},
    {"name": "o", "role": "output", "dtypes": ["f32"], "shape": ["B", 4, "Tq", 8]},
    {"name": "lse", "role": "output", "dtypes": ["f32"], "shape": ["B|1", 4, "ceil(Tq/1)"]}]})json";

// Takes bytes off the front of the input, zeros once it is used up.
class Bytes {
public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  template <class T> T take() {
    T value{};
    const size_t n = std::min(sizeof(T), size_);
    std::memcpy(&value, data_, n);
    data_ += n;
    size_ -= n;
    return value;
  }

private:
  const uint8_t* data_;
  size_t size_;
};

// Mostly small values, sometimes any 64-bit value: the checks must hold at both.
int64_t anyExtent(Bytes& bytes) {
  const auto choice = bytes.take<uint8_t>();
  return choice < 200 ? choice % 9 : bytes.take<int64_t>();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const attnc::runtime::RuntimeManifest manifest = [] {
    nlohmann::json json = nlohmann::json::parse(kManifest);
    json["content_hash"] = attnc::fnv1a64Hex(json.dump());
    return attnc::runtime::parseRuntimeManifest(json.dump());
  }();
  Bytes bytes(data, size);
  constexpr int kArgs = 6;
  // Each tensor's shape and strides live in arrays exactly as long as its ndim, or shorter
  // when ndim is absurd, so ASan catches a check that reads an entry it should not.
  std::vector<std::vector<int64_t>> shapes(kArgs), strides(kArgs);
  std::vector<DLTensor> tensors(kArgs);
  std::vector<DLTensor*> pointers(kArgs);
  for (int a = 0; a < kArgs; ++a) {
    DLTensor& t = tensors[a];
    // A truthful ndim (the arrays hold that many entries) of 0 to 5, or any int32 at all, which
    // the checks must refuse past kMaxTensorRank without reading a shape entry: the arrays then
    // hold only a few.
    const auto flags = bytes.take<uint8_t>();
    t.ndim = (flags & 2) ? bytes.take<int32_t>() : bytes.take<uint8_t>() % 6;
    const bool plausible = t.ndim >= 0 && t.ndim <= attnc::kMaxTensorRank;
    const size_t rank = plausible ? static_cast<size_t>(t.ndim) : 2;
    shapes[a].resize(rank);
    for (int64_t& extent : shapes[a])
      extent = anyExtent(bytes);
    if (flags & 1) {
      strides[a].resize(rank);
      for (int64_t& stride : strides[a])
        stride = anyExtent(bytes);
    }
    t.shape = (flags & 4) ? nullptr : shapes[a].data();
    t.strides = strides[a].empty() ? nullptr : strides[a].data();
    t.dtype = (flags & 8) ? DLDataType{bytes.take<uint8_t>(), bytes.take<uint8_t>(), 1}
                          : manifest.arguments[a].dtypes.front();
    t.device = {kDLCPU, 0};
    t.byte_offset = (flags & 16) ? bytes.take<uint64_t>() : 0;
    t.data = reinterpret_cast<void*>(bytes.take<uint64_t>() & ~uint64_t{3});
    pointers[a] = &t;
  }
  attnc::RunSizes sizes;
  if (attnc::runtime::checkTensors(manifest, "cpu", pointers, sizes))
    return 0; // refused, with a message
  for (const DLTensor* t : pointers) {
    attnc::TensorSpan span;
    if (attnc::measureSpan(*t, span) || span.end() < span.first)
      std::abort(); // accepted a tensor whose span overflows
  }
  attnc_kernel_call call{};
  call.num_args = kArgs;
  call.args = pointers.data();
  call.batch = sizes[attnc::SizeSymbol::Batch];
  call.seq_q = sizes[attnc::SizeSymbol::SeqQ];
  call.seq_k = sizes[attnc::SizeSymbol::SeqK];
  const std::string contract = attnc::shapeContract(manifest.arguments);
  if (attnc::contractProblem(contract, call))
    std::abort(); // the runtime and the kernel entries disagree about a shape
  return 0;
}
