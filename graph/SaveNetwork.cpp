// Network::save: the kernels linked into one shared library with the runtime, the weights as
// the kernels read them, and the plan that tessel::deploy::Network follows.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "graph/NetworkImpl.h"
#include "graph/Operators.h"
#include "src/driver/Paths.h"

namespace tessel::graph {

namespace {
void run_command(const std::string& cmd, const std::string& what) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  TESSEL_USER_CHECK(p, what, ": cannot run the linker");
  std::string out;
  char buf[256];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  TESSEL_USER_CHECK(pclose(p) == 0, what, " failed: ", out);
}
}  // namespace

void Network::save(const std::string& dir) const {
  namespace fs = std::filesystem;
  using nlohmann::json;
  const NetworkImpl& n = *impl_;
  const Graph& g = n.graph;
  TESSEL_USER_CHECK(!n.target.is_gpu(), "Network::save: only CPU networks can be saved (this one is for ",
                    n.target.str(), ")");
  for (const Step& s : n.steps)
    TESSEL_USER_CHECK(!s.vendor, "Network::save: kernel ", s.ops, " is ", s.vendor->name, "'s, which a saved network "
                      "cannot hold; compile with select = \"log\" to save");
  fs::create_directories(dir);
  // The kernels: one object per distinct code, linked with the runtime; only entries exported.
  std::set<int> codes;
  std::string objects, exports;
  for (const Step& s : n.steps) {
    if (!codes.insert(s.code).second) continue;
    std::string obj = dir + "/k" + std::to_string(s.code) + ".o";
    s.module.export_object(obj);
    objects += " '" + obj + "'";
    exports += " " + s.module.name() + ";";
  }
  std::string script = dir + "/network.exports";
  std::ofstream(script) << "{\n  global:" << exports << "\n  local: *;\n};\n";
  run_command("c++ -shared -Wl,-soname,network.so -o '" + dir + "/network.so'" + objects + " '" + runtime_archive() +
                  "' -Wl,--version-script='" + script + "' -Wl,-z,text -Wl,--as-needed -lpthread -lm",
              "Network::save: linking " + dir + "/network.so");
  for (int c : codes) fs::remove(dir + "/k" + std::to_string(c) + ".o");
  fs::remove(script);

  // Values: inputs, outputs, arena tensors and weights (each rewritten copy its own entry).
  json values = json::array(), steps = json::array();
  std::ofstream weights(dir + "/weights.bin", std::ios::binary);
  int64_t weight_bytes = 0;
  std::map<int, int> entry;  // graph value -> values[] index, for all but rewritten copies
  auto add = [&](const std::string& name, DType d, const std::vector<int64_t>& shape, const std::string& where,
                 int64_t offset) {
    values.push_back({{"name", name}, {"dtype", d.str()}, {"shape", shape}, {"where", where}, {"offset", offset}});
    return int(values.size()) - 1;
  };
  auto add_weight = [&](const std::string& name, const Buffer& b) {
    weight_bytes = (weight_bytes + 63) / 64 * 64;
    weights.seekp(weight_bytes);
    weights.write(static_cast<const char*>(b.raw()), b.bytes());
    int id = add(name, b.dtype(), b.shape(), "weights", weight_bytes);
    weight_bytes += b.bytes();
    return id;
  };
  auto value_entry = [&](int id) {
    auto it = entry.find(id);
    if (it != entry.end()) return it->second;
    const Value& v = g.values[size_t(id)];
    bool in = std::count(g.inputs.begin(), g.inputs.end(), id);
    bool out = std::count(g.outputs.begin(), g.outputs.end(), id);
    int e = v.is_constant() ? add_weight(v.name, v.constant)
            : in            ? add(v.name, v.dtype, v.shape, "input", 0)
            : out           ? add(v.name, v.dtype, v.shape, "output", 0)
                            : add(v.name, v.dtype, v.shape, "arena", n.arena_offset[size_t(id)]);
    return entry[id] = e;
  };
  json inputs = json::array(), outputs = json::array();
  for (int id : g.inputs) inputs.push_back(value_entry(id));
  for (int id : g.outputs) outputs.push_back(value_entry(id));
  for (const Step& s : n.steps) {
    // The kernel's own view of its weights: blocked copies where its schedule rewrote them.
    std::vector<Buffer> args;
    for (int id : s.inputs) {
      const Value& v = g.values[size_t(id)];
      args.push_back(n.values[size_t(id)].defined() ? n.values[size_t(id)] : Buffer(v.shape, v.dtype));
    }
    for (int id : s.outputs) args.push_back(n.values[size_t(id)]);
    std::vector<Buffer> seen = s.module.kernel_buffers(args);
    json ids = json::array();
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      int id = s.inputs[k];
      bool rewritten = g.values[size_t(id)].is_constant() && seen[k].raw() != args[k].raw();
      ids.push_back(rewritten ? add_weight(g.values[size_t(id)].name + "@" + s.module.name(), seen[k])
                              : value_entry(id));
    }
    for (int id : s.outputs) ids.push_back(value_entry(id));
    steps.push_back({{"entry", s.module.name()}, {"args", ids}});
  }
  json plan = {{"format", "tessel-network"}, {"version", 1}, {"target", n.target.str()}, {"target_key", n.target.key()},
               {"arena_bytes", n.plan.arena_bytes}, {"weights_bytes", weight_bytes}, {"values", values},
               {"inputs", inputs}, {"outputs", outputs}, {"steps", steps}};
  TESSEL_USER_CHECK(weights.good(), "Network::save: writing ", dir, "/weights.bin failed");
  std::ofstream(dir + "/plan.json") << plan.dump(1) << "\n";
}

}  // namespace tessel::graph
