// Errors that tools map to exit codes: UsageError (and SpecError) -> 2, JobError -> 1;
// anything else is an internal error (>= 3).
#ifndef ATTNC_COMPILER_SUPPORT_ERRORS_H
#define ATTNC_COMPILER_SUPPORT_ERRORS_H

#include <stdexcept>

namespace attnc {

// The request itself is wrong: a bad flag value, an unknown backend or target.
class UsageError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// The request was fine but the job failed: a link error, a tensor mismatch, a failed check.
class JobError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace attnc

#endif // ATTNC_COMPILER_SUPPORT_ERRORS_H
