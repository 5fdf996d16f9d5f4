// A loop over indices on threads of the tools' own (the reference in attnc verify, run and bench;
// the unfused baseline), whose bodies are C++ and may throw.
#ifndef ATTNC_COMPILER_SUPPORT_THREADS_H
#define ATTNC_COMPILER_SUPPORT_THREADS_H

#include <cstdint>
#include <functional>

namespace attnc {

// Runs body(index, worker) for every index in [0, count) on up to `threads` threads, the
// calling one among them, worker numbering them from 0. An exception leaving a body on a
// thread of its own would end the process (std::terminate): the first one thrown is kept, the
// indices not yet started are skipped, and it is rethrown here once every thread has joined.
void forEachOnThreads(int64_t threads, int64_t count,
                      const std::function<void(int64_t index, int64_t worker)>& body);

} // namespace attnc

#endif // ATTNC_COMPILER_SUPPORT_THREADS_H
