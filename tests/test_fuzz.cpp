// Fuzzing what users hand Tessel: random step sequences, valid and invalid, on each
// operator's schedule must each end in a clear tessel::Error or a kernel that gives the
// default schedule's answer (never an internal error or a crash); corrupted tuning logs must
// load without crashing and without losing a valid record, and the steps they hold must
// replay or fail clearly.
#include <cstdio>
#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include <zlib.h>

#include "autotune/Records.h"
#include "schedule/ScheduleState.h"
#include "reference.h"

using namespace tessel;
using namespace tessel::autotune;

namespace {

class Fuzzer {
 public:
  explicit Fuzzer(uint64_t seed) : rng_(seed) {}
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <typename T>
  const T& any(const std::vector<T>& v) { return v[size_t(pick(int(v.size())))]; }
  std::mt19937_64& rng() { return rng_; }

  // A step on the schedule as it is now, most often one a user would write (a split of a
  // leaf axis, a reorder of the whole nest, adjacent axes fused, the innermost vectorized,
  // the outermost parallel, a stage computed at a leaf of another), any kind at all one time
  // in four; names sometimes of no stage or axis, or of another stage's axis; numbers
  // sometimes zero, negative or huge.
  Step step(const Schedule& s) {
    Schedule& sch = const_cast<Schedule&>(s);
    std::vector<std::string> stages = s.stage_names();
    auto leaves = [&](const std::string& stage) {
      try {
        return sch[stage].leaf_axes();
      } catch (const Error&) {
        return std::vector<std::string>{};
      }
    };
    static const std::vector<Step::Kind> common = {Step::Split,     Step::Split,    Step::Split,   Step::Reorder,
                                                   Step::Fuse,      Step::Vectorize, Step::Unroll, Step::Parallel,
                                                   Step::ComputeAt, Step::ComputeInline, Step::CacheWrite,
                                                   Step::Pragma};
    std::vector<std::string> computed;
    for (auto& n : stages)
      if (!s.state().stage(n).is_placeholder()) computed.push_back(n);
    Step st;
    st.kind = coin(0.25) ? Step::Kind(pick(int(Step::ReorderStorage) + 1)) : any(common);
    st.stage = coin(0.03) ? "no_such_stage" : coin(0.9) ? any(computed) : any(stages);
    std::vector<std::string> axes = leaves(st.stage);
    if (axes.empty()) axes.push_back("no_such_axis");
    auto number = [&]() -> int64_t {
      static const std::vector<int64_t> odd = {0, -1, -8, int64_t(1) << 40};
      return coin(0.05) ? any(odd) : 1 + pick(8);
    };
    size_t at = size_t(pick(int(axes.size())));
    switch (st.kind) {
      case Step::Reorder:
        st.axes = axes;
        std::shuffle(st.axes.begin(), st.axes.end(), rng_);
        break;
      case Step::Fuse:
        st.axes = {axes[at], axes[std::min(at + 1, axes.size() - 1)]};
        break;
      case Step::Vectorize: st.axes = {coin(0.8) ? axes.back() : axes[at]}; break;
      case Step::Parallel: st.axes = {coin(0.8) ? axes.front() : axes[at]}; break;
      default: st.axes = {axes[at]}; break;
    }
    if (coin(0.03)) st.axes[0] = "no_such_axis";
    if (coin(0.03)) {  // another stage's axis
      auto other = leaves(any(stages));
      if (!other.empty()) st.axes[0] = any(other);
    }
    st.ints = {number()};
    if (st.kind == Step::StorageAlign || st.kind == Step::Pack || st.kind == Step::RewriteLayout || coin(0.03))
      st.ints.push_back(number());
    static const std::vector<std::string> strs = {"local", "shared", "global", "blockIdx.x", "threadIdx.x", "bogus"};
    st.str = coin(0.8) && st.kind == Step::CacheWrite ? "local" : any(strs);
    if (st.kind == Step::Pragma) {
      st.str = coin(0.8) ? "auto_unroll_max_step" : "bogus";
      st.ints = {int64_t(16 * pick(5))};
    }
    if (st.kind == Step::ComputeAt) {
      st.str = any(stages);
      auto parent = leaves(st.str);
      if (!parent.empty()) st.axes = {any(parent)};
    }
    int readers = pick(3);
    for (int i = 0; i < readers; ++i) st.stages.push_back(any(stages));
    return st;
  }

 private:
  std::mt19937_64 rng_;
};

std::string describe(const std::vector<Step>& steps) { return steps_to_json(steps); }

struct Tally {
  int sequences = 0, errors = 0, built = 0, build_errors = 0;
  std::map<std::string, int> messages;  // the errors' first words, for the summary
};

}  // namespace

TEST(Fuzz, RandomStepSequencesGiveAClearErrorOrTheReferenceAnswer) {
  struct Op {
    const char* name;
    const char* shape;
  };
  // Tiny shapes: a kernel builds in milliseconds however the fuzzer unrolls it.
  const std::vector<Op> ops = {{"matmul", "M=9,N=12,K=7"},
                               {"dense", "M=5,N=12,K=6"},
                               {"batch_matmul", "B=2,M=5,N=8,K=4"},
                               {"conv2d", "C=4,H=6,W=6,K=8,R=3,S=3,pad=1"},
                               {"conv2d_nhwc", "C=4,H=6,W=7,K=8,R=3,S=3,pad=1,stride=2"},
                               {"depthwise_conv2d", "C=8,H=7,W=7,R=3,S=3,pad=1"},
                               {"softmax", "rows=4,cols=24"},
                               {"layer_norm", "rows=3,cols=16"},
                               {"max_pool2d", "C=3,H=7,W=7,R=3,stride=2,pad=1"}};
  const int kSequences = 250;  // per operator
  Tally all;
  for (size_t o = 0; o < ops.size(); ++o) {
    Workload w = make_workload(ops[o].name, parse_shape(ops[o].shape));
    std::vector<Buffer> inputs;
    for (size_t i = 0; i + w.outputs.size() < w.args.size(); ++i) inputs.push_back(ref::random(w.args[i].shape(), i));
    Buffer want = ref::run(autotune::default_schedule(w), w.args, inputs)[0];
    Fuzzer f(1000 + o);
    for (int q = 0; q < kSequences; ++q) {
      ++all.sequences;
      Schedule s(w.outputs);
      std::vector<Step> applied;
      bool failed = false;
      int n = 1 + f.pick(5);
      for (int k = 0; k < n && !failed; ++k) {
        Step st = f.step(s);
        applied.push_back(st);
        try {
          s.apply(st);
        } catch (const Error& e) {
          EXPECT_GT(std::string(e.what()).size(), 10u) << describe(applied);
          ++all.messages[std::string(e.what()).substr(0, 48)];
          failed = true;
        } catch (const std::exception& e) {
          ADD_FAILURE() << ops[o].name << ": " << e.what() << "\n  steps: " << describe(applied);
          failed = true;
        }
      }
      if (failed) {
        ++all.errors;
        continue;
      }
      try {
        Buffer got = ref::run(s, w.args, inputs)[0];
        ++all.built;
        EXPECT_LE(max_relative_error(got, want), 1e-4) << ops[o].name << "\n  steps: " << describe(applied);
      } catch (const Error& e) {
        ++all.build_errors;
      } catch (const std::exception& e) {
        ADD_FAILURE() << ops[o].name << " (build): " << e.what() << "\n  steps: " << describe(applied);
      }
    }
  }
  std::printf("fuzz: %d step sequences on %zu operators: %d stopped at a step with an Error, %d built and matched "
              "the default schedule, %d refused by build with an Error\n",
              all.sequences, ops.size(), all.errors, all.built, all.build_errors);
  std::vector<std::pair<int, std::string>> common;
  for (auto& [m, n] : all.messages) common.emplace_back(n, m);
  std::sort(common.rbegin(), common.rend());
  for (size_t i = 0; i < std::min<size_t>(8, common.size()); ++i)
    std::printf("  %5d x \"%s...\"\n", common[i].first, common[i].second.c_str());
  EXPECT_GT(all.built, all.sequences / 10);   // valid sequences are exercised, not only refusals
  EXPECT_GT(all.errors, all.sequences / 10);  // and invalid ones
}

TEST(Fuzz, CorruptedLogsLoadWithoutLosingAValidRecord) {
  // 40 records of a real log; each case corrupts a few lines (truncation, wrong types, huge
  // numbers, another version, garbage, steps that no longer fit) and loads the file.
  std::vector<Record> real = read_log(std::string(TESSEL_SOURCE_DIR) + "/tuning_logs/gemm_512.json.gz");
  ASSERT_GE(real.size(), 40u);
  std::vector<std::string> lines;
  for (size_t i = 0; i < 40; ++i) lines.push_back(real[i].to_json());
  const std::vector<std::string>& canon = lines;  // each line's record, as written back
  Workload w = make_workload("matmul", parse_shape("M=512,N=512,K=512"));
  Fuzzer f(7);
  const std::vector<std::string> values = {"null", "\"x\"", "[]", "{}", "-1", "1e308", "9223372036854775807",
                                           "-9223372036854775808", "18446744073709551616", "2", "true", "0.5"};
  const std::vector<std::string> keys = {"\"v\":", "\"costs\":", "\"steps\":", "\"error\":", "\"workload\":",
                                         "\"key\":", "\"shape\":", "\"decisions\":", "\"timestamp\":", "\"M\":",
                                         "\"target\":", "\"build_s\":", "\"cores\":"};
  int cases = 0, lost = 0, replayed = 0, replay_errors = 0;
  std::string path = std::string(TESSEL_TEST_TMP) + "/fuzz_log.json";
  for (int c = 0; c < 600; ++c, ++cases) {
    std::vector<std::string> out = lines;
    std::vector<int> origin;  // the line of `lines` each line comes from unchanged, or -1
    for (int i = 0; i < int(lines.size()); ++i) origin.push_back(i);
    int n = 1 + f.pick(4);
    for (int k = 0; k < n; ++k) {
      size_t i = size_t(f.pick(int(out.size())));
      std::string& l = out[i];
      origin[i] = -1;
      switch (f.pick(6)) {
        case 0: l = l.substr(0, size_t(f.pick(int(l.size()) + 1))); break;  // truncated
        case 1: {  // a field's value replaced
          const std::string& key = f.any(keys);
          size_t at = l.find(key);
          if (at == std::string::npos) break;
          at += key.size();
          size_t end = at;
          for (int depth = 0; end < l.size(); ++end) {
            char ch = l[end];
            if (ch == '[' || ch == '{') ++depth;
            if ((ch == ']' || ch == '}') && depth-- == 0) break;
            if (ch == ',' && depth == 0) break;
          }
          l = l.substr(0, at) + f.any(values) + l.substr(end);
          break;
        }
        case 2:  // a byte changed
          if (!l.empty()) l[size_t(f.pick(int(l.size())))] = char(f.pick(256));
          break;
        case 3: l = "\x01\x02 not json \xff"; break;
        case 4: {  // a split factor that no longer fits, or an axis that does not exist
          size_t at = l.find("[\"split\",\"C\",\"");
          size_t num = at == std::string::npos ? at : l.find("\",", at + 14);
          if (num == std::string::npos) break;
          size_t digits = l.find_first_not_of("0123456789", num + 2);
          if (f.coin(0.5)) l = l.substr(0, num) + "x" + l.substr(num);  // no such axis
          else if (digits != std::string::npos) l = l.substr(0, num + 2) + "0" + l.substr(digits);  // factor 0
          break;
        }
        default:  // an empty line inserted
          out.insert(out.begin() + long(i), "");
          origin.insert(origin.begin() + long(i), -1);
          break;
      }
    }
    std::string text;
    for (auto& l : out) text += l + "\n";
    // Every other case is written compressed, as the committed logs are.
    std::string file = c % 2 ? path + ".gz" : path;
    if (c % 2) {
      gzFile z = gzopen(file.c_str(), "wb");
      gzwrite(z, text.data(), unsigned(text.size()));
      gzclose(z);
    } else {
      std::ofstream(file) << text;
    }
    std::vector<std::string> warnings;
    std::vector<Record> recs = read_log(file, &warnings);
    std::multiset<std::string> loaded;
    for (auto& r : recs) loaded.insert(r.to_json());
    int want = 0, have = 0;
    for (int from : origin) {
      if (from < 0) continue;
      ++want;
      auto it = loaded.find(canon[size_t(from)]);
      if (it != loaded.end()) ++have, loaded.erase(it);
    }
    for (auto& r : recs) {
      // A record that loaded from a corrupted line: its steps replay or fail with a clear Error.
      if (r.workload_key != w.key() || std::find(canon.begin(), canon.end(), r.to_json()) != canon.end()) continue;
      try {
        Schedule::replay(w.outputs, r.steps);
        ++replayed;
      } catch (const Error&) {
        ++replay_errors;
      }
    }
    lost += want - have;
    EXPECT_EQ(have, want) << "case " << c << ": a valid record was lost";
  }
  std::printf("fuzz: %d corrupted logs loaded, %d valid records lost; %d loaded records replayed, %d refused with "
              "an Error\n",
              cases, lost, replayed, replay_errors);
}
