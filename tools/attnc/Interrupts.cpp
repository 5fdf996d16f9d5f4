#include "Interrupts.h"

#include "Support/TemporaryPaths.h"

#include <atomic>
#include <cerrno>
#include <fcntl.h>
#include <thread>
#include <unistd.h>

namespace attnc::tools {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

std::atomic<bool> deferred{false};
std::atomic<int> recorded{0};
int pipeEnds[2] = {-1, -1};

// The handler runs in whichever thread the signal reaches (libraries start threads before
// main: OpenBLAS does), so it only passes the number on, through a pipe: async-signal-safe.
void forward(int signal) {
  const int saved = errno; // the interrupted code may be about to read it
  const auto byte = static_cast<unsigned char>(signal);
  [[maybe_unused]] ssize_t ignored = ::write(pipeEnds[1], &byte, 1); // never blocks: O_NONBLOCK
  errno = saved;
}

void waitForInterrupts() {
  while (true) {
    unsigned char byte = 0;
    if (::read(pipeEnds[0], &byte, 1) != 1)
      continue;
    const int signal = byte;
    if (deferred.load()) {
      recorded.store(signal);
      continue;
    }
    removeTemporaryPaths();
    // Die by the signal itself, with its default action, as if it had never been caught.
    std::signal(signal, SIG_DFL);
    ::raise(signal);
  }
}

} // namespace

void handleInterrupts() {
  // Close-on-exec: children (the linker, a tune's trials) must not hold the pipe.
  if (::pipe2(pipeEnds, O_CLOEXEC) != 0)
    return; // no pipe: signals keep their default actions
  ::fcntl(pipeEnds[1], F_SETFL, O_NONBLOCK);
  std::thread(waitForInterrupts).detach();
  for (int signal : kSignals) {
    struct sigaction action {
    }, previous{};
    ::sigaction(signal, nullptr, &previous);
    if (previous.sa_handler == SIG_IGN)
      continue; // ignored by whoever started attnc (nohup, a background job): keep it so
    action.sa_handler = forward;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(signal, &action, nullptr);
  }
}

void deferInterrupts() {
  deferred.store(true);
}

int interruptSignal() {
  return recorded.load();
}

sigset_t interruptSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int signal : kSignals)
    sigaddset(&signals, signal);
  return signals;
}

} // namespace attnc::tools
