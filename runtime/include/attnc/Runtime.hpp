// C++ wrapper over the runtime's C API: RAII bundles and exceptions that carry the status.
#ifndef ATTNC_RUNTIME_HPP
#define ATTNC_RUNTIME_HPP

#include "attnc/attnc.h"

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

  std::string_view manifest() const { return attnc_bundle_manifest(handle_.get()); }

  void run(std::span<const attnc_named_tensor> tensors, int32_t numThreads = 0,
           void* stream = nullptr) const {
    attnc_run_options options{numThreads, stream};
    attnc_error error{};
    if (attnc_bundle_run(handle_.get(), tensors.data(), tensors.size(), &options, &error) !=
        ATTNC_OK)
      throw Error(error);
  }

private:
  explicit Bundle(attnc_bundle* handle) : handle_(handle, &attnc_bundle_close) {}
  std::unique_ptr<attnc_bundle, decltype(&attnc_bundle_close)> handle_;
};

} // namespace attnc::runtime

#endif // ATTNC_RUNTIME_HPP
