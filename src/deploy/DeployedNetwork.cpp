// The deploy-time loader: a plan, a weights file and a shared library of kernels.
#include <dlfcn.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "tessel/deploy.h"
#include "tessel/error.h"

namespace tessel::deploy {

using Entry = int32_t (*)(void* const*);

class NetworkImpl {
 public:
  std::shared_ptr<void> library;
  Buffer weights, arena;
  std::vector<Buffer> values;
  std::vector<std::string> names;
  std::vector<int> inputs, outputs;
  struct Step {
    Entry entry;
    std::string name;
    std::vector<int> args;
  };
  std::vector<Step> steps;
};

Network Network::load(const std::string& dir) {
  using nlohmann::json;
  std::ifstream pf(dir + "/plan.json");
  TESSEL_USER_CHECK(pf, "deploy: no plan.json in '", dir, "' (write one with graph::Network::save)");
  json plan;
  try {
    plan = json::parse(pf);
  } catch (const json::exception& e) {
    throw Error("deploy: '" + dir + "/plan.json' is not valid JSON (" + e.what() + ")");
  }
  TESSEL_USER_CHECK(plan.value("format", "") == "tessel-network" && plan.value("version", 0) == 1, "deploy: '", dir,
                    "/plan.json' is not a version 1 Tessel network plan");
  auto impl = std::make_shared<NetworkImpl>();
  void* so = dlopen((dir + "/network.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  TESSEL_USER_CHECK(so, "deploy: cannot load '", dir, "/network.so': ", dlerror());
  impl->library = std::shared_ptr<void>(so, [](void* h) { dlclose(h); });
  try {
    int64_t weight_bytes = plan.at("weights_bytes");
    impl->weights = Buffer({std::max<int64_t>(weight_bytes, 1)}, uint8);
    std::ifstream wf(dir + "/weights.bin", std::ios::binary);
    TESSEL_USER_CHECK(wf, "deploy: cannot open '", dir, "/weights.bin'");
    wf.read(static_cast<char*>(impl->weights.raw()), weight_bytes);
    TESSEL_USER_CHECK(wf.gcount() == weight_bytes, "deploy: '", dir, "/weights.bin' holds ", wf.gcount(),
                      " bytes; the plan needs ", weight_bytes);
    impl->arena = Buffer({std::max<int64_t>(plan.at("arena_bytes").get<int64_t>(), 1)}, uint8);
    for (const json& v : plan.at("values")) {
      DType d = DType::parse(v.at("dtype"));
      std::vector<int64_t> shape = v.at("shape");
      std::string where = v.at("where");
      int64_t offset = v.at("offset");
      impl->names.push_back(v.at("name"));
      if (where == "weights") impl->values.push_back(Buffer::view(impl->weights, offset, shape, d));
      else if (where == "arena") impl->values.push_back(Buffer::view(impl->arena, offset, shape, d));
      else if (where == "output") impl->values.push_back(Buffer(shape, d));
      else impl->values.push_back(Buffer());  // an input, given to each run
    }
    impl->inputs = plan.at("inputs").get<std::vector<int>>();
    impl->outputs = plan.at("outputs").get<std::vector<int>>();
    for (const json& s : plan.at("steps")) {
      NetworkImpl::Step st;
      st.name = s.at("entry");
      st.entry = reinterpret_cast<Entry>(dlsym(so, st.name.c_str()));
      TESSEL_USER_CHECK(st.entry, "deploy: '", dir, "/network.so' has no kernel '", st.name, "'");
      st.args = s.at("args").get<std::vector<int>>();
      for (int a : st.args)
        TESSEL_USER_CHECK(a >= 0 && size_t(a) < impl->values.size(), "deploy: a step names value ", a);
      impl->steps.push_back(std::move(st));
    }
  } catch (const json::exception& e) {
    throw Error("deploy: '" + dir + "/plan.json' lacks a field or has a wrong one (" + e.what() + ")");
  }
  Network n;
  n.impl_ = impl;
  return n;
}

std::vector<Buffer> Network::run(const std::vector<Buffer>& inputs) const {
  TESSEL_USER_CHECK(impl_, "deploy: running a Network that was not loaded");
  TESSEL_USER_CHECK(inputs.size() == impl_->inputs.size(), "deploy: the network takes ", impl_->inputs.size(),
                    " inputs, ", inputs.size(), " were given");
  std::vector<Buffer>& v = impl_->values;
  for (size_t k = 0; k < inputs.size(); ++k) v[size_t(impl_->inputs[k])] = inputs[k];
  std::vector<void*> ptrs;
  for (const NetworkImpl::Step& s : impl_->steps) {
    ptrs.clear();
    for (int a : s.args) ptrs.push_back(v[size_t(a)].raw());
    TESSEL_USER_CHECK(s.entry(ptrs.data()) == 0, "deploy: kernel ", s.name, " failed");
  }
  std::vector<Buffer> out;
  for (int o : impl_->outputs) out.push_back(v[size_t(o)]);
  for (int i : impl_->inputs) v[size_t(i)] = Buffer();
  return out;
}

std::vector<std::string> Network::input_names() const {
  std::vector<std::string> out;
  for (int i : impl_->inputs) out.push_back(impl_->names[size_t(i)]);
  return out;
}

int64_t Network::arena_bytes() const { return impl_->arena.bytes(); }

}  // namespace tessel::deploy
