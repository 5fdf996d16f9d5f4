// An owning, compact tensor in host memory with a DLTensor view.
#ifndef ATTNC_COMPILER_SUPPORT_HOSTTENSOR_H
#define ATTNC_COMPILER_SUPPORT_HOSTTENSOR_H

#include <cstdint>
#include <dlpack/dlpack.h>
#include <memory>
#include <vector>

namespace attnc {

class HostTensor {
public:
  // Zero-filled. Throws UsageError for a shape no tensor can have (negative extents, more bytes
  // than the address space, more than kMaxTensorRank dims).
  HostTensor(DLDataType dtype, std::vector<int64_t> shape);

  HostTensor(HostTensor&&) noexcept = default;
  HostTensor& operator=(HostTensor&&) noexcept = default;

  // The DLTensor stays valid while this HostTensor lives (moves keep it valid).
  DLTensor* dl() { return dl_.get(); }
  const DLTensor& view() const { return *dl_; }
  const std::vector<int64_t>& shape() const { return *shape_; }
  DLDataType dtype() const { return dl_->dtype; }
  void* data() { return storage_.get(); }
  const void* data() const { return storage_.get(); }
  size_t bytes() const { return bytes_; }

  std::vector<double> values() const;             // dense, as doubles
  void assign(const std::vector<double>& values); // rounds once to the dtype

private:
  std::unique_ptr<std::vector<int64_t>> shape_; // heap-held so dl_->shape survives moves
  std::unique_ptr<std::byte[]> storage_;
  size_t bytes_ = 0;
  std::unique_ptr<DLTensor> dl_;
};

} // namespace attnc

#endif // ATTNC_COMPILER_SUPPORT_HOSTTENSOR_H
