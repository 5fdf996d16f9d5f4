// How attnc ends when it is asked to: SIGINT, SIGTERM and SIGHUP (unless whoever started attnc
// ignores them) are passed by their handler to one thread that waits for them, so nothing but a
// write(2) runs in a signal handler.
//  - By default that thread removes every temporary path the command registered
//    (Support/TemporaryPaths.h: a compile's staging directory, an output's temporary file), then
//    ends the process by the same signal, as if it had not been caught: a shell sees 128 + n
//    (130 for Ctrl-C, 143 for SIGTERM) and no partial output is left.
//  - A command that stops on its own terms (attnc tune: it kills the trial in hand's children,
//    records nothing of that trial, keeps every finished one and exits) calls deferInterrupts()
//    and polls interruptSignal().
#ifndef ATTNC_TOOLS_ATTNC_INTERRUPTS_H
#define ATTNC_TOOLS_ATTNC_INTERRUPTS_H

#include <csignal>

namespace attnc::tools {

// Installs the handlers and starts the waiting thread. Call first in main.
void handleInterrupts();

// From now on a signal is only recorded.
void deferInterrupts();

// The signal recorded since deferInterrupts(), or 0.
int interruptSignal();

// The signals handled, for children to reset to their default actions.
sigset_t interruptSignals();

} // namespace attnc::tools

#endif // ATTNC_TOOLS_ATTNC_INTERRUPTS_H
