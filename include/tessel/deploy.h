#pragma once
// Running a saved network (graph::Network::save) without the compiler: libtessel_deploy
// loads its kernels (network.so), its weights and its plan, and links neither LLVM nor ONNX.
//
//   tessel::deploy::Network net = tessel::deploy::Network::load("model/");
//   std::vector<tessel::Buffer> y = net.run({x});
#include <memory>
#include <string>
#include <vector>

#include "tessel/buffer.h"

namespace tessel::deploy {

class NetworkImpl;

class Network {
 public:
  Network() = default;
  // An Error names what is missing or malformed in `dir`.
  static Network load(const std::string& dir);
  // One Buffer per input, in order; the outputs are the network's own buffers, overwritten
  // by the next run. One run at a time.
  std::vector<Buffer> run(const std::vector<Buffer>& inputs) const;
  std::vector<std::string> input_names() const;
  int64_t arena_bytes() const;

 private:
  std::shared_ptr<NetworkImpl> impl_;
};

}  // namespace tessel::deploy
