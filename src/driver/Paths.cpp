#include "driver/Paths.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

#include "tessel/error.h"

namespace tessel {

std::string library_dir() {
  Dl_info info{};
  TESSEL_INTERNAL_CHECK(dladdr(reinterpret_cast<void*>(&library_dir), &info) && info.dli_fname,
                        "cannot find the path of libtessel");
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

namespace {
// The first of `names` (relative to library_dir()) that exists, else an error naming them.
std::string find_beside_library(const char* what, std::initializer_list<std::string> names) {
  std::string dir = library_dir(), tried;
  for (const std::string& n : names) {
    std::string p = dir + "/" + n;
    if (access(p.c_str(), F_OK) == 0) return p;
    tried += (tried.empty() ? "" : ", ") + p;
  }
  throw Error(std::string("Tessel's ") + what + " is not where the library expects it (" + tried +
              "): reinstall Tessel, or run from a complete build tree");
}
}  // namespace

std::string runtime_archive() { return find_beside_library("runtime archive", {"libtessel_runtime.a"}); }

std::string runner_program() {
  if (const char* env = std::getenv("TESSEL_RUNNER"); env && *env) return env;
  return find_beside_library("GPU runner", {"tessel-runner", TESSEL_LIB_TO_BIN "/tessel-runner"});
}

}  // namespace tessel
