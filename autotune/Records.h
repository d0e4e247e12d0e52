#pragma once
/** \file The tuning log: JSON lines, one record per measured candidate, appended and
 * flushed record by record. See kLogVersion for the format's version. */
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "autotune/SearchSpace.h"
#include "tessel/autotune.h"
#include "tessel/error.h"

namespace tessel::autotune {

// Version 1: {"v","workload":{key,hash,op,shape,dtype,layout},"target":{key,str,cores,
// vector_bytes,cache_line},"steps":[...],"decisions":[[kind,range,[values]],...],
// "costs":[seconds...],"error":code,"error_name","message","build_s","timestamp"}, and "estimate":true
// on records whose cost the static GPU model estimated (no GPU ran them). Optional, for
// reports (older records lack them): "flops" (the workload's), "round" (the tuning round of
// the run that measured it) and "predicted" (the cost model's score when it was proposed).
constexpr int kLogVersion = 1;

enum class ErrorCode : int {
  None = 0, Instantiation = 1, CompileHost = 2, Runtime = 4, WrongAnswer = 5,
  BuildTimeout = 6, RunTimeout = 7, Unknown = 8,
  Invalid = 9  // breaks the target's limits (threads, shared memory, registers, spills): never run
};
const char* error_name(ErrorCode e);

// The message of the record of a workload's default schedule (it has no decisions).
constexpr const char* kDefaultScheduleMessage = "default schedule";
// The message of the records of the finals (the best few and the default measured again).
constexpr const char* kRemeasuredMessage = "re-measured";
// The median of a non-empty list.
double median(std::vector<double> v);

struct Record {
  std::string workload_key, workload_hash, op, dtype, layout;
  std::map<std::string, int64_t> shape;
  std::string target_key, target_str;
  int cores = 0, vector_bytes = 0, cache_line = 0;
  std::vector<Step> steps;
  std::vector<Decision> decisions;
  std::vector<double> costs;  // seconds per repeat
  ErrorCode error = ErrorCode::None;
  std::string message;
  double build_seconds = 0;
  bool estimate = false;  // costs from the static model of a GPU kernel, not a measurement
  int64_t timestamp = 0;
  double flops = 0;        // 0: not recorded
  int round = -1;          // -1: not measured in a search round (default schedule, finals, older logs)
  double predicted = std::numeric_limits<double>::quiet_NaN();  // NaN: no trained model proposed it

  bool ok() const { return error == ErrorCode::None && !costs.empty(); }
  double mean_cost() const;  // +inf for errors
  // The fastest repeat (+inf for errors): a shared machine's slow spells only ever slow a
  // repeat down, so the finals compare programs by this.
  double min_cost() const;
  std::string to_json() const;
};

Record make_record(const Workload& w, const Target& t);

// Whether a record made on another CPU can stand in for target `t`: the same kind of target
// and vector width (its register blocks were sized for such registers). Records of `t`
// itself do not.
bool stands_in(const Record& r, const Target& t);
// How well such a record stands in: how much the two CPUs' feature lists overlap (0..1),
// plus 0.5 when the core counts match (its parallel loops were sized for them); -1 when it
// cannot stand in. It parses both feature lists: score a CPU once, not each of its records.
double stand_in_score(const Record& r, const Target& t);

// Appends records to a log file, one flushed line each.
class LogWriter {
 public:
  explicit LogWriter(const std::string& path);
  ~LogWriter();
  void append(const Record& r);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
};

// Reads a log. Bad lines (not JSON, truncated, missing fields, another format version)
// are skipped; each one adds a warning naming the file and line.
std::vector<Record> read_log(const std::string& path, std::vector<std::string>* warnings = nullptr);
Record record_from_json(const std::string& line);  // throws tessel::Error with the reason

}  // namespace tessel::autotune
