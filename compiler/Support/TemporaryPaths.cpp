#include "Support/TemporaryPaths.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace attnc {
namespace {

std::mutex& registryMutex() {
  static std::mutex mutex;
  return mutex;
}

std::vector<std::filesystem::path>& registry() {
  static std::vector<std::filesystem::path> paths;
  return paths;
}

} // namespace

TemporaryPath::TemporaryPath(std::filesystem::path path) : path_(std::move(path)) {
  std::lock_guard lock(registryMutex());
  registry().push_back(path_);
}

TemporaryPath::~TemporaryPath() {
  std::lock_guard lock(registryMutex());
  auto& paths = registry();
  if (auto it = std::find(paths.rbegin(), paths.rend(), path_); it != paths.rend())
    paths.erase(std::next(it).base());
}

void removeTemporaryPaths() {
  std::lock_guard lock(registryMutex());
  for (const std::filesystem::path& path : registry()) {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  registry().clear();
}

} // namespace attnc
