// Steps as JSON arrays (see step.h) and as C++ calls.
#include <nlohmann/json.hpp>

#include "tessel/error.h"
#include "tessel/step.h"

namespace tessel {
namespace {

using json = nlohmann::json;

struct KindName {
  Step::Kind kind;
  const char* name;
};
constexpr KindName kKinds[] = {
    {Step::Split, "split"},         {Step::SplitNParts, "split_nparts"}, {Step::Fuse, "fuse"},
    {Step::Reorder, "reorder"},     {Step::Vectorize, "vectorize"},      {Step::Unroll, "unroll"},
    {Step::Parallel, "parallel"},   {Step::Bind, "bind"},                {Step::Pragma, "pragma"},
    {Step::ComputeAt, "compute_at"}, {Step::ComputeInline, "compute_inline"},
    {Step::ComputeRoot, "compute_root"}, {Step::StorageAlign, "storage_align"},
    {Step::CacheRead, "cache_read"}, {Step::CacheWrite, "cache_write"}, {Step::RFactor, "rfactor"},
    {Step::Pack, "pack"}, {Step::RewriteLayout, "rewrite_layout"}, {Step::ReorderStorage, "reorder_storage"},
    {Step::Deinterleave, "deinterleave"}, {Step::Prefetch, "prefetch"}, {Step::Subsample, "subsample"},
};

const char* kind_name(Step::Kind k) {
  for (auto& kn : kKinds)
    if (kn.kind == k) return kn.name;
  return "?";
}

json to_j(const Step& s) {
  json j = json::array({kind_name(s.kind), s.stage});
  switch (s.kind) {
    case Step::Split:
    case Step::SplitNParts: j.push_back(s.axes.at(0)), j.push_back(s.ints.at(0)); break;
    case Step::Fuse:
    case Step::Reorder:
    case Step::ReorderStorage: j.push_back(s.axes); break;
    case Step::Vectorize:
    case Step::Unroll:
    case Step::Parallel:
    case Step::RFactor: j.push_back(s.axes.at(0)); break;
    case Step::Bind: j.push_back(s.axes.at(0)), j.push_back(s.str); break;
    case Step::Pragma:
    case Step::Prefetch: j.push_back(s.axes.at(0)), j.push_back(s.str), j.push_back(s.ints.at(0)); break;
    case Step::ComputeAt: j.push_back(s.str), j.push_back(s.axes.at(0)); break;
    case Step::ComputeInline:
    case Step::ComputeRoot: break;
    case Step::StorageAlign: j.push_back(s.axes.at(0)), j.push_back(s.ints.at(0)), j.push_back(s.ints.at(1)); break;
    case Step::CacheRead: j.push_back(s.str), j.push_back(s.stages); break;
    case Step::CacheWrite: j.push_back(s.str); break;
    case Step::Pack:
    case Step::Deinterleave:
    case Step::Subsample:
      j.push_back(s.stages), j.push_back(s.ints.at(0)), j.push_back(s.ints.at(1));
      if (s.ints.size() > 2) j.push_back(s.ints[2]);  // pack's flattened dimensions, where more than one
      break;
    case Step::RewriteLayout: j.push_back(s.ints.at(0)), j.push_back(s.ints.at(1)); break;
  }
  return j;
}

Step from_j(const json& j) {
  auto bad = [&](const std::string& why) {
    return Error("bad schedule step " + j.dump() + ": " + why);
  };
  if (!j.is_array() || j.size() < 2 || !j[0].is_string() || !j[1].is_string())
    throw bad("expected an array [\"kind\", \"stage\", ...]");
  Step s;
  std::string kind = j[0];
  bool found = false;
  for (auto& kn : kKinds)
    if (kind == kn.name) s.kind = kn.kind, found = true;
  if (!found) {
    std::string known;
    for (auto& kn : kKinds) known += (known.empty() ? "" : ", ") + std::string(kn.name);
    throw bad("unknown step kind '" + kind + "'; known kinds: " + known);
  }
  s.stage = j[1];
  auto need = [&](size_t n) {
    if (j.size() != n) throw bad("a " + kind + " step has " + std::to_string(n) + " elements");
  };
  auto str = [&](size_t i) -> std::string {
    if (!j[i].is_string()) throw bad("element " + std::to_string(i) + " must be a string");
    return j[i];
  };
  auto num = [&](size_t i) -> int64_t {
    if (!j[i].is_number_integer()) throw bad("element " + std::to_string(i) + " must be an integer");
    return j[i];
  };
  auto strs = [&](size_t i) {
    if (!j[i].is_array()) throw bad("element " + std::to_string(i) + " must be an array of names");
    std::vector<std::string> v;
    for (auto& x : j[i]) {
      if (!x.is_string()) throw bad("element " + std::to_string(i) + " must be an array of names");
      v.push_back(x);
    }
    return v;
  };
  switch (s.kind) {
    case Step::Split:
    case Step::SplitNParts: need(4), s.axes = {str(2)}, s.ints = {num(3)}; break;
    case Step::Fuse:
    case Step::Reorder:
    case Step::ReorderStorage: need(3), s.axes = strs(2); break;
    case Step::Vectorize:
    case Step::Unroll:
    case Step::Parallel:
    case Step::RFactor: need(3), s.axes = {str(2)}; break;
    case Step::Bind: need(4), s.axes = {str(2)}, s.str = str(3); break;
    case Step::Pragma:
    case Step::Prefetch: need(5), s.axes = {str(2)}, s.str = str(3), s.ints = {num(4)}; break;
    case Step::ComputeAt: need(4), s.str = str(2), s.axes = {str(3)}; break;
    case Step::ComputeInline:
    case Step::ComputeRoot: need(2); break;
    case Step::StorageAlign: need(5), s.axes = {str(2)}, s.ints = {num(3), num(4)}; break;
    case Step::CacheRead: need(4), s.str = str(2), s.stages = strs(3); break;
    case Step::CacheWrite: need(3), s.str = str(2); break;
    case Step::Pack:  // [.., dim, block] or [.., dim, block, dims]
      if (j.size() != 5 && j.size() != 6) throw bad("a pack step has 5 or 6 elements");
      s.stages = strs(2), s.ints = {num(3), num(4)};
      if (j.size() == 6) s.ints.push_back(num(5));
      break;
    case Step::Deinterleave:
    case Step::Subsample: need(5), s.stages = strs(2), s.ints = {num(3), num(4)}; break;
    case Step::RewriteLayout: need(4), s.ints = {num(2), num(3)}; break;
  }
  return s;
}

std::string quote(const std::string& s) { return json(s).dump(); }

std::string quoted_list(const std::vector<std::string>& v) {
  std::string out = "{";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + quote(v[i]);
  return out + "}";
}

}  // namespace

std::string Step::to_json() const { return to_j(*this).dump(); }

Step Step::from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error("schedule step is not valid JSON (" + std::string(e.what()) + "): " + text);
  }
  return from_j(j);
}

bool Step::operator==(const Step& o) const {
  return kind == o.kind && stage == o.stage && axes == o.axes && ints == o.ints && str == o.str && stages == o.stages;
}

std::string Step::to_cpp(const std::string& v) const {
  std::string s = v + "[" + quote(stage) + "]";
  switch (kind) {
    case Split: return s + ".split(" + quote(axes[0]) + ", " + std::to_string(ints[0]) + ");";
    case SplitNParts: return s + ".split_nparts(" + quote(axes[0]) + ", " + std::to_string(ints[0]) + ");";
    case Fuse: return s + ".fuse(" + quoted_list(axes) + ");";
    case Reorder: return s + ".reorder(" + quoted_list(axes) + ");";
    case ReorderStorage: return s + ".reorder_storage(" + quoted_list(axes) + ");";
    case Vectorize: return s + ".vectorize(" + quote(axes[0]) + ");";
    case Unroll: return s + ".unroll(" + quote(axes[0]) + ");";
    case Parallel: return s + ".parallel(" + quote(axes[0]) + ");";
    case Bind: return s + ".bind(" + quote(axes[0]) + ", " + quote(str) + ");";
    case Pragma: return s + ".pragma(" + quote(axes[0]) + ", " + quote(str) + ", " + std::to_string(ints[0]) + ");";
    case Prefetch:
      return s + ".prefetch(" + v + ".tensor(" + quote(str) + "), " + quote(axes[0]) + ", " + std::to_string(ints[0]) +
             ");";
    case ComputeAt: return s + ".compute_at(" + v + "[" + quote(str) + "], " + quote(axes[0]) + ");";
    case ComputeInline: return s + ".compute_inline();";
    case ComputeRoot: return s + ".compute_root();";
    case StorageAlign:
      return s + ".storage_align(" + quote(axes[0]) + ", " + std::to_string(ints[0]) + ", " + std::to_string(ints[1]) + ");";
    case CacheRead: {
      std::string readers = "{";
      for (size_t i = 0; i < stages.size(); ++i) readers += (i ? ", " : "") + v + ".tensor(" + quote(stages[i]) + ")";
      return v + ".cache_read(" + v + ".tensor(" + quote(stage) + "), " + quote(str) + ", " + readers + "});";
    }
    case Pack:
    case Deinterleave:
    case Subsample: {
      std::string readers = "{";
      for (size_t i = 0; i < stages.size(); ++i) readers += (i ? ", " : "") + v + ".tensor(" + quote(stages[i]) + ")";
      return v + "." + kind_name(kind) + "(" + v + ".tensor(" + quote(stage) + "), " + readers +
             "}, " + std::to_string(ints[0]) + ", " + std::to_string(ints[1]) +
             (ints.size() > 2 ? ", " + std::to_string(ints[2]) : "") + ");";
    }
    case RewriteLayout:
      return v + ".rewrite_layout(" + v + ".tensor(" + quote(stage) + "), " + std::to_string(ints[0]) + ", " +
             std::to_string(ints[1]) + ");";
    case CacheWrite: return v + ".cache_write(" + v + ".tensor(" + quote(stage) + "), " + quote(str) + ");";
    case RFactor: return v + ".rfactor(" + v + ".tensor(" + quote(stage) + "), " + quote(axes[0]) + ");";
  }
  return "";
}

std::string steps_to_json(const std::vector<Step>& steps) {
  json j = json::array();
  for (auto& s : steps) j.push_back(to_j(s));
  return j.dump();
}

std::vector<Step> steps_from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error("schedule steps are not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!j.is_array()) throw Error("schedule steps must be a JSON array of steps");
  std::vector<Step> out;
  for (auto& x : j) out.push_back(from_j(x));
  return out;
}

}  // namespace tessel
