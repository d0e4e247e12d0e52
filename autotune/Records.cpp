#include "autotune/Records.h"

#include <algorithm>

#include <cmath>
#include <ctime>
#include <fstream>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>
#include <zlib.h>

namespace tessel::autotune {

using json = nlohmann::json;

const char* error_name(ErrorCode e) {
  switch (e) {
    case ErrorCode::None: return "";
    case ErrorCode::Instantiation: return "instantiation";
    case ErrorCode::CompileHost: return "compile";
    case ErrorCode::Runtime: return "runtime";
    case ErrorCode::WrongAnswer: return "wrong_answer";
    case ErrorCode::BuildTimeout: return "build_timeout";
    case ErrorCode::RunTimeout: return "run_timeout";
    case ErrorCode::Unknown: return "unknown";
    case ErrorCode::Invalid: return "invalid";
  }
  return "unknown";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double Record::mean_cost() const {
  if (!ok()) return std::numeric_limits<double>::infinity();
  double s = 0;
  for (double c : costs) s += c;
  return s / double(costs.size());
}

double Record::min_cost() const {
  if (!ok()) return std::numeric_limits<double>::infinity();
  return *std::min_element(costs.begin(), costs.end());
}

Record make_record(const Workload& w, const Target& t) {
  Record r;
  r.workload_key = w.key();
  r.workload_hash = w.hash();
  r.op = w.op;
  r.shape = w.shape;
  r.dtype = w.dtype.str();
  r.layout = w.layout;
  r.target_key = t.key();
  r.target_str = t.str();
  r.cores = t.num_cores;
  r.vector_bytes = t.vector_bytes;
  r.cache_line = t.cache_line_bytes;
  r.timestamp = int64_t(std::time(nullptr));
  r.flops = w.flops;
  return r;
}

namespace {
std::set<std::string> feature_set(const std::string& target_str) {
  std::set<std::string> out;
  size_t at = target_str.find("-mattr=");
  if (at == std::string::npos) return out;
  std::string list = target_str.substr(at + 7, target_str.find(' ', at) - (at + 7));
  for (size_t b = 0, e; b < list.size(); b = e + 1) {
    e = std::min(list.find(',', b), list.size());
    if (list[b] != '-') out.insert(list.substr(b, e - b));  // what the CPU has, not what it lacks
  }
  return out;
}
}  // namespace

bool stands_in(const Record& r, const Target& t) {
  if (r.target_key == t.key()) return false;
  if (t.is_gpu()) {  // the same architecture: another device of it, or its estimates
    std::string arch = std::string(t.kind_name()) + "/" + t.arch;
    return r.target_key == arch || r.target_key.rfind(arch + "/", 0) == 0 || r.target_str == t.str();
  }
  return r.target_key.rfind(std::string(t.kind_name()) + "/", 0) == 0 && r.vector_bytes == t.vector_bytes;
}

double stand_in_score(const Record& r, const Target& t) {
  if (!stands_in(r, t)) return -1;
  std::set<std::string> a = feature_set(r.target_str), b = feature_set(t.str());
  size_t shared = 0;
  for (auto& f : a) shared += b.count(f);
  size_t all = a.size() + b.size() - shared;
  return (all ? double(shared) / double(all) : 1.0) + (r.cores == t.num_cores ? 0.5 : 0.0);
}

std::string Record::to_json() const {
  json j;
  j["v"] = kLogVersion;
  j["workload"] = {{"key", workload_key}, {"hash", workload_hash}, {"op", op},
                   {"shape", shape},      {"dtype", dtype},        {"layout", layout}};
  j["target"] = {{"key", target_key}, {"str", target_str}, {"cores", cores}, {"vector_bytes", vector_bytes},
                 {"cache_line", cache_line}};
  j["steps"] = json::parse(steps_to_json(steps));
  json d = json::array();
  for (auto& x : decisions) d.push_back(json::array({x.kind == Decision::Tile ? "T" : "C", x.range, x.value}));
  j["decisions"] = d;
  j["costs"] = costs;
  j["error"] = int(error);
  j["error_name"] = error_name(error);
  j["message"] = message;
  j["build_s"] = build_seconds;
  if (estimate) j["estimate"] = true;  // written only when set: CPU logs stay as they were
  j["timestamp"] = timestamp;
  if (flops > 0) j["flops"] = flops;
  if (round >= 0) j["round"] = round;
  if (std::isfinite(predicted)) j["predicted"] = predicted;
  return j.dump();
}

Record record_from_json(const std::string& line) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception&) {
    throw Error("not valid JSON (a truncated or corrupted line)");
  }
  if (!j.is_object() || !j.contains("v")) throw Error("not a tuning record (no format version \"v\")");
  if (!j["v"].is_number_integer() || j["v"].get<int>() != kLogVersion)
    throw Error("record of format version " + j["v"].dump() + "; this Tessel reads version " +
                std::to_string(kLogVersion) + " (re-tune, or convert the log with the Tessel that wrote it)");
  try {
    Record r;
    auto& w = j.at("workload");
    r.workload_key = w.at("key");
    r.workload_hash = w.at("hash");
    r.op = w.at("op");
    r.shape = w.at("shape").get<std::map<std::string, int64_t>>();
    r.dtype = w.at("dtype");
    r.layout = w.at("layout");
    auto& t = j.at("target");
    r.target_key = t.at("key");
    r.target_str = t.at("str");
    r.cores = t.at("cores");
    r.vector_bytes = t.at("vector_bytes");
    // Records written before CPU keys named the vector width ("llvm/znver4") get it from
    // the width they were measured with, so they match only machines of that width.
    if (r.target_key.rfind("llvm/", 0) == 0 && r.target_key.find('/', 5) == std::string::npos)
      r.target_key += "/v" + std::to_string(r.vector_bytes * 8);
    r.cache_line = t.at("cache_line");
    r.steps = steps_from_json(j.at("steps").dump());
    for (auto& d : j.at("decisions")) {
      Decision x;
      x.kind = d.at(0) == "T" ? Decision::Tile : Decision::Choice;
      x.range = d.at(1);
      x.value = d.at(2).get<std::vector<int64_t>>();
      r.decisions.push_back(x);
    }
    r.costs = j.at("costs").get<std::vector<double>>();
    r.error = ErrorCode(j.at("error").get<int>());
    r.message = j.at("message");
    r.build_seconds = j.at("build_s");
    r.timestamp = j.at("timestamp");
    r.estimate = j.value("estimate", false);
    r.flops = j.value("flops", 0.0);
    r.round = j.value("round", -1);
    r.predicted = j.value("predicted", std::numeric_limits<double>::quiet_NaN());
    return r;
  } catch (const json::exception& e) {
    throw Error(std::string("a field is missing or has the wrong type (") + e.what() + ")");
  }
}

LogWriter::LogWriter(const std::string& path) : path_(path) {
  bool gz = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  TESSEL_USER_CHECK(!gz, "tuning log '", path, "' is compressed: the tuner appends to plain JSON lines; decompress it "
                    "(gunzip -k ", path, ") and give the .json, then compress it again when done (gzip -f)");
  f_ = std::fopen(path.c_str(), "a");
  TESSEL_USER_CHECK(f_, "cannot open tuning log '", path, "' for appending");
}

LogWriter::~LogWriter() {
  if (f_) std::fclose(f_);
}

void LogWriter::append(const Record& r) {
  std::string line = r.to_json() + "\n";
  // One write and a flush per record: a killed run loses at most the record in flight.
  std::fwrite(line.data(), 1, line.size(), f_);
  std::fflush(f_);
}

std::vector<Record> read_log(const std::string& path, std::vector<std::string>* warnings) {
  std::vector<Record> out;
  // zlib reads plain and gzip-compressed logs alike (the committed logs are compressed).
  // Lines are split on '\n' by hand: a corrupted line may hold a NUL byte.
  gzFile in = gzopen(path.c_str(), "rb");
  if (!in) return out;
  std::string data;
  char buf[1 << 16];
  for (int got; (got = gzread(in, buf, sizeof buf)) > 0;) data.append(buf, size_t(got));
  gzclose(in);  // a truncated compressed log gives what it holds up to the cut
  int n = 0;
  for (size_t begin = 0; begin < data.size();) {
    size_t end = std::min(data.find('\n', begin), data.size());
    std::string line = data.substr(begin, end - begin);
    begin = end + 1;
    ++n;
    if (line.empty() || line[0] == '#') continue;
    try {
      out.push_back(record_from_json(line));
    } catch (const Error& e) {
      std::string w = path + ":" + std::to_string(n) + ": skipped: " + e.what();
      if (warnings) warnings->push_back(w);
      else std::fprintf(stderr, "warning: %s\n", w.c_str());
    }
  }
  return out;
}

}  // namespace tessel::autotune
