#include "codegen/NVRTC.h"

#include <dlfcn.h>

#include <algorithm>
#include <mutex>
#include <regex>
#include <vector>

#include "tessel/error.h"

namespace tessel {
namespace {

// NVRTC's C API, declared here so that no CUDA header is needed to build Tessel.
using Program = void*;
struct Nvrtc {
  void* lib = nullptr;
  std::string error;
  int (*create)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*compile)(Program, int, const char* const*) = nullptr;
  int (*log_size)(Program, size_t*) = nullptr;
  int (*log)(Program, char*) = nullptr;
  int (*ptx_size)(Program, size_t*) = nullptr;
  int (*ptx)(Program, char*) = nullptr;
  int (*cubin_size)(Program, size_t*) = nullptr;
  int (*cubin)(Program, char*) = nullptr;
  int (*destroy)(Program*) = nullptr;
  const char* (*error_string)(int) = nullptr;
};

const Nvrtc& nvrtc() {
  static Nvrtc n;
  static std::once_flag once;
  std::call_once(once, [] {
    for (const char* name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so"})
      if ((n.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!n.lib) {
      n.error = "NVRTC (libnvrtc.so.13) could not be loaded: install the CUDA toolkit (12 or 13) and put its lib "
                "directory on the library path";
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(n.lib, name));
      if (!fn) n.error = std::string("NVRTC has no symbol ") + name;
    };
    sym(n.create, "nvrtcCreateProgram");
    sym(n.compile, "nvrtcCompileProgram");
    sym(n.log_size, "nvrtcGetProgramLogSize");
    sym(n.log, "nvrtcGetProgramLog");
    sym(n.ptx_size, "nvrtcGetPTXSize");
    sym(n.ptx, "nvrtcGetPTX");
    sym(n.cubin_size, "nvrtcGetCUBINSize");
    sym(n.cubin, "nvrtcGetCUBIN");
    sym(n.destroy, "nvrtcDestroyProgram");
    sym(n.error_string, "nvrtcGetErrorString");
  });
  return n;
}

// ptxas -v: "Used 40 registers, used 1 barriers, 4096 bytes smem" and
// "0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads", per entry function.
KernelResources parse_ptxas(const std::string& log) {
  KernelResources r;
  std::smatch m;
  auto each = [&](const char* pattern, auto&& f) {
    std::regex re(pattern);
    for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator(); ++it) f(*it);
  };
  each(R"(Compiling entry function)", [&](const std::smatch&) { ++r.kernels; });
  each(R"(Used (\d+) registers)", [&](const std::smatch& x) { r.registers = std::max(r.registers, std::stoi(x[1])); });
  each(R"((\d+) bytes smem)", [&](const std::smatch& x) { r.shared_bytes = std::max(r.shared_bytes, std::stoi(x[1])); });
  each(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)", [&](const std::smatch& x) {
    r.local_bytes = std::max(r.local_bytes, std::stoi(x[1]));
    r.spill_bytes = std::max(r.spill_bytes, std::stoi(x[2]) + std::stoi(x[3]));
  });
  return r;
}

}  // namespace

bool nvrtc_available() { return nvrtc().error.empty(); }

CudaBinary nvrtc_compile(const std::string& source, const std::string& arch) {
  const Nvrtc& n = nvrtc();
  TESSEL_USER_CHECK(n.error.empty(), "cannot compile CUDA kernels: ", n.error);
  Program p = nullptr;
  int rc = n.create(&p, source.c_str(), "tessel.cu", 0, nullptr, nullptr);
  TESSEL_USER_CHECK(rc == 0, "nvrtcCreateProgram failed: ", n.error_string(rc));
  std::string arch_opt = "--gpu-architecture=" + arch;
  // --no-cache: NVRTC 12.9 and later leave ptxas's resource report out of the log otherwise.
  std::vector<const char*> opts = {arch_opt.c_str(), "--ptxas-options=-v", "--no-cache", "-std=c++17"};
  rc = n.compile(p, int(opts.size()), opts.data());
  if (rc != 0 && std::string(n.error_string(rc)).find("INVALID_OPTION") != std::string::npos) {
    opts.erase(opts.begin() + 2);  // an NVRTC older than 12.9
    rc = n.compile(p, int(opts.size()), opts.data());
  }
  size_t size = 0;
  n.log_size(p, &size);
  std::string log(size, '\0');
  if (size) n.log(p, log.data());
  while (!log.empty() && log.back() == '\0') log.pop_back();
  if (rc != 0) {
    const char* what = n.error_string(rc);
    Program q = p;
    n.destroy(&q);
    throw Error("NVRTC could not compile the kernel for " + arch + " (" + what + "):\n" + log + "\n" + source);
  }
  CudaBinary b;
  b.arch = arch;
  b.source = source;
  n.ptx_size(p, &size);
  b.ptx.resize(size);
  n.ptx(p, b.ptx.data());
  while (!b.ptx.empty() && b.ptx.back() == '\0') b.ptx.pop_back();
  n.cubin_size(p, &size);
  b.cubin.resize(size);
  if (size) n.cubin(p, b.cubin.data());
  n.destroy(&p);
  b.resources = parse_ptxas(log);
  return b;
}

}  // namespace tessel
