// What this host is: its architecture and the CPU feature flags its kernel reports.
#ifndef ATTNC_RUNTIME_HOSTCPU_H
#define ATTNC_RUNTIME_HOSTCPU_H

#include <set>
#include <string>

namespace attnc::runtime {

// "x86_64" or "aarch64", as manifests spell it.
const char* hostArch();

// The flags of /proc/cpuinfo ("avx2", "avx512f", "amx_bf16", ... or AArch64's "asimd", ...).
// Linux lists a flag only when the kernel also saves the state it needs, so a listed feature is
// usable. Read once per process.
const std::set<std::string>& hostCpuFeatures();

// Linux lends a process the AMX tile data state (XTILEDATA) only when asked, once, through
// arch_prctl(ARCH_REQ_XCOMP_PERM); a tile instruction before that raises SIGILL. Asks, and
// returns "" when granted (or already granted), else why not. x86-64 Linux only.
std::string requestAmxTiles();

} // namespace attnc::runtime

#endif // ATTNC_RUNTIME_HOSTCPU_H
