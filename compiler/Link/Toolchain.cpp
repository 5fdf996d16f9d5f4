#include "Link/Toolchain.h"

#include "Support/Errors.h"
#include "Support/Files.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace attnc {

std::string linkerDriver() {
  if (const char* cxx = std::getenv("ATTNC_CXX"); cxx && *cxx)
    return cxx;
  if (std::filesystem::exists(ATTNC_DEFAULT_CXX))
    return ATTNC_DEFAULT_CXX;
  return "c++";
}

std::filesystem::path findArchive(const std::string& archive) {
  std::vector<std::filesystem::path> dirs;
  if (const char* env = std::getenv("ATTNC_LIB_DIR"); env && *env) {
    dirs = {env};
  } else {
    // Installed, the archives are attnc's own in lib/attnc; in the build tree, in lib.
    const std::filesystem::path lib =
        std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() / "lib";
    dirs = {lib / "attnc", lib};
  }
  for (const std::filesystem::path& dir : dirs)
    if (std::filesystem::exists(dir / archive))
      return dir / archive;
  throw JobError("cannot find " + archive + " in " + dirs.back().string() +
                 " (attnc looks in <bin>/../lib/attnc and <bin>/../lib; set ATTNC_LIB_DIR to "
                 "override)");
}

void runTool(const std::vector<std::string>& argv, const std::string& what,
             const std::string& hint) {
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const MemoryFile log("tool-output");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, log.fd(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, log.fd(), STDERR_FILENO);
  pid_t pid = 0;
  int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0)
    throw JobError("cannot start " + argv[0] + ": " + std::strerror(spawned) + " (" + hint + ")");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      throw JobError("lost track of " + argv[0] + ": " + std::strerror(errno));
  }
  const int exitStatus = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  if (exitStatus == 0)
    return;
  const std::string output = log.contents();
  const std::string message = what + " failed (" + argv[0] + " exited with " +
                              std::to_string(exitStatus) + "):\n" + output;
  if (mentionsEnvironmentFailure(output))
    throw EnvironmentError(message);
  throw JobError(message);
}

} // namespace attnc
