#include "FatalErrors.h"

#include "Support/Errors.h"
#include "Support/TemporaryPaths.h"

#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

namespace attnc::tools {
namespace {

using Handler = void (*)(void* data, const char* reason, bool crashDiagnostics);
using Install = void (*)(Handler handler, void* data);

// llvm::install_fatal_error_handler and install_bad_alloc_error_handler as LLVM 14 and later
// declare them. The mangled names encode the handler's type: an LLVM that declares another one
// is not found, and keeps its own ending.
constexpr const char* kInstallFatal = "_ZN4llvm27install_fatal_error_handlerEPFvPvPKcbES0_";
constexpr const char* kInstallBadAlloc = "_ZN4llvm31install_bad_alloc_error_handlerEPFvPvPKcbES0_";

[[noreturn]] void end(const char* reason, bool environment) {
  removeTemporaryPaths();
  const std::string message = std::string("attnc: ") +
                              (environment ? "the machine failed" : "internal error") +
                              ": LLVM: " + reason + "\n";
  [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, message.data(), message.size());
  // _exit, not exit: static destructors would run in a thread that is inside LLVM.
  ::_exit(environment ? kEnvironmentExitCode : 3);
}

void onFatalError(void*, const char* reason, bool) {
  // LLVM's streams report a failed write this way only: "IO failure on output stream: ...".
  end(reason, std::strncmp(reason, "IO failure", 10) == 0);
}

void onBadAlloc(void*, const char* reason, bool) {
  end(reason, true);
}

// Every loaded object's definition of `symbol` (its own, or a dependency's), once per address:
// one per copy of LLVM.
std::set<void*> definitions(const char* symbol) {
  std::vector<std::string> objects; // dlopen waits until the iteration has let go of the list
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* names) {
        static_cast<std::vector<std::string>*>(names)->push_back(info->dlpi_name);
        return 0;
      },
      &objects);
  std::set<void*> found;
  for (const std::string& name : objects) {
    // The executable is listed with an empty name; dlopen(nullptr) is the executable.
    void* object = dlopen(name.empty() ? nullptr : name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (!object)
      continue; // the vDSO
    if (void* address = dlsym(object, symbol))
      found.insert(address);
    dlclose(object);
  }
  return found;
}

} // namespace

void handleLlvmFatalErrors() {
  for (void* install : definitions(kInstallFatal))
    reinterpret_cast<Install>(install)(onFatalError, nullptr);
  for (void* install : definitions(kInstallBadAlloc))
    reinterpret_cast<Install>(install)(onBadAlloc, nullptr);
}

} // namespace attnc::tools
