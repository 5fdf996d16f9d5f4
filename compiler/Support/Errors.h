// Errors that tools map to exit codes: UsageError (and SpecError) -> 2, JobError -> 1,
// EnvironmentError -> kEnvironmentExitCode; anything else is an internal error (3).
#ifndef ATTNC_COMPILER_SUPPORT_ERRORS_H
#define ATTNC_COMPILER_SUPPORT_ERRORS_H

#include <cctype>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace attnc {

// The first control character of `text` other than whitespace, named with its offset ("the
// control character U+0000 at offset 3"), or empty. Text from a user that holds one is refused
// without echoing it: a NUL would cut short the C string a message becomes, an escape would
// drive the terminal that prints it.
inline std::optional<std::string> controlCharacter(std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && !std::isspace(c)) || c == 0x7F) {
      char name[8];
      std::snprintf(name, sizeof name, "U+%04X", c);
      return "the control character " + std::string(name) + " at offset " + std::to_string(i);
    }
  }
  return std::nullopt;
}

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

// The machine failed the job, not the request or the job itself: it ran out of disk space, a
// quota, memory or file descriptors. Nothing is learnt about the request: the same command
// succeeds once the machine is mended, so a tuner records no trial for it.
class EnvironmentError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// sysexits.h's EX_TEMPFAIL, the exit code that asks for a retry once the machine is mended.
constexpr int kEnvironmentExitCode = 75;

} // namespace attnc

#endif // ATTNC_COMPILER_SUPPORT_ERRORS_H
