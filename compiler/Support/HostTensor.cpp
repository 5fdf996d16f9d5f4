#include "Support/HostTensor.h"

#include "Support/TensorAccess.h"
#include "attnc/DType.hpp"

#include <cstring>

namespace attnc {

HostTensor::HostTensor(DLDataType dtype, std::vector<int64_t> shape)
    : shape_(std::make_unique<std::vector<int64_t>>(std::move(shape))) {
  int64_t count = 1;
  for (int64_t extent : *shape_)
    count *= extent;
  bytes_ = static_cast<size_t>(count) * dtypeBytes(dtype);
  // new std::byte[] is aligned for any fundamental type, enough for every element type here.
  storage_ = std::make_unique<std::byte[]>(bytes_ > 0 ? bytes_ : 1);
  std::memset(storage_.get(), 0, bytes_);
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
