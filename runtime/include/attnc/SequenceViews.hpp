// A ragged batch (the spec key ragged_q) taken a run of sequences at a time.
//
// A ragged bundle's kernel is the plain spec's, and the runtime runs it on views of the call's
// tensors, once per run of consecutive sequences with the same number of query rows (a decode
// batch is one run; a sequence without rows is none): the packed rows of such a run are a
// regular [sequences, rows, H, d] tensor. The f64 reference takes the batch apart the same way.
// The run of sequences [b, b + m), n rows each from packed row `first`, sees:
//   - rows [first, first + m n) of each tensor with a "total_q" dimension, as [m, n, ...] (q and
//     o [total_q, H, d] become [m, n, H, d]; lse [H, total_q] becomes [m, H, n]);
//   - entries [b, b + m) of each tensor whose first dimension is "B" (seq_lens, a contiguous
//     cache, the block table, aux tensors);
//   - every other tensor whole (the pages, sinks);
// and not the offsets themselves (the one tensor shaped "B+1"), which the kernel never takes.
// Compiler and runtime share this header, so both split a batch the same way.
#ifndef ATTNC_SEQUENCEVIEWS_HPP
#define ATTNC_SEQUENCEVIEWS_HPP

#include "attnc/DType.hpp"
#include "attnc/TensorSpan.hpp"
#include "attnc/Shape.hpp"

#include <cstdint>
#include <dlpack/dlpack.h>
#include <vector>

namespace attnc {

// True for the offsets tensor of a ragged batch: one dimension, B+1.
inline bool isQueryOffsets(const std::vector<DimExpr>& dims) {
  return dims.size() == 1 && dims[0].symbol == SizeSymbol::Batch && dims[0].plus == 1;
}

// Calls run(b, m, first, n) for each run of consecutive sequences [b, b + m) with n > 0 rows
// each, its rows starting at packed row `first`, given the B + 1 offsets; stops at and returns
// the first nonzero result, else 0.
template <class Offsets, class Run> int forEachRun(const Offsets& offsets, Run run) {
  const int64_t batch = static_cast<int64_t>(offsets.size()) - 1;
  for (int64_t b = 0; b < batch;) {
    const int64_t rows = offsets[b + 1] - offsets[b];
    int64_t end = b + 1;
    while (end < batch && offsets[end + 1] - offsets[end] == rows)
      ++end;
    if (rows > 0)
      if (int result = run(b, end - b, static_cast<int64_t>(offsets[b]), rows))
        return result;
    b = end;
  }
  return 0;
}

// Views of every tensor but the offsets, in argument order, for one run of sequences at a time.
class SequenceViews {
public:
  // `dims[a]`: argument a's manifest dimensions; `tensors[a]`: its tensor, already checked
  // against them. Both outlive this object.
  SequenceViews(const std::vector<std::vector<DimExpr>>& dims,
                const std::vector<DLTensor*>& tensors) {
    for (size_t a = 0; a < dims.size(); ++a) {
      if (isQueryOffsets(dims[a]))
        continue;
      Part part{tensors[a], -1, false, {}, {}};
      for (size_t d = 0; d < dims[a].size(); ++d)
        if (dims[a][d].symbol == SizeSymbol::QueryRows)
          part.rowsDim = static_cast<int>(d);
      part.batchFirst = part.rowsDim < 0 && !dims[a].empty() &&
                        dims[a][0].symbol == SizeSymbol::Batch && dims[a][0].plus == 0 &&
                        tensors[a]->shape[0] > 1;
      part.strides = elementStrides(*tensors[a]);
      parts_.push_back(std::move(part));
    }
    views_.resize(parts_.size());
    pointers_.resize(parts_.size());
    for (size_t p = 0; p < parts_.size(); ++p)
      pointers_[p] = &views_[p];
  }

  // The run of `sequences` sequences from b, `rows` rows each from packed row `first`. The
  // pointers stay valid, and change meaning, until the next call.
  const std::vector<DLTensor*>& select(int64_t b, int64_t sequences, int64_t first,
                                       int64_t rows) {
    for (size_t p = 0; p < parts_.size(); ++p) {
      Part& part = parts_[p];
      const DLTensor& whole = *part.tensor;
      DLTensor& view = views_[p];
      view = whole;
      part.shape.assign(whole.shape, whole.shape + whole.ndim);
      std::vector<int64_t> strides = part.strides;
      const auto bytes = static_cast<int64_t>(dtypeBytes(whole.dtype));
      if (part.rowsDim >= 0) {
        const int64_t rowStride = strides[part.rowsDim];
        view.byte_offset += static_cast<uint64_t>(first * rowStride * bytes);
        part.shape[part.rowsDim] = rows;
        part.shape.insert(part.shape.begin(), sequences);
        strides.insert(strides.begin(), rows * rowStride);
        view.ndim = whole.ndim + 1;
      } else if (part.batchFirst) {
        view.byte_offset += static_cast<uint64_t>(b * strides[0] * bytes);
        part.shape[0] = sequences;
      }
      part.viewStrides = std::move(strides);
      view.shape = part.shape.data();
      view.strides = part.viewStrides.data();
    }
    return pointers_;
  }

private:
  struct Part {
    DLTensor* tensor;
    int rowsDim;     // the total_q dimension, or -1
    bool batchFirst; // an entry per sequence along dimension 0
    std::vector<int64_t> strides, shape;
    std::vector<int64_t> viewStrides = {};
  };
  std::vector<Part> parts_;
  std::vector<DLTensor> views_;
  std::vector<DLTensor*> pointers_;
};

} // namespace attnc

#endif // ATTNC_SEQUENCEVIEWS_HPP
