#include "runtime/Job.h"

#include <sstream>

#include "runtime/OpenCL.h"
#include "tessel/error.h"

namespace tessel {
namespace {

void blob(std::string& out, const char* name, const std::string& bytes) {
  out += std::string("blob ") + name + " " + std::to_string(bytes.size()) + "\n" + bytes + "\n";
}

}  // namespace

std::string workload_message(int64_t id, const std::vector<RunnerArg>& args) {
  std::string out = "workload " + std::to_string(id) + " " + std::to_string(args.size()) + "\n";
  for (auto& a : args)
    out += "arg " + std::to_string(a.data.size()) + (a.output ? " out " : " in ") + std::to_string(a.bytes) + "\n" +
           a.data + "\n";
  return out;
}

std::string job_message(const RunnerJob& j) {
  char head[256];
  std::snprintf(head, sizeof head, "job %lld %lld %d %.9g %.9g %s\n", (long long)j.id, (long long)j.workload, j.repeat,
                j.min_repeat_ms, j.best_known, j.mode.c_str());
  const DeviceCode& c = j.code;
  std::string out = head;
  out += "code " + c.kind + " " + (c.binary.arch.empty() ? "-" : c.binary.arch) + "\n";
  blob(out, "cubin", c.binary.cubin);
  blob(out, "ptx", c.binary.ptx);
  blob(out, "source", c.binary.source);
  const DevicePlan& p = c.plan;
  out += "plan " + std::to_string(p.arg_bytes.size()) + " " + std::to_string(p.temp_bytes.size()) + " " +
         std::to_string(p.launches.size()) + "\n";
  for (size_t i = 0; i < p.arg_bytes.size(); ++i)
    out += "a " + std::to_string(p.arg_bytes[i]) + " " + (p.arg_written[i] ? "1" : "0") + "\n";
  for (int64_t t : p.temp_bytes) out += "t " + std::to_string(t) + "\n";
  for (auto& l : p.launches) {
    out += "l " + l.name;
    for (int d = 0; d < 3; ++d) out += " " + std::to_string(l.grid[d]);
    for (int d = 0; d < 3; ++d) out += " " + std::to_string(l.block[d]);
    out += " " + std::to_string(l.params.size());
    for (int q : l.params) out += " " + std::to_string(q);
    out += "\n";
  }
  return out + "end\n";
}

std::string JobReader::line() {
  std::string s;
  for (int c; (c = std::fgetc(in_)) != EOF && c != '\n';) s += char(c);
  return s;
}

std::string JobReader::bytes(size_t n) {
  std::string s(n, '\0');
  TESSEL_USER_CHECK(std::fread(s.data(), 1, n, in_) == n, "runner input: the stream ended inside a blob");
  std::fgetc(in_);  // the newline after it
  return s;
}

std::string JobReader::next(int64_t* workload_id, std::vector<RunnerArg>* args, RunnerJob* job) {
  std::string l;
  while ((l = line()).empty())
    if (std::feof(in_)) return "";
  std::istringstream head(l);
  std::string kind;
  head >> kind;
  if (kind == "workload") {
    size_t n = 0;
    head >> *workload_id >> n;
    args->assign(n, {});
    for (auto& a : *args) {
      std::istringstream al(line());
      std::string tag, role;
      size_t len = 0;
      al >> tag >> len >> role >> a.bytes;
      TESSEL_USER_CHECK(tag == "arg" && (role == "in" || role == "out"), "runner input: bad argument line");
      a.output = role == "out";
      a.data = bytes(len);
    }
    return kind;
  }
  TESSEL_USER_CHECK(kind == "job", "runner input: unknown message '", kind, "' (expected workload or job)");
  *job = RunnerJob{};
  head >> job->id >> job->workload >> job->repeat >> job->min_repeat_ms >> job->best_known >> job->mode;
  for (std::string l2; (l2 = line()) != "end";) {
    TESSEL_USER_CHECK(!std::feof(in_), "runner input: the stream ended inside job ", job->id);
    std::istringstream in(l2);
    std::string tag;
    in >> tag;
    DeviceCode& c = job->code;
    if (tag == "code") {
      in >> c.kind >> c.binary.arch;
    } else if (tag == "blob") {
      std::string name;
      size_t n = 0;
      in >> name >> n;
      std::string data = bytes(n);
      (name == "cubin" ? c.binary.cubin : name == "ptx" ? c.binary.ptx : c.binary.source) = data;
    } else if (tag == "a") {
      int64_t b = 0;
      int w = 0;
      in >> b >> w;
      c.plan.arg_bytes.push_back(b), c.plan.arg_written.push_back(w != 0);
    } else if (tag == "t") {
      int64_t b = 0;
      in >> b;
      c.plan.temp_bytes.push_back(b);
    } else if (tag == "l") {
      LaunchSpec ls;
      size_t n = 0;
      in >> ls.name >> ls.grid[0] >> ls.grid[1] >> ls.grid[2] >> ls.block[0] >> ls.block[1] >> ls.block[2] >> n;
      ls.params.resize(n);
      for (auto& q : ls.params) in >> q;
      c.plan.launches.push_back(ls);
    }
  }
  return kind;
}

std::unique_ptr<Kernel> make_device_kernel(const DeviceCode& code) {
  if (code.kind == "cuda") return make_cuda_kernel(code.binary, code.plan);
  TESSEL_USER_CHECK(code.kind == "opencl", "unknown device code kind '", code.kind, "' (cuda or opencl)");
  return make_opencl_kernel(code.binary.source, code.plan);
}

}  // namespace tessel
