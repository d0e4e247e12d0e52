// A deploy-time program: links libtessel_deploy only (no compiler), loads a saved network,
// runs it on a raw float32 input file and writes the first output's raw data.
//   deploy_run DIR INPUT.bin OUTPUT.bin
#include <cstdio>
#include <fstream>

#include "tessel/deploy.h"
#include "tessel/error.h"

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  try {
    tessel::deploy::Network net = tessel::deploy::Network::load(argv[1]);
    std::ifstream in(argv[2], std::ios::binary);
    std::vector<int64_t> shape;
    int64_t rank = 0, d = 0;
    in.read(reinterpret_cast<char*>(&rank), 8);
    for (int64_t k = 0; k < rank; ++k) in.read(reinterpret_cast<char*>(&d), 8), shape.push_back(d);
    tessel::Buffer x(shape, tessel::float32);
    in.read(static_cast<char*>(x.raw()), x.bytes());
    std::vector<tessel::Buffer> y = net.run({x});
    std::ofstream(argv[3], std::ios::binary).write(static_cast<const char*>(y[0].raw()), y[0].bytes());
    std::printf("deploy_run: %s ran, arena %lld bytes\n", argv[1], static_cast<long long>(net.arena_bytes()));
  } catch (const tessel::Error& e) {
    std::fprintf(stderr, "deploy_run: %s\n", e.what());
    return 1;
  }
  return 0;
}
