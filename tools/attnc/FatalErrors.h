// How attnc ends when LLVM cannot go on (report_fatal_error, or memory run out). LLVM would end
// the process by abort() or exit(1), where no destructor runs: a compile's staging directory
// and the output directory it made would stay behind. Its handler cannot unwind instead: LLVM
// calls it from destructors that may not throw (a stream's, on a failed write), in code built
// without exceptions. So attnc's handler does what an interrupt does (Interrupts.h): it removes
// every registered temporary path (Support/TemporaryPaths.h), says what failed and exits,
// kEnvironmentExitCode for a failed write or memory run out, 3 (an internal error) otherwise.
// attnc writes its own files in memory first (Support/Files.h); this handler is for the files
// LLVM writes itself: Halide's static library and its temporary objects.
#ifndef ATTNC_TOOLS_ATTNC_FATALERRORS_H
#define ATTNC_TOOLS_ATTNC_FATALERRORS_H

namespace attnc::tools {

// Installs the handler in every copy of LLVM the process has loaded (MLIR's and Halide's are
// two). Call in main, after handleInterrupts().
void handleLlvmFatalErrors();

} // namespace attnc::tools

#endif // ATTNC_TOOLS_ATTNC_FATALERRORS_H
