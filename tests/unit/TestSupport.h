// Helpers for the unit tests: random calls and the reference on them.
#ifndef ATTNC_TESTS_TESTSUPPORT_H
#define ATTNC_TESTS_TESTSUPPORT_H

#include "CallSetup.h"
#include "Expr/ExprEval.h"

#include <filesystem>
#include <string>
#include <vector>

namespace attnc::test {

struct Outputs {
  std::vector<double> o, lse, weights; // dense in each output's own shape
};

// A directory of the running test's own, made empty on construction and removed with it:
// <temp>/attnc_<purpose>_<pid>_<test name>, so parallel test processes never share one.
class ScratchDir {
public:
  explicit ScratchDir(const std::string& purpose);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
};

// A call for `spec` with seeded random inputs of the given sizes.
tools::Call randomCall(const std::string& spec, int64_t batch, int64_t seqQ, int64_t seqK,
                       uint64_t seed = 1);

// Runs the f64 reference on the call's inputs into f64 outputs.
Outputs runReferenceOn(tools::Call& call);

// Index of element (a, b, c, d) of a dense 4-d array with dims (., d1, d2, d3).
inline int64_t at4(int64_t d1, int64_t d2, int64_t d3, int64_t a, int64_t b, int64_t c, int64_t d) {
  return ((a * d1 + b) * d2 + c) * d3 + d;
}

// The point of head 1 (16 query rows and keys) at query q_idx = qpos = q, key k, score s: where
// the expression tests evaluate.
inline expr::Point scorePoint(int64_t q, int64_t k, double s = 0) {
  expr::Point p;
  p.h = 1;
  p.qIdx = q;
  p.kvIdx = k;
  p.qpos = q;
  p.tq = p.tk = 16;
  p.score = s;
  return p;
}

} // namespace attnc::test

#endif // ATTNC_TESTS_TESTSUPPORT_H
