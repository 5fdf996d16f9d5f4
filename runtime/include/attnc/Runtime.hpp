// C++ wrapper over the runtime's C API: RAII bundles, exceptions that carry the status, and
// DLTensor views of the caller's arrays.
#ifndef ATTNC_RUNTIME_HPP
#define ATTNC_RUNTIME_HPP

#include "attnc/attnc.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace attnc::runtime {

class Error : public std::runtime_error {
public:
  explicit Error(const attnc_error& error)
      : std::runtime_error(error.message), status_(error.status) {}
  attnc_status status() const { return status_; }

private:
  attnc_status status_;
};

class Bundle {
public:
  static Bundle open(const std::string& path) {
    attnc_bundle* handle = nullptr;
    attnc_error error{};
    if (attnc_bundle_open(path.c_str(), &handle, &error) != ATTNC_OK)
      throw Error(error);
    return Bundle(handle);
  }

  // A kernel linked into the application (`attnc compile --emit lib`).
  static Bundle openLinked(const attnc_kernel_exports& exports) {
    attnc_bundle* handle = nullptr;
    attnc_error error{};
    if (attnc_bundle_open_linked(&exports, &handle, &error) != ATTNC_OK)
      throw Error(error);
    return Bundle(handle);
  }

  std::string_view manifest() const { return attnc_bundle_manifest(handle_.get()); }
  // The target it runs ("x86-64-avx512", ...), and why that one.
  std::string_view target() const { return attnc_bundle_target(handle_.get()); }
  std::string_view targetChoice() const { return attnc_bundle_target_choice(handle_.get()); }

  void run(std::span<const attnc_named_tensor> tensors, int32_t numThreads = 0,
           void* stream = nullptr) const {
    attnc_run_options options{numThreads, stream};
    attnc_error error{};
    if (attnc_bundle_run(handle_.get(), tensors.data(), tensors.size(), &options, &error) !=
        ATTNC_OK)
      throw Error(error);
  }

  // The backward entry of a bundle compiled with backward=true, on its "backward" arguments.
  void runBackward(std::span<const attnc_named_tensor> tensors, int32_t numThreads = 0,
                   void* stream = nullptr) const {
    attnc_run_options options{numThreads, stream};
    attnc_error error{};
    if (attnc_bundle_run_backward(handle_.get(), tensors.data(), tensors.size(), &options,
                                  &error) != ATTNC_OK)
      throw Error(error);
  }

private:
  explicit Bundle(attnc_bundle* handle) : handle_(handle, &attnc_bundle_close) {}
  std::unique_ptr<attnc_bundle, decltype(&attnc_bundle_close)> handle_;
};

// A compact (row-major) DLTensor over host memory the caller owns, with up to 8 dims. Converts
// to DLTensor&, what generated kernel entries take: kernel(q, k, v, o).
class TensorView {
public:
  TensorView(void* data, DLDataType dtype, std::initializer_list<int64_t> shape) {
    if (shape.size() > shape_.size())
      throw std::invalid_argument("TensorView: more than 8 dimensions");
    std::copy(shape.begin(), shape.end(), shape_.begin());
    tensor_.data = data;
    tensor_.device = {kDLCPU, 0};
    tensor_.ndim = static_cast<int32_t>(shape.size());
    tensor_.dtype = dtype;
  }
  TensorView(float* data, std::initializer_list<int64_t> shape)
      : TensorView(data, DLDataType{kDLFloat, 32, 1}, shape) {}
  TensorView(int32_t* data, std::initializer_list<int64_t> shape)
      : TensorView(data, DLDataType{kDLInt, 32, 1}, shape) {}

  DLTensor& tensor() {
    tensor_.shape = shape_.data(); // re-pointed here, so copies stay valid
    return tensor_;
  }
  operator DLTensor&() { return tensor(); }

private:
  std::array<int64_t, 8> shape_{};
  DLTensor tensor_{};
};

} // namespace attnc::runtime

#endif // ATTNC_RUNTIME_HPP
