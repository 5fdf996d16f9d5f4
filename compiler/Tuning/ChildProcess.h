// Running a command as a child with a time limit, for attnc tune: a candidate that crashes or
// hangs costs its trial, never the tuning run.
#ifndef ATTNC_TOOLS_ATTNC_CHILDPROCESS_H
#define ATTNC_TOOLS_ATTNC_CHILDPROCESS_H

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace attnc::tools {

struct ChildResult {
  int exitCode = -1;        // when it exited
  int signal = 0;           // when a signal ended it
  bool timedOut = false;    // killed at the time limit
  bool interrupted = false; // killed because this process was asked to stop (interruptSignal)
  std::string out, err;     // what it printed (the last 64 KiB of each)
  double seconds = 0;

  bool ok() const { return exitCode == 0 && !timedOut && !interrupted && signal == 0; }
  // "exit 2: <last line of stderr>", "killed by signal 11 (Segmentation fault)", "timed out
  // after 300 s".
  std::string summary() const;
};

// Runs argv in its own process group (so a terminal's Ctrl-C reaches only this process, which
// then stops the child), its output in files under `scratch`; past `limit`, or once an interrupt
// is recorded (Interrupts.h), the whole group is killed.
ChildResult runChild(const std::vector<std::string>& argv, std::chrono::seconds limit,
                     const std::filesystem::path& scratch);

} // namespace attnc::tools

#endif // ATTNC_TOOLS_ATTNC_CHILDPROCESS_H
