#include "runtime/OpenCL.h"

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "tessel/error.h"

namespace tessel {
namespace {

void check(cl_int rc, const char* what) {
  TESSEL_USER_CHECK(rc == CL_SUCCESS, "OpenCL: ", what, " failed with error ", rc);
}

// The process's OpenCL device, context and a profiling queue, made at first use.
struct Device {
  cl_device_id id = nullptr;
  cl_context ctx = nullptr;
  cl_command_queue queue = nullptr;
  std::string name, error;
};

Device& cl_device() {
  static Device d;
  static std::once_flag once;
  std::call_once(once, [] {
    // PoCL caches compiled kernels under $HOME by default; keep ours in a directory of our own.
    if (!std::getenv("POCL_CACHE_DIR")) {
      const char* tmp = std::getenv("TMPDIR");
      std::string dir = std::string(tmp ? tmp : "/tmp") + "/tessel-pocl-cache-" + std::to_string(getuid());
      setenv("POCL_CACHE_DIR", dir.c_str(), 0);
    }
    cl_uint np = 0;
    if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) {
      d.error = "no OpenCL platform (install an OpenCL driver; on a machine without a GPU, PoCL: pocl-opencl-icd)";
      return;
    }
    std::vector<cl_platform_id> ps(np);
    clGetPlatformIDs(np, ps.data(), nullptr);
    for (auto p : ps) {
      cl_uint nd = 0;
      if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d.id, &nd) == CL_SUCCESS && nd > 0) break;
      d.id = nullptr;
    }
    if (!d.id) {
      d.error = "no OpenCL device on any platform";
      return;
    }
    char name[256] = {};
    clGetDeviceInfo(d.id, CL_DEVICE_NAME, sizeof name - 1, name, nullptr);
    d.name = name;
    cl_int rc;
    d.ctx = clCreateContext(nullptr, 1, &d.id, nullptr, nullptr, &rc);
    check(rc, "clCreateContext");
    d.queue = clCreateCommandQueue(d.ctx, d.id, CL_QUEUE_PROFILING_ENABLE, &rc);
    check(rc, "clCreateCommandQueue");
  });
  TESSEL_USER_CHECK(d.error.empty(), "cannot run OpenCL kernels: ", d.error);
  return d;
}

class OpenCLKernel : public Kernel {
 public:
  OpenCLKernel(const std::string& source, const DevicePlan& plan) : source_(source), plan_(plan) {
    Device& d = cl_device();
    const char* src = source_.c_str();
    cl_int rc;
    program_ = clCreateProgramWithSource(d.ctx, 1, &src, nullptr, &rc);
    check(rc, "clCreateProgramWithSource");
    if (clBuildProgram(program_, 1, &d.id, "-cl-std=CL1.2", nullptr, nullptr) != CL_SUCCESS) {
      size_t n = 0;
      clGetProgramBuildInfo(program_, d.id, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
      std::string log(n, '\0');
      clGetProgramBuildInfo(program_, d.id, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
      log.resize(log.find('\0') == std::string::npos ? log.size() : log.find('\0'));
      clReleaseProgram(program_);
      throw Error("the OpenCL compiler rejected the kernel:\n" + log + "\n" + source_);
    }
    for (auto& l : plan_.launches) {
      kernels_.push_back(clCreateKernel(program_, l.name.c_str(), &rc));
      check(rc, "clCreateKernel");
    }
  }
  ~OpenCLKernel() override {
    for (auto k : kernels_) clReleaseKernel(k);
    for (auto m : temps_) clReleaseMemObject(m);
    clReleaseProgram(program_);
  }

  void launch(const uint64_t* args) override {
    Device& d = cl_device();
    for (size_t i = temps_.size(); i < plan_.temp_bytes.size(); ++i) {
      cl_int rc;
      temps_.push_back(clCreateBuffer(d.ctx, CL_MEM_READ_WRITE, size_t(std::max<int64_t>(plan_.temp_bytes[i], 1)),
                                      nullptr, &rc));
      check(rc, "clCreateBuffer");
    }
    std::vector<cl_mem> mem;
    for (size_t i = 0; i < plan_.arg_bytes.size(); ++i) mem.push_back(reinterpret_cast<cl_mem>(args[i]));
    mem.insert(mem.end(), temps_.begin(), temps_.end());
    enqueue(mem, nullptr);
  }

  void call(void* const* args) override {
    Buffers b(plan_, args);
    run(b.mem, nullptr);
    b.download(plan_, args);
  }

  double time(void* const* args, int number) override {
    Buffers b(plan_, args);
    run(b.mem, nullptr);
    double seconds = 0;
    for (int i = 0; i < number; ++i) run(b.mem, &seconds);
    return seconds / number;
  }

  std::string source() const override { return source_; }
  std::string assembly() const override { return ""; }
  std::string device() const override { return "opencl " + cl_device().name; }
  KernelResources resources() const override {
    KernelResources r;
    r.kernels = int(kernels_.size());
    return r;
  }

 private:
  // Device copies of the arguments (uploaded) and of the temporaries.
  struct Buffers {
    std::vector<cl_mem> mem;
    Buffers(const DevicePlan& plan, void* const* args) {
      Device& d = cl_device();
      for (int64_t i = 0; i < plan.buffers(); ++i) {
        cl_int rc;
        bool arg = i < int64_t(plan.arg_bytes.size());
        size_t bytes = size_t(std::max<int64_t>(plan.bytes(int(i)), 1));
        mem.push_back(clCreateBuffer(d.ctx, CL_MEM_READ_WRITE | (arg ? CL_MEM_COPY_HOST_PTR : 0), bytes,
                                     arg ? args[i] : nullptr, &rc));
        check(rc, "clCreateBuffer");
      }
    }
    void download(const DevicePlan& plan, void* const* args) {
      Device& d = cl_device();
      for (size_t i = 0; i < plan.arg_bytes.size(); ++i)
        if (plan.arg_written[i])
          check(clEnqueueReadBuffer(d.queue, mem[i], CL_TRUE, 0, plan.arg_bytes[i], args[i], 0, nullptr, nullptr),
                "clEnqueueReadBuffer");
    }
    ~Buffers() {
      for (auto m : mem) clReleaseMemObject(m);
    }
  };

  // One run of every launch, waited for; adds their device time to `seconds` when given.
  void run(const std::vector<cl_mem>& mem, double* seconds) {
    std::vector<cl_event> events;
    enqueue(mem, &events);
    check(clFinish(cl_device().queue), "clFinish");
    for (auto e : events) {
      if (seconds) {
        cl_ulong start = 0, end = 0;
        clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr);
        clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr);
        *seconds += double(end - start) * 1e-9;
      }
      clReleaseEvent(e);
    }
  }

  // Queues every launch; their events go to `events` if given.
  void enqueue(const std::vector<cl_mem>& mem, std::vector<cl_event>* events) {
    Device& d = cl_device();
    for (size_t k = 0; k < kernels_.size(); ++k) {
      const LaunchSpec& l = plan_.launches[k];
      for (size_t p = 0; p < l.params.size(); ++p)
        check(clSetKernelArg(kernels_[k], cl_uint(p), sizeof(cl_mem), &mem[l.params[p]]), "clSetKernelArg");
      size_t global[3], local[3];
      for (int i = 0; i < 3; ++i) local[i] = size_t(l.block[i]), global[i] = size_t(l.grid[i] * l.block[i]);
      check(clEnqueueNDRangeKernel(d.queue, kernels_[k], 3, nullptr, global, local, 0, nullptr,
                                   events ? &events->emplace_back() : nullptr),
            "clEnqueueNDRangeKernel");
    }
  }

  std::string source_;
  DevicePlan plan_;
  cl_program program_ = nullptr;
  std::vector<cl_kernel> kernels_;
  std::vector<cl_mem> temps_;  // for launch()
};

class OpenCLMemory : public DeviceMemory {
 public:
  OpenCLMemory() : d_(cl_device()) {
    cl_uint bits = 0;
    check(clGetDeviceInfo(d_.id, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits, &bits, nullptr), "clGetDeviceInfo");
    align_ = std::max<int64_t>(bits / 8, 64);
  }
  ~OpenCLMemory() override {
    for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) clReleaseMemObject(*it);  // views first
  }
  int64_t alignment() const override { return align_; }
  uint64_t alloc(int64_t bytes) override {
    cl_int rc;
    cl_mem m = clCreateBuffer(d_.ctx, CL_MEM_READ_WRITE, size_t(std::max<int64_t>(bytes, 1)), nullptr, &rc);
    check(rc, "clCreateBuffer");
    owned_.push_back(m);
    return reinterpret_cast<uint64_t>(m);
  }
  uint64_t view(uint64_t base, int64_t offset, int64_t bytes) override {
    cl_buffer_region r{size_t(offset), size_t(std::max<int64_t>(bytes, 1))};
    cl_int rc;
    cl_mem m = clCreateSubBuffer(reinterpret_cast<cl_mem>(base), CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r,
                                 &rc);
    check(rc, "clCreateSubBuffer");
    owned_.push_back(m);
    return reinterpret_cast<uint64_t>(m);
  }
  void upload(uint64_t dst, const void* src, int64_t bytes) override {
    check(clEnqueueWriteBuffer(d_.queue, reinterpret_cast<cl_mem>(dst), CL_TRUE, 0, size_t(bytes), src, 0, nullptr,
                               nullptr),
          "clEnqueueWriteBuffer");
  }
  void download(void* dst, uint64_t src, int64_t bytes) override {
    check(clEnqueueReadBuffer(d_.queue, reinterpret_cast<cl_mem>(src), CL_TRUE, 0, size_t(bytes), dst, 0, nullptr,
                              nullptr),
          "clEnqueueReadBuffer");
  }
  void synchronize() override { check(clFinish(d_.queue), "clFinish"); }

 private:
  Device& d_;
  int64_t align_ = 64;
  std::vector<cl_mem> owned_;
};

}  // namespace

std::shared_ptr<DeviceMemory> make_opencl_memory() { return std::make_shared<OpenCLMemory>(); }

std::unique_ptr<Kernel> make_opencl_kernel(const std::string& source, const DevicePlan& plan) {
  return std::make_unique<OpenCLKernel>(source, plan);
}

std::string opencl_device_name() {
  try {
    return cl_device().name;
  } catch (const Error&) {
    return "";
  }
}

}  // namespace tessel
