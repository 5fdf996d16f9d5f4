#include "Tuning/BuildIdentity.h"

#include "attnc/Hash.hpp"

#include <algorithm>
#include <cstring>
#include <elf.h>
#include <link.h>
#include <vector>

namespace attnc::tuning {
namespace {

constexpr size_t alignedTo4(size_t n) {
  return (n + 3) & ~size_t{3};
}

// The build ID in one loaded object's PT_NOTE segments (its bytes), or "".
std::string buildIdOf(const dl_phdr_info& object) {
  for (int i = 0; i < object.dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = object.dlpi_phdr[i];
    if (segment.p_type != PT_NOTE)
      continue;
    const char* at = reinterpret_cast<const char*>(object.dlpi_addr + segment.p_vaddr);
    const char* end = at + segment.p_memsz;
    while (at + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      std::memcpy(&note, at, sizeof note);
      const char* name = at + sizeof note;
      const char* id = name + alignedTo4(note.n_namesz);
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
          std::memcmp(name, "GNU", 4) == 0)
        return std::string(id, note.n_descsz);
      at = id + alignedTo4(note.n_descsz);
    }
  }
  return "";
}

// The build IDs of the program (the object without a name) and of libattnc_* libraries.
int collectBuildIds(dl_phdr_info* object, size_t, void* ids) {
  const std::string name = object->dlpi_name ? object->dlpi_name : "";
  if (!name.empty() && name.find("/libattnc") == std::string::npos)
    return 0;
  if (std::string id = buildIdOf(*object); !id.empty())
    static_cast<std::vector<std::string>*>(ids)->push_back(std::move(id));
  return 0;
}

} // namespace

const std::string& attncBuild() {
  static const std::string build = [] {
    std::vector<std::string> ids;
    dl_iterate_phdr(collectBuildIds, &ids);
    if (ids.empty())
      return std::string();
    std::sort(ids.begin(), ids.end()); // load order does not name a build
    std::string joined;
    for (const std::string& id : ids)
      joined += id;
    return fnv1a64Hex(joined);
  }();
  return build;
}

} // namespace attnc::tuning
