#include "runtime/CUDA.h"

#include <dlfcn.h>

#include <mutex>
#include <vector>

#include "tessel/error.h"

namespace tessel {
namespace {

// The driver API calls used, declared here (no CUDA header needed). cuda.h maps several
// names to versioned symbols; those are looked up by the versioned name.
using CUdevice = int;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUevent = void*;
using CUdeviceptr = unsigned long long;
constexpr int kAttrComputeMajor = 75, kAttrComputeMinor = 76;

struct Driver {
  void* lib = nullptr;
  std::string error;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  std::string name;
  int sm = 0;
  int (*init)(unsigned) = nullptr;
  int (*device_get)(CUdevice*, int) = nullptr;
  int (*device_name)(char*, int, CUdevice) = nullptr;
  int (*device_attribute)(int*, int, CUdevice) = nullptr;
  int (*primary_retain)(CUcontext*, CUdevice) = nullptr;
  int (*ctx_set_current)(CUcontext) = nullptr;
  int (*module_load)(CUmodule*, const void*) = nullptr;
  int (*module_unload)(CUmodule) = nullptr;
  int (*get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  int (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  int (*mem_free)(CUdeviceptr) = nullptr;
  int (*htod)(CUdeviceptr, const void*, size_t) = nullptr;
  int (*dtoh)(void*, CUdeviceptr, size_t) = nullptr;
  int (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                void**) = nullptr;
  int (*synchronize)() = nullptr;
  int (*event_create)(CUevent*, unsigned) = nullptr;
  int (*event_record)(CUevent, void*) = nullptr;
  int (*event_synchronize)(CUevent) = nullptr;
  int (*event_elapsed)(float*, CUevent, CUevent) = nullptr;
  int (*event_destroy)(CUevent) = nullptr;
  int (*error_name)(int, const char**) = nullptr;

  void check(int rc, const char* what) const {
    if (rc == 0) return;
    const char* n = "unknown";
    if (error_name) error_name(rc, &n);
    throw Error(std::string("CUDA: ") + what + " failed: " + n + " (" + std::to_string(rc) + ")");
  }
};

Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    d.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!d.lib) {
      const char* e = dlerror();
      d.error = std::string("no CUDA driver: libcuda.so.1 could not be loaded (") + (e ? e : "not found") + ")";
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(d.lib, name));
      if (!fn && d.error.empty()) d.error = std::string("the CUDA driver has no symbol ") + name;
    };
    sym(d.init, "cuInit");
    sym(d.device_get, "cuDeviceGet");
    sym(d.device_name, "cuDeviceGetName");
    sym(d.device_attribute, "cuDeviceGetAttribute");
    sym(d.primary_retain, "cuDevicePrimaryCtxRetain");
    sym(d.ctx_set_current, "cuCtxSetCurrent");
    sym(d.module_load, "cuModuleLoadData");
    sym(d.module_unload, "cuModuleUnload");
    sym(d.get_function, "cuModuleGetFunction");
    sym(d.mem_alloc, "cuMemAlloc_v2");
    sym(d.mem_free, "cuMemFree_v2");
    sym(d.htod, "cuMemcpyHtoD_v2");
    sym(d.dtoh, "cuMemcpyDtoH_v2");
    sym(d.launch, "cuLaunchKernel");
    sym(d.synchronize, "cuCtxSynchronize");
    sym(d.event_create, "cuEventCreate");
    sym(d.event_record, "cuEventRecord");
    sym(d.event_synchronize, "cuEventSynchronize");
    sym(d.event_elapsed, "cuEventElapsedTime");
    sym(d.event_destroy, "cuEventDestroy_v2");
    sym(d.error_name, "cuGetErrorName");
    if (!d.error.empty()) return;
    try {
      d.check(d.init(0), "cuInit");
      d.check(d.device_get(&d.dev, 0), "cuDeviceGet");
      char name[256] = {};
      d.check(d.device_name(name, sizeof name - 1, d.dev), "cuDeviceGetName");
      d.name = name;
      int major = 0, minor = 0;
      d.check(d.device_attribute(&major, kAttrComputeMajor, d.dev), "cuDeviceGetAttribute");
      d.check(d.device_attribute(&minor, kAttrComputeMinor, d.dev), "cuDeviceGetAttribute");
      d.sm = major * 10 + minor;
      d.check(d.primary_retain(&d.ctx, d.dev), "cuDevicePrimaryCtxRetain");
    } catch (const Error& e) {
      d.error = e.what();
    }
  });
  return d;
}

class CudaKernel : public Kernel {
 public:
  CudaKernel(CudaBinary b, const DevicePlan& plan) : bin_(std::move(b)), plan_(plan) {}
  ~CudaKernel() override {
    if (module_) driver().module_unload(module_);
    for (auto p : temps_) driver().mem_free(p);
  }

  void launch(const uint64_t* args) override {
    const Driver& d = load();
    for (size_t i = temps_.size(); i < plan_.temp_bytes.size(); ++i) {
      CUdeviceptr p = 0;
      d.check(d.mem_alloc(&p, size_t(std::max<int64_t>(plan_.temp_bytes[i], 1))), "cuMemAlloc");
      temps_.push_back(p);
    }
    std::vector<CUdeviceptr> ptr(args, args + plan_.arg_bytes.size());
    ptr.insert(ptr.end(), temps_.begin(), temps_.end());
    run(ptr);
  }

  void call(void* const* args) override {
    Buffers b(load(), plan_, args);
    run(b.ptr);
    b.download(plan_, args);
  }

  double time(void* const* args, int number) override {
    const Driver& d = load();
    Buffers b(d, plan_, args);
    run(b.ptr);
    CUevent start, stop;
    d.check(d.event_create(&start, 0), "cuEventCreate");
    d.check(d.event_create(&stop, 0), "cuEventCreate");
    d.check(d.event_record(start, nullptr), "cuEventRecord");
    for (int i = 0; i < number; ++i) run(b.ptr);
    d.check(d.event_record(stop, nullptr), "cuEventRecord");
    d.check(d.event_synchronize(stop), "cuEventSynchronize");
    float ms = 0;
    d.check(d.event_elapsed(&ms, start, stop), "cuEventElapsedTime");
    d.event_destroy(start), d.event_destroy(stop);
    return double(ms) * 1e-3 / number;
  }

  std::string source() const override { return bin_.source; }
  std::string assembly() const override { return bin_.ptx; }
  KernelResources resources() const override { return bin_.resources; }
  std::string device() const override {
    std::string n = cuda_device_name();
    return "cuda " + bin_.arch + (n.empty() ? " (no device here)" : " " + n);
  }

 private:
  struct Buffers {
    const Driver& d;
    std::vector<CUdeviceptr> ptr;
    Buffers(const Driver& drv, const DevicePlan& plan, void* const* args) : d(drv) {
      for (int64_t i = 0; i < plan.buffers(); ++i) {
        CUdeviceptr p = 0;
        d.check(d.mem_alloc(&p, size_t(std::max<int64_t>(plan.bytes(int(i)), 1))), "cuMemAlloc");
        ptr.push_back(p);
        if (i < int64_t(plan.arg_bytes.size())) d.check(d.htod(p, args[i], plan.arg_bytes[i]), "cuMemcpyHtoD");
      }
    }
    void download(const DevicePlan& plan, void* const* args) {
      d.check(d.synchronize(), "the kernel");
      for (size_t i = 0; i < plan.arg_bytes.size(); ++i)
        if (plan.arg_written[i]) d.check(d.dtoh(args[i], ptr[i], plan.arg_bytes[i]), "cuMemcpyDtoH");
    }
    ~Buffers() {
      for (auto p : ptr) d.mem_free(p);
    }
  };

  // The driver, with this kernel's module loaded: the cubin on its own architecture,
  // otherwise the PTX, which the driver compiles for the device.
  const Driver& load() {
    const Driver& d = driver();
    TESSEL_USER_CHECK(d.error.empty(), d.error, "; the kernel compiled for ", bin_.arch, " (", bin_.resources.registers,
                      " registers, ", bin_.resources.spill_bytes, " bytes of spills) but cannot run on this machine");
    if (module_) return d;
    d.check(d.ctx_set_current(d.ctx), "cuCtxSetCurrent");
    bool exact = "sm_" + std::to_string(d.sm) == bin_.arch && !bin_.cubin.empty();
    d.check(d.module_load(&module_, exact ? bin_.cubin.data() : bin_.ptx.c_str()), "cuModuleLoadData");
    for (auto& l : plan_.launches) {
      CUfunction f;
      d.check(d.get_function(&f, module_, l.name.c_str()), "cuModuleGetFunction");
      functions_.push_back(f);
    }
    return d;
  }

  void run(const std::vector<CUdeviceptr>& ptr) {
    const Driver& d = driver();
    for (size_t k = 0; k < functions_.size(); ++k) {
      const LaunchSpec& l = plan_.launches[k];
      std::vector<CUdeviceptr> values;
      for (int p : l.params) values.push_back(ptr[p]);
      std::vector<void*> params;
      for (auto& v : values) params.push_back(&v);
      d.check(d.launch(functions_[k], unsigned(l.grid[0]), unsigned(l.grid[1]), unsigned(l.grid[2]),
                       unsigned(l.block[0]), unsigned(l.block[1]), unsigned(l.block[2]), 0, nullptr, params.data(),
                       nullptr),
              ("launching " + l.name).c_str());
    }
  }

  CudaBinary bin_;
  DevicePlan plan_;
  CUmodule module_ = nullptr;
  std::vector<CUfunction> functions_;
  std::vector<CUdeviceptr> temps_;  // for launch()
};

class CudaMemory : public DeviceMemory {
 public:
  CudaMemory() : d_(driver()) {
    TESSEL_USER_CHECK(d_.error.empty(), "no CUDA device to hold a network's tensors: ", d_.error);
    d_.check(d_.ctx_set_current(d_.ctx), "cuCtxSetCurrent");
  }
  ~CudaMemory() override {
    for (auto p : owned_) d_.mem_free(p);
  }
  int64_t alignment() const override { return 256; }
  uint64_t alloc(int64_t bytes) override {
    CUdeviceptr p = 0;
    d_.check(d_.mem_alloc(&p, size_t(std::max<int64_t>(bytes, 1))), "cuMemAlloc");
    owned_.push_back(p);
    return p;
  }
  uint64_t view(uint64_t base, int64_t offset, int64_t) override { return base + uint64_t(offset); }
  void upload(uint64_t dst, const void* src, int64_t bytes) override {
    d_.check(d_.htod(dst, src, size_t(bytes)), "cuMemcpyHtoD");
  }
  void download(void* dst, uint64_t src, int64_t bytes) override {
    d_.check(d_.dtoh(dst, src, size_t(bytes)), "cuMemcpyDtoH");
  }
  void synchronize() override { d_.check(d_.synchronize(), "the kernels"); }

 private:
  const Driver& d_;
  std::vector<CUdeviceptr> owned_;
};

}  // namespace

std::shared_ptr<DeviceMemory> make_cuda_memory() { return std::make_shared<CudaMemory>(); }

std::unique_ptr<Kernel> make_cuda_kernel(CudaBinary binary, const DevicePlan& plan) {
  return std::make_unique<CudaKernel>(std::move(binary), plan);
}

std::string cuda_device_name() {
  const Driver& d = driver();
  return d.error.empty() ? d.name + " (sm_" + std::to_string(d.sm) + ")" : "";
}

std::string cuda_unavailable_reason() { return driver().error; }

}  // namespace tessel
