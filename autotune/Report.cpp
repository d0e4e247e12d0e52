// The tuning report: one self-contained HTML page (inline SVG, no scripts, nothing fetched)
// drawn from tuning logs. Per workload: the best speed against trials and against tuning
// time with every measured candidate as a point, the default schedule (and a vendor
// library, when given) as horizontal lines, errors by kind, and how the cost model's
// predicted order of each round compares with the measured one.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "autotune/Records.h"

namespace tessel::autotune {
namespace {

// Gaps longer than this between two records are separate runs (a resume days later): the
// tuning-time axis leaves them out.
constexpr double kRunGapSeconds = 120;

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

std::string num(double v, int digits = 1) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

// A "nice" tick step for a range: 1, 2 or 5 times a power of ten, about `ticks` of them.
double tick_step(double range, int ticks) {
  double raw = range / std::max(1, ticks);
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

// One x-y chart as SVG: axes with ticks, points, step lines and labelled horizontal lines.
class Chart {
 public:
  Chart(std::string title, std::string xlabel, std::string ylabel, double xmax, double ymax)
      : title_(std::move(title)), xl_(std::move(xlabel)), yl_(std::move(ylabel)), xmax_(std::max(xmax, 1e-9)),
        ymax_(std::max(ymax, 1e-9) * 1.08) {}
  void points(const std::vector<std::pair<double, double>>& pts, const std::string& color) {
    for (auto& [x, y] : pts)
      body_ << "<circle cx='" << num(px(x)) << "' cy='" << num(py(y)) << "' r='2.2' fill='" << color
            << "' fill-opacity='0.35'/>";
  }
  void steps(const std::vector<std::pair<double, double>>& pts, const std::string& color) {
    if (pts.empty()) return;
    body_ << "<polyline fill='none' stroke='" << color << "' stroke-width='2' points='";
    for (size_t i = 0; i < pts.size(); ++i) {
      if (i) body_ << num(px(pts[i].first)) << "," << num(py(pts[i - 1].second)) << " ";
      body_ << num(px(pts[i].first)) << "," << num(py(pts[i].second)) << " ";
    }
    body_ << "'/>";
  }
  void hline(double y, const std::string& label, const std::string& color) {
    body_ << "<line x1='" << kLeft << "' x2='" << kLeft + kW << "' y1='" << num(py(y)) << "' y2='" << num(py(y))
          << "' stroke='" << color << "' stroke-dasharray='6 4' stroke-width='1.5'/>"
          << "<text x='" << kLeft + kW - 4 << "' y='" << num(py(y) - 4) << "' text-anchor='end' fill='" << color
          << "' font-size='11'>" << esc(label) << "</text>";
  }
  std::string svg() const {
    std::stringstream s;
    s << "<svg width='" << kLeft + kW + 20 << "' height='" << kTop + kH + 46
      << "' font-family='sans-serif' font-size='11'>";
    s << "<text x='" << kLeft << "' y='16' font-size='13' font-weight='bold'>" << esc(title_) << "</text>";
    s << "<rect x='" << kLeft << "' y='" << kTop << "' width='" << kW << "' height='" << kH
      << "' fill='#fafafa' stroke='#999'/>";
    double xs = tick_step(xmax_, 6), ys = tick_step(ymax_, 5);
    for (double x = 0; x <= xmax_ + 1e-9; x += xs)
      s << "<line x1='" << num(px(x)) << "' x2='" << num(px(x)) << "' y1='" << kTop + kH << "' y2='" << kTop + kH + 4
        << "' stroke='#666'/><text x='" << num(px(x)) << "' y='" << kTop + kH + 16 << "' text-anchor='middle'>"
        << num(x, xs < 1 ? 1 : 0) << "</text>";
    for (double y = 0; y <= ymax_ + 1e-9; y += ys)
      s << "<line x1='" << kLeft << "' x2='" << kLeft + kW << "' y1='" << num(py(y)) << "' y2='" << num(py(y))
        << "' stroke='#e4e4e4'/><text x='" << kLeft - 6 << "' y='" << num(py(y) + 4) << "' text-anchor='end'>"
        << num(y, ys < 1 ? 1 : 0) << "</text>";
    s << body_.str();
    s << "<text x='" << kLeft + kW / 2 << "' y='" << kTop + kH + 36 << "' text-anchor='middle'>" << esc(xl_)
      << "</text><text transform='translate(14," << kTop + kH / 2 << ") rotate(-90)' text-anchor='middle'>"
      << esc(yl_) << "</text></svg>";
    return s.str();
  }

 private:
  static constexpr int kLeft = 56, kTop = 26, kW = 420, kH = 220;
  double px(double x) const { return kLeft + kW * std::clamp(x / xmax_, 0.0, 1.0); }
  double py(double y) const { return kTop + kH * (1 - std::clamp(y / ymax_, 0.0, 1.0)); }
  std::string title_, xl_, yl_;
  double xmax_, ymax_;
  std::stringstream body_;
};

// Spearman's rank correlation of two equally long lists (no ties assumed: ranks by order).
std::vector<int> ranks(const std::vector<double>& v) {
  std::vector<int> idx(v.size()), r(v.size());
  for (size_t i = 0; i < v.size(); ++i) idx[i] = int(i);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return v[size_t(a)] > v[size_t(b)]; });
  for (size_t k = 0; k < idx.size(); ++k) r[size_t(idx[k])] = int(k);
  return r;
}

// What the report knows of one workload's records.
struct Task {
  std::string key, target;
  double flops = 0;
  std::vector<const Record*> search;  // the search's candidates, in log order
  const Record* dflt = nullptr;       // the default schedule's first measurement
  std::map<std::string, int> errors;  // by kind
  double elapsed = 0;                 // tuning time spent on it (run gaps left out)
  std::vector<double> at;             // tuning time of the run at each search record
};

double speed(const Task& t, double seconds) {
  return !std::isfinite(seconds) || seconds <= 0 ? 0 : t.flops > 0 ? t.flops / seconds / 1e9 : 1 / seconds;
}

// The cost model against the measurements: for each round with predictions, the predicted
// rank (x) and measured rank (y) of each candidate, as a grid of counts; and the mean of the
// rounds' Spearman correlations.
std::string rank_grid(const Task& t) {
  // A round's records are written together; round numbers restart with each run of a
  // resumed log, so a round is a run of consecutive records with one number.
  std::vector<std::vector<const Record*>> rounds;
  int last = -1;
  for (const Record* r : t.search) {
    if (r->round < 0 || !std::isfinite(r->predicted)) {
      last = -1;
      continue;
    }
    if (rounds.empty() || r->round != last) rounds.emplace_back();
    rounds.back().push_back(r);
    last = r->round;
  }
  int n = 0;
  for (auto& rs : rounds) n = std::max(n, int(rs.size()));
  if (rounds.empty() || n < 2)
    return "<p class='note'>No predictions in this log: it was written by random search, before the model was "
           "first trained, or by a Tessel older than this report.</p>";
  std::vector<std::vector<int>> count(size_t(n), std::vector<int>(size_t(n), 0));
  double rho_sum = 0;
  int rho_n = 0;
  for (auto& rs : rounds) {
    if (rs.size() < 2) continue;
    std::vector<double> pred, meas;
    for (const Record* r : rs) pred.push_back(r->predicted), meas.push_back(-r->mean_cost());
    std::vector<int> rp = ranks(pred), rm = ranks(meas);
    double d2 = 0, m = double(rs.size());
    for (size_t i = 0; i < rs.size(); ++i) {
      ++count[size_t(rp[i])][size_t(rm[i])];
      d2 += double(rp[i] - rm[i]) * double(rp[i] - rm[i]);
    }
    rho_sum += 1 - 6 * d2 / (m * (m * m - 1));
    ++rho_n;
  }
  int most = 1;
  for (auto& row : count)
    for (int c : row) most = std::max(most, c);
  const int cell = std::max(8, 240 / n), left = 56, top = 26;
  std::stringstream s;
  s << "<svg width='" << left + n * cell + 20 << "' height='" << top + n * cell + 46
    << "' font-family='sans-serif' font-size='11'><text x='" << left
    << "' y='16' font-size='13' font-weight='bold'>Predicted against measured rank in each round</text>";
  for (int x = 0; x < n; ++x)
    for (int y = 0; y < n; ++y)
      s << "<rect x='" << left + x * cell << "' y='" << top + y * cell << "' width='" << cell << "' height='" << cell
        << "' fill='#1f6fb4' fill-opacity='" << num(double(count[size_t(x)][size_t(y)]) / most, 2)
        << "' stroke='#eee'/>";
  s << "<text x='" << left + n * cell / 2 << "' y='" << top + n * cell + 16
    << "' text-anchor='middle'>predicted rank (0 = predicted fastest)</text><text transform='translate(" << left - 8
    << "," << top + n * cell / 2 << ") rotate(-90)' text-anchor='middle'>measured rank</text>"
    << "<text x='" << left << "' y='" << top + n * cell + 34 << "'>" << rho_n
    << " rounds; mean Spearman correlation " << num(rho_sum / std::max(1, rho_n), 2)
    << " (1: the model orders each round exactly as measured)</text></svg>";
  return s.str();
}

std::string error_bars(const Task& t) {
  if (t.errors.empty()) return "<p class='note'>No errors.</p>";
  int most = 1;
  for (auto& [k, c] : t.errors) most = std::max(most, c);
  std::stringstream s;
  int h = 22 * int(t.errors.size()) + 30;
  s << "<svg width='420' height='" << h
    << "' font-family='sans-serif' font-size='11'><text x='0' y='16' font-size='13' font-weight='bold'>Errors by "
       "kind</text>";
  int y = 28;
  for (auto& [kind, c] : t.errors) {
    double bar = 220.0 * c / most;
    s << "<text x='130' y='" << y + 12 << "' text-anchor='end'>" << esc(kind) << "</text><rect x='136' y='" << y
      << "' height='16' width='" << num(bar) << "' fill='#c0392b'/><text x='" << num(140 + bar) << "' y='" << y + 12
      << "'>" << c << "</text>";
    y += 22;
  }
  s << "</svg>";
  return s.str();
}

}  // namespace

void write_report(const std::vector<std::string>& logs, const std::string& html_path, const ReportOptions& opts) {
  std::vector<Record> all;
  std::vector<std::string> warnings;
  for (auto& log : logs) {
    std::vector<Record> rs = read_log(log, &warnings);
    TESSEL_USER_CHECK(!rs.empty(), "report: '", log, "' has no tuning records (a missing or empty log?)");
    for (auto& r : rs) all.push_back(std::move(r));
  }
  // Workloads in the order they first appear. Tuning time runs over all the records of one
  // target (a merged log holds several machines' runs, interleaved).
  std::vector<Task> tasks;
  std::map<std::string, size_t> index;
  std::map<std::string, std::pair<double, int64_t>> clocks;  // by target: (tuning time, last timestamp)
  for (const Record& r : all) {
    auto& [clock, last] = clocks.emplace(r.target_key, std::make_pair(0.0, r.timestamp)).first->second;
    double step = double(r.timestamp - last);
    clock += step >= 0 && step <= kRunGapSeconds ? step : 0;
    last = r.timestamp;
    std::string key = r.workload_key + " on " + r.target_key;
    auto [it, fresh] = index.emplace(key, tasks.size());
    if (fresh) {
      Task t;
      t.key = r.workload_key;
      t.target = r.target_key;
      t.flops = r.flops;
      if (t.flops <= 0) {
        try {
          t.flops = make_workload(r.op, r.shape, DType::parse(r.dtype)).flops;
        } catch (const Error&) {  // a custom workload from an older log: no flop count
        }
      }
      tasks.push_back(t);
    }
    Task& t = tasks[it->second];
    if (r.message == kDefaultScheduleMessage) {
      if (!t.dflt) t.dflt = &r;
      continue;
    }
    if (r.message == kRemeasuredMessage) continue;
    if (r.error == ErrorCode::Invalid) continue;  // never run, never a trial
    t.search.push_back(&r);
    t.at.push_back(clock);
    if (!r.ok()) ++t.errors[error_name(r.error)];
  }

  std::ofstream out(html_path);
  TESSEL_USER_CHECK(out, "report: cannot write '", html_path, "'");
  out << "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Tessel tuning report</title><style>"
         "body{font-family:sans-serif;margin:24px;color:#222;max-width:1500px}"
         "table{border-collapse:collapse;font-size:13px}td,th{border-bottom:1px solid #ddd;padding:4px 8px;"
         "text-align:right}th{background:#f0f0f0}td:first-child,th:first-child{text-align:left}"
         "section{margin:28px 0;padding-top:8px;border-top:2px solid #ccc}.row{display:flex;flex-wrap:wrap;gap:18px}"
         ".note{color:#666;font-size:13px}.key{font-family:monospace;font-size:13px}"
         "</style></head><body><h1>Tessel tuning report</h1>";
  out << "<p class='note'>Logs: ";
  for (size_t i = 0; i < logs.size(); ++i) out << (i ? ", " : "") << esc(logs[i]);
  out << ". " << all.size() << " records, " << tasks.size() << " workloads. Speeds are measured (never estimated) "
      << "unless a record says so; a point is one candidate's mean time; the line is the best so far. Tuning time "
      << "leaves out gaps of more than " << int(kRunGapSeconds) << " s between records (separate runs).</p>";
  for (auto& w : warnings) out << "<p class='note'>Skipped: " << esc(w) << "</p>";

  // The budget table (a many-task run's share per task).
  size_t trials = 0;
  for (auto& t : tasks) trials += t.search.size();
  out << "<h2>Tasks</h2><table><tr><th>workload</th><th>target</th><th>trials</th><th>share of budget</th>"
         "<th>errors</th><th>default</th><th>best</th><th>speed-up</th><th>vendor</th></tr>";
  for (auto& t : tasks) {
    double best = 0;
    int errs = 0;
    for (const Record* r : t.search) best = std::max(best, speed(t, r->mean_cost()));
    for (auto& [k, c] : t.errors) errs += c;
    double d = t.dflt ? speed(t, t.dflt->mean_cost()) : 0;
    auto v = opts.vendor.find(t.key);
    out << "<tr><td class='key'>" << esc(t.key) << "</td><td>" << esc(t.target) << "</td><td>" << t.search.size()
        << "</td><td>" << num(100.0 * double(t.search.size()) / double(std::max<size_t>(1, trials))) << "%</td><td>"
        << errs << "</td><td>" << (d > 0 ? num(d) : "-") << "</td><td>" << num(best) << "</td><td>"
        << (d > 0 ? num(best / d, 2) + "x" : "-") << "</td><td>"
        << (v != opts.vendor.end() ? esc(v->second.first) + " " + num(v->second.second) : "-") << "</td></tr>";
  }
  out << "</table><p class='note'>Speeds in " << "GFLOP/s (runs per second where a log gives no flop count).</p>";

  for (auto& t : tasks) {
    const char* unit = t.flops > 0 ? "GFLOP/s" : "runs/s";
    std::vector<std::pair<double, double>> pts, best_by_trial, pts_time, best_by_time;
    double best = 0, ymax = 0;
    for (size_t i = 0; i < t.search.size(); ++i) {
      double v = speed(t, t.search[i]->mean_cost());
      if (v > 0) pts.emplace_back(double(i + 1), v), pts_time.emplace_back(t.at[i] / 60, v);
      if (v > best || i + 1 == t.search.size()) {
        best = std::max(best, v);
        best_by_trial.emplace_back(double(i + 1), best);
        best_by_time.emplace_back(t.at[i] / 60, best);
      }
      ymax = std::max(ymax, v);
    }
    double d = t.dflt ? speed(t, t.dflt->mean_cost()) : 0;
    auto v = opts.vendor.find(t.key);
    if (v != opts.vendor.end()) ymax = std::max(ymax, v->second.second);
    ymax = std::max(ymax, d);
    auto draw = [&](Chart& c, auto& p, auto& b) {
      c.points(p, "#1f6fb4");
      c.steps(b, "#0b3d6b");
      if (d > 0) c.hline(d, "default schedule " + num(d), "#888");
      if (v != opts.vendor.end()) c.hline(v->second.second, v->second.first + " " + num(v->second.second), "#d35400");
    };
    Chart by_trial("Best " + std::string(unit) + " against trials", "trials", unit, double(t.search.size()), ymax);
    draw(by_trial, pts, best_by_trial);
    double minutes = t.at.empty() ? 0 : t.at.back() / 60;
    Chart by_time("Best " + std::string(unit) + " against tuning time", "minutes into the tuning on this target", unit,
                  std::max(minutes, 0.1), ymax);
    draw(by_time, pts_time, best_by_time);
    out << "<section><h2 class='key'>" << esc(t.key) << "</h2><p class='note'>" << esc(t.target) << "; "
        << t.search.size() << " trials; best " << num(best) << " " << unit;
    if (d > 0) out << ", default schedule " << num(d) << " (" << num(best / d, 2) << "x)";
    out << ".</p><div class='row'>" << by_trial.svg() << by_time.svg() << "</div><div class='row'>" << error_bars(t)
        << rank_grid(t) << "</div></section>";
  }
  out << "</body></html>\n";
  TESSEL_USER_CHECK(out.good(), "report: writing '", html_path, "' failed");
}

}  // namespace tessel::autotune
