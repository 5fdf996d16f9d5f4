// A dense row-major 4-d array of doubles: the reference's working storage.
#ifndef ATTNC_COMPILER_REFERENCE_ARRAY4_H
#define ATTNC_COMPILER_REFERENCE_ARRAY4_H

#include <array>
#include <cstdint>
#include <vector>

namespace attnc {

struct Array4 {
  std::array<int64_t, 4> dims{0, 0, 0, 0};
  std::vector<double> data;

  Array4() = default;
  Array4(int64_t d0, int64_t d1, int64_t d2, int64_t d3, double fill = 0)
      : dims{d0, d1, d2, d3}, data(d0 * d1 * d2 * d3, fill) {}

  int64_t index(int64_t a, int64_t b, int64_t c, int64_t d) const {
    return ((a * dims[1] + b) * dims[2] + c) * dims[3] + d;
  }
  double& operator()(int64_t a, int64_t b, int64_t c, int64_t d) { return data[index(a, b, c, d)]; }
  double operator()(int64_t a, int64_t b, int64_t c, int64_t d) const {
    return data[index(a, b, c, d)];
  }
  // The innermost row at (a, b, c).
  double* row(int64_t a, int64_t b, int64_t c) { return &data[index(a, b, c, 0)]; }
  const double* row(int64_t a, int64_t b, int64_t c) const { return &data[index(a, b, c, 0)]; }

  // Exchanges dims 1 and 2: [B, T, H, D] <-> [B, H, T, D].
  Array4 swapMiddle() const {
    Array4 out(dims[0], dims[2], dims[1], dims[3]);
    for (int64_t a = 0; a < dims[0]; ++a)
      for (int64_t b = 0; b < dims[1]; ++b)
        for (int64_t c = 0; c < dims[2]; ++c)
          for (int64_t d = 0; d < dims[3]; ++d)
            out(a, c, b, d) = (*this)(a, b, c, d);
    return out;
  }
};

} // namespace attnc

#endif // ATTNC_COMPILER_REFERENCE_ARRAY4_H
