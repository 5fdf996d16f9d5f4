// Running a command as a child with a time limit, for the tuner's measurements: a candidate
// that crashes or hangs costs its trial, never the tuning run.
#ifndef ATTNC_COMPILER_TUNING_CHILDPROCESS_H
#define ATTNC_COMPILER_TUNING_CHILDPROCESS_H

#include <chrono>
#include <csignal>
#include <functional>
#include <string>
#include <vector>

namespace attnc::tuning {

// How a tuning run is asked to stop: a poll of the signal it was asked by (0 while none), and
// the signals its process handles or ignores, which a child must take with their default actions.
struct StopRequest {
  std::function<int()> signal;
  sigset_t handledSignals;
};

struct ChildResult {
  int exitCode = -1;        // when it exited
  int signal = 0;           // when a signal ended it
  bool timedOut = false;    // killed at the time limit
  bool interrupted = false; // killed because this process was asked to stop (StopRequest)
  std::string out, err;     // what it printed (the last 64 KiB of each)
  double seconds = 0;

  bool ok() const { return exitCode == 0 && !timedOut && !interrupted && signal == 0; }
  // "exit 2: <last line of stderr>", "killed by signal 11 (Segmentation fault)", "timed out
  // after 300 s".
  std::string summary() const;
};

// Runs argv in its own process group (so a terminal's Ctrl-C reaches only this process, which
// then stops the child), its output kept in memory (what it says about a full disk is not lost
// on that disk); past `limit`, or once `stop` reports a signal, the whole group is killed.
ChildResult runChild(const std::vector<std::string>& argv, std::chrono::seconds limit,
                     const StopRequest& stop);

} // namespace attnc::tuning

#endif // ATTNC_COMPILER_TUNING_CHILDPROCESS_H
