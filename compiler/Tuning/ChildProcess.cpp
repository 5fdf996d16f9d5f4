#include "Tuning/ChildProcess.h"

#include "Support/Errors.h"
#include "Support/Files.h"

#include <csignal>
#include <cstring>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

namespace attnc::tuning {
namespace {

std::string tail(const MemoryFile& file) {
  const std::string text = file.contents();
  constexpr size_t kKeep = 64 * 1024;
  return text.size() > kKeep ? text.substr(text.size() - kKeep) : text;
}

} // namespace

std::string ChildResult::summary() const {
  if (interrupted)
    return "interrupted";
  if (timedOut)
    return "timed out after " + std::to_string(static_cast<int>(seconds)) + " s";
  if (signal)
    return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  std::string last = err;
  while (!last.empty() && last.back() == '\n')
    last.pop_back();
  last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
  return "exit " + std::to_string(exitCode) + (last.empty() ? "" : ": " + last);
}

ChildResult runChild(const std::vector<std::string>& argv, std::chrono::seconds limit,
                     const StopRequest& stop) {
  const MemoryFile out("child.out"), err("child.err");
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, out.fd(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&files, err.fd(), STDERR_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attributes, 0);
  // The child reacts to interrupts with their default actions, even where attnc ignores them.
  posix_spawnattr_setsigdefault(&attributes, &stop.handledSignals);

  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const auto start = std::chrono::steady_clock::now();
  const int spawned = posix_spawn(&pid, args[0], &files, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0)
    throwSystemError("cannot start " + argv[0], spawned);

  ChildResult result;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid)
      break;
    const bool late = std::chrono::steady_clock::now() - start > limit;
    if (late || stop.signal() != 0) {
      result.timedOut = late;
      result.interrupted = !late;
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // A child that ended while an interrupt was pending (a signal sent to the whole job, as
  // `kill` by name or a cluster scheduler's cancel does) ended because of it: not a crash.
  if (!result.timedOut && stop.signal() != 0)
    result.interrupted = true;
  if (!result.timedOut && !result.interrupted) {
    if (WIFEXITED(status))
      result.exitCode = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
      result.signal = WTERMSIG(status);
  }
  result.out = tail(out);
  result.err = tail(err);
  return result;
}

} // namespace attnc::tuning
