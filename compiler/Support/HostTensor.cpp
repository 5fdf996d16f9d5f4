#include "Support/HostTensor.h"

#include "Support/Errors.h"
#include "Support/TensorAccess.h"
#include "attnc/DType.hpp"
#include "attnc/TensorSpan.hpp"


namespace attnc {

HostTensor::HostTensor(DLDataType dtype, std::vector<int64_t> shape)
    : shape_(std::make_unique<std::vector<int64_t>>(std::move(shape))) {
  const auto rank = static_cast<int32_t>(shape_->size());
  std::optional<int64_t> count =
      rank <= kMaxTensorRank ? elementCount(shape_->data(), rank) : std::nullopt;
  std::optional<int64_t> bytes = count ? byteCount(*count, dtype) : std::nullopt;
  if (!bytes) {
    std::string shapeText;
    for (int64_t extent : *shape_)
      shapeText += (shapeText.empty() ? "" : ",") + std::to_string(extent);
    throw UsageError("a tensor of shape [" + shapeText + "] and dtype " + dtypeName(dtype) +
                     " cannot exist: it has more bytes than the address space holds, a "
                     "negative extent or more than " +
                     std::to_string(kMaxTensorRank) + " dims");
  }
  bytes_ = static_cast<size_t>(*bytes);
  // new std::byte[] is aligned for any fundamental type, enough for every element type here.
  storage_ = std::make_unique<std::byte[]>(bytes_ > 0 ? bytes_ : 1); // zeroed
  dl_ = std::make_unique<DLTensor>();
  dl_->data = storage_.get();
  dl_->device = {kDLCPU, 0};
  dl_->ndim = static_cast<int>(shape_->size());
  dl_->dtype = dtype;
  dl_->shape = shape_->data();
  dl_->strides = nullptr; // compact row-major
  dl_->byte_offset = 0;
}

std::vector<double> HostTensor::values() const {
  return readDense(*dl_);
}

void HostTensor::assign(const std::vector<double>& values) {
  writeDense(*dl_, values);
}

} // namespace attnc
