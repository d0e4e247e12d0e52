// A custom kernel in Tessel's DSL: a 3x3 box blur of a 1024x1024 image. It is tuned once
// (the log is kept, so later runs only load it), rebuilt from the log as deploy code does,
// checked against plain loops, and exported as a shared library with a C header.
//   blur_kernel OUT_DIR LOG [TRIALS]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <tessel/autotune.h>
#include <tessel/tessel.h>

using namespace tessel;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: blur_kernel OUT_DIR LOG [TRIALS]\n");
    return 2;
  }
  std::string out = argv[1], log = argv[2];
  int trials = argc > 3 ? std::atoi(argv[3]) : 16;
  const int64_t H = 1024, W = 1024;
  Tensor In = placeholder({H, W}, float32, "In");
  Tensor Out = compute({H - 2, W - 2}, [&](Var y, Var x) {
    Expr s = In(y, x);
    for (int dy = 0; dy < 3; ++dy)
      for (int dx = 0; dx < 3; ++dx)
        if (dy || dx) s = s + In(y + dy, x + dx);
    return s * (1.0f / 9);
  }, "Out");
  autotune::Workload w = autotune::custom_workload("blur3x3", {In}, {Out}, 9.0 * (H - 2) * (W - 2));

  try {
    if (!std::filesystem::exists(log) && trials > 0) {
      autotune::TuneOptions o;
      o.trials = trials;
      o.log = log;
      autotune::TaskResult r = autotune::tune(w, o);
      std::printf("tuned %d trials: %.1f GFLOP/s (default schedule %.1f)\n", r.trials, r.best_gflops,
                  r.default_gflops);
    }
    bool found = false;
    Module m = autotune::build_best(log, w, Target::host(), &found);
    std::printf("kernel from %s\n", found ? log.c_str() : "the default schedule (no record in the log)");

    Buffer in({H, W}, float32), res({H - 2, W - 2}, float32);
    in.fill_random(1);
    m({in, res});
    const float* a = in.data<float>();
    double err = 0;
    for (int64_t y = 0; y < H - 2; ++y)
      for (int64_t x = 0; x < W - 2; ++x) {
        double s = 0;
        for (int dy = 0; dy < 3; ++dy)
          for (int dx = 0; dx < 3; ++dx) s += a[(y + dy) * W + x + dx];
        err = std::max(err, std::abs(s / 9 - res.get(y * (W - 2) + x)));
      }
    std::printf("max error against plain loops: %.2g\n", err);
    if (err > 1e-5) return 1;
    m.export_library(out + "/libblur3x3.so", out + "/blur3x3.h");
    std::printf("exported %s/libblur3x3.so and %s/blur3x3.h\n", out.c_str(), out.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "blur_kernel: %s\n", e.what());
    return 1;
  }
  return 0;
}
