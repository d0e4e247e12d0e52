// The checked call of a built kernel, and what a Module tells about it.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "driver/Paths.h"
#include "runtime/ModuleImpl.h"
#include "runtime/Runtime.h"
#include "tessel/error.h"

namespace tessel {

namespace {
std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

std::vector<void*> checked_pointers(const Module& m, const std::vector<ArgSpec>& specs, const std::vector<Buffer>& bufs) {
  TESSEL_USER_CHECK(bufs.size() == specs.size(), "kernel '", m.name(), "' takes ", specs.size(), " buffers, got ",
                    bufs.size());
  std::vector<void*> ptrs;
  for (size_t i = 0; i < specs.size(); ++i) {
    const Buffer& b = bufs[i];
    TESSEL_USER_CHECK(b.defined(), "kernel '", m.name(), "': argument ", i, " ('", specs[i].name, "') is an empty Buffer");
    TESSEL_USER_CHECK(b.dtype() == specs[i].dtype && b.shape() == specs[i].shape, "kernel '", m.name(), "': argument ",
                      i, " ('", specs[i].name, "') must be ", specs[i].dtype.str(), shape_str(specs[i].shape),
                      ", got ", b.describe());
    ptrs.push_back(b.raw());
  }
  return ptrs;
}
}  // namespace

std::vector<void*> ModuleImpl::kernel_args(void* const* args, bool force) {
  std::vector<void*> out(args, args + this->args.size());
  if (rewrites.empty()) return out;
  std::lock_guard<std::mutex> lock(prepare_mutex);
  auto t0 = std::chrono::steady_clock::now();
  bool prepared = false;
  for (auto& r : rewrites) {
    if (force || r.from != args[r.arg]) {
      const LayoutRewrite& l = r.layout;
      if (r.transform) r.transform(args[r.arg], r.copy);
      else
        tessel_rewrite_layout(args[r.arg], r.copy.raw(), int32_t(l.shape.size()), l.shape.data(), l.dim, l.block,
                              r.copy.dtype().bytes());
      r.from = args[r.arg];
      prepared = true;
    }
    out[r.arg] = r.copy.raw();
  }
  if (prepared) prepare_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

void Module::operator()(const std::vector<Buffer>& bufs) const {
  TESSEL_USER_CHECK(impl_, "calling an empty Module; build() one first");
  call_raw(checked_pointers(*this, impl_->args, bufs).data());
}

void Module::prepare(const std::vector<Buffer>& bufs) const {
  TESSEL_USER_CHECK(impl_, "preparing an empty Module; build() one first");
  impl_->kernel_args(checked_pointers(*this, impl_->args, bufs).data(), true);
}

double Module::time(const std::vector<Buffer>& bufs, int number) const {
  TESSEL_USER_CHECK(impl_, "timing an empty Module; build() one first");
  TESSEL_USER_CHECK(number > 0, "Module::time: number must be positive, got ", number);
  return impl_->kernel->time(impl_->kernel_args(checked_pointers(*this, impl_->args, bufs).data()).data(), number);
}

void Module::call_raw(void* const* args) const {
  if (impl_->rewrites.empty()) return impl_->kernel->call(args);  // timing loops: nothing to swap
  impl_->kernel->call(impl_->kernel_args(args).data());
}
void Module::launch(const std::vector<uint64_t>& device_args) const {
  TESSEL_USER_CHECK(impl_, "launching an empty Module; build() one first");
  TESSEL_USER_CHECK(device_args.size() == impl_->args.size(), "Module '", name(), "' takes ", impl_->args.size(),
                    " arguments, ", device_args.size(), " device buffers were given");
  TESSEL_USER_CHECK(impl_->rewrites.empty(), "Module '", name(), "' reads inputs in a rewritten layout, which "
                    "Module::launch does not prepare on the device; call it with host Buffers");
  impl_->kernel->launch(device_args.data());
}

std::vector<LayoutRewrite> Module::layout_rewrites() const {
  std::vector<LayoutRewrite> out;
  for (auto& r : impl_->rewrites) out.push_back(r.layout);
  return out;
}
double Module::prepare_seconds() const { return impl_->prepare_seconds; }

std::vector<Buffer> Module::kernel_buffers(const std::vector<Buffer>& args) const {
  TESSEL_USER_CHECK(impl_, "kernel_buffers of an empty Module");
  impl_->kernel_args(checked_pointers(*this, impl_->args, args).data());
  std::vector<Buffer> out = args;
  for (const auto& r : impl_->rewrites) out[size_t(r.arg)] = r.copy;
  return out;
}

Module Module::instance() const {
  TESSEL_USER_CHECK(impl_, "Module::instance of an empty Module");
  auto copy = std::make_shared<ModuleImpl>();
  copy->func = impl_->func, copy->args = impl_->args, copy->target = impl_->target;
  copy->kernel = impl_->kernel, copy->seconds = impl_->seconds;
  for (const auto& r : impl_->rewrites)
    copy->rewrites.push_back({r.arg, r.layout, Buffer(r.copy.shape(), r.copy.dtype()), nullptr, r.transform});
  return Module(copy);
}

Module with_transformed_input(const Module& kernel, int arg, const ArgSpec& caller, const std::string& what,
                              std::function<void(const void*, Buffer&)> transform) {
  auto impl = std::make_shared<ModuleImpl>();
  const ArgSpec& own = kernel.args().at(size_t(arg));
  impl->func = kernel.lowered(), impl->args = kernel.args(), impl->target = kernel.target();
  impl->kernel = kernel.impl_->kernel, impl->seconds = kernel.compile_seconds();
  TESSEL_INTERNAL_CHECK(kernel.impl_->rewrites.empty(), "with_transformed_input: the kernel rewrites layouts itself");
  impl->args[size_t(arg)] = caller;
  impl->rewrites.push_back({arg, LayoutRewrite{caller.name, own.name, 0, 1, caller.shape, what},
                            Buffer(own.shape, own.dtype), nullptr, std::move(transform)});
  return Module(impl);
}

const std::string& Module::name() const { return impl_->func.name; }
const std::vector<ArgSpec>& Module::args() const { return impl_->args; }
const LoweredFunc& Module::lowered() const { return impl_->func; }
const Target& Module::target() const { return impl_->target; }
std::string Module::source() const { return impl_->kernel->source(); }
std::string Module::llvm_ir() const {
  TESSEL_USER_CHECK(!impl_->target.is_gpu(), "llvm_ir(): kernel '", name(), "' was built for ", impl_->target.str(),
                    "; its source() is ", impl_->target.kind_name(), " C");
  return impl_->kernel->source();
}
std::string Module::assembly() const { return impl_->kernel->assembly(); }
KernelResources Module::resources() const { return impl_->kernel->resources(); }
std::string Module::device() const { return impl_->kernel->device(); }
double Module::compile_seconds() const { return impl_->seconds; }
void Module::export_object(const std::string& path) const { impl_->kernel->write_object(path); }

void Module::export_library(const std::string& so_path, const std::string& header_path) const {
  for (auto& r : impl_->rewrites)
    TESSEL_USER_CHECK(r.layout.transform.empty(), "export_library: kernel '", name(), "' reads '", r.layout.source,
                      "' as ", r.layout.transform, ", which the library cannot prepare; export the kernel built "
                      "from the transformed input's own record, or the direct convolution's");
  std::string obj = so_path + ".o", script = so_path + ".exports";
  export_object(obj);  // position-independent code
  {
    // Only the kernel's entry point (and the layout rewrite its header may name) is exported.
    std::ofstream v(script);
    TESSEL_USER_CHECK(v, "export_library: cannot write '", script, "'");
    v << "{\n  global: " << name() << "; tessel_rewrite_layout;\n  local: *;\n};\n";
  }
  // The kernel calls tessel_parallel_for/tessel_alloc/tessel_free: the runtime's object code
  // is linked in, so the library stands alone. `-z text` refuses text relocations.
  std::string soname = so_path.substr(so_path.rfind('/') + 1);  // npos + 1 == 0
  std::string cmd = "c++ -shared -Wl,-soname,'" + soname + "' -o '" + so_path + "' '" + obj + "' '" +
                    runtime_archive() + "' -Wl,--version-script='" + script +
                    "' -Wl,-z,text -Wl,--as-needed -lpthread -lm 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  TESSEL_USER_CHECK(p, "export_library: cannot run the linker");
  std::string out;
  char buf[256];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int rc = pclose(p);
  std::remove(obj.c_str());
  std::remove(script.c_str());
  TESSEL_USER_CHECK(rc == 0, "export_library: linking '", so_path, "' failed: ", out);
  std::ofstream h(header_path);
  TESSEL_USER_CHECK(h, "export_library: cannot write header '", header_path, "'");
  const Target& t = impl_->target;
  h << "// Generated by Tessel: kernel '" << name() << "'.\n#pragma once\n#include <stdint.h>\n\n";
  h << "// Compiled for the CPU " << t.cpu << " (LLVM's name); it may use these of its features, which\n"
       "// another CPU may lack (it would stop at an illegal instruction):\n//  ";
  std::stringstream features(t.features);
  int col = 4;
  for (std::string f; std::getline(features, f, ',');) {
    if (f.empty() || f[0] != '+') continue;
    if (col + int(f.size()) > 96) h << "\n//  ", col = 4;
    h << " " << f.substr(1);
    col += int(f.size());
  }
  h << "\n";
  h << "// Any alignment of the element type works; 64-byte aligned arguments (as Tessel's Buffer\n"
       "// allocates them) are fastest.\n";
  h << "// Threads: parallel loops use one thread per hardware thread, or $TESSEL_NUM_THREADS when it\n"
       "// is set before the first call.\n";
  h << "// args[i] points to the data of argument i, dense and row-major:\n";
  for (size_t i = 0; i < impl_->args.size(); ++i) {
    const ArgSpec& a = impl_->args[i];
    const Tensor& k = impl_->func.args[i];  // as the kernel reads it: rewritten layouts differ
    h << "//   args[" << i << "]: " << k.name() << " " << a.dtype.str() << shape_str(k.shape());
    for (auto& r : impl_->rewrites)
      if (r.arg == int(i))
        h << ", " << a.name << shape_str(a.shape) << " with dimension " << r.layout.dim << " cut into blocks of "
          << r.layout.block << ":\n//     tessel_rewrite_layout(" << a.name << ", copy, " << a.shape.size()
          << ", shape, " << r.layout.dim << ", " << r.layout.block << ", " << a.dtype.bytes() << ") makes it once";
    h << "\n";
  }
  h << "// Returns 0 on success.\n#ifdef __cplusplus\nextern \"C\" {\n#endif\nint32_t " << name()
    << "(void* const* args);\n";
  if (!impl_->rewrites.empty())
    h << "void tessel_rewrite_layout(const void* src, void* dst, int32_t ndim, const int64_t* shape, int32_t dim,\n"
         "                           int64_t block, int32_t elem_bytes);\n";
  h << "#ifdef __cplusplus\n}\n#endif\n";
}

}  // namespace tessel
