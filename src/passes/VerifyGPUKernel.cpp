// A kernel must fit the target's limits before it is compiled: NVRTC fails without a
// message on too much static shared memory, and PoCL runs work-groups and local memory far
// beyond any GPU's, so a schedule that passed there would fail on the device.
#include <map>

#include "ir/IRVisitor.h"
#include "passes/Passes.h"
#include "tessel/target.h"

namespace tessel {

std::vector<const Allocate*> shared_arrays(const Stmt& kernel_body) {
  std::map<const ExprNode*, const Allocate*> largest;
  visit_stmts(kernel_body, [&](const Stmt& s) {
    const Allocate* a = s.as<Allocate>();
    if (!a || a->scope != "shared") return;
    const Allocate*& l = largest[a->buffer.get()];
    if (!l || a->size > l->size) l = a;
  });
  std::vector<const Allocate*> out;
  for (auto& [buf, a] : largest) out.push_back(a);
  return out;
}

void verify_gpu_kernel(const DeviceKernel& k, const Target& t) {
  int64_t threads = k.block[0] * k.block[1] * k.block[2];
  TESSEL_USER_CHECK(threads <= t.max_threads_per_block, "kernel '", k.name, "' runs ", threads,
                    " threads per block (threadIdx.x/y/z = ", k.block[0], "x", k.block[1], "x", k.block[2], "); ",
                    t.key(), " allows at most ", t.max_threads_per_block,
                    ". Bind smaller extents to threadIdx (split the axis further)");
  const int64_t dim_limit[3] = {t.max_thread_x, t.max_thread_y, t.max_thread_z};
  const int64_t grid_limit[3] = {t.max_grid_x, t.max_grid_y, t.max_grid_z};
  const char* xyz = "xyz";
  for (int d = 0; d < 3; ++d) {
    TESSEL_USER_CHECK(k.block[d] <= dim_limit[d], "kernel '", k.name, "': threadIdx.", xyz[d], " extent ",
                      k.block[d], " is over ", t.key(), "'s limit of ", dim_limit[d]);
    TESSEL_USER_CHECK(k.grid[d] <= grid_limit[d], "kernel '", k.name, "': blockIdx.", xyz[d], " extent ", k.grid[d],
                      " is over ", t.key(), "'s limit of ", grid_limit[d], "; bind the larger axis to blockIdx.x");
  }
  int64_t shared = 0;
  for (const Allocate* a : shared_arrays(k.body)) shared += a->size * a->dtype.bytes();
  TESSEL_USER_CHECK(shared <= t.max_shared_memory_per_block, "kernel '", k.name, "' uses ", shared,
                    " bytes of shared memory per block; ", t.key(), " allows ", t.max_shared_memory_per_block,
                    " bytes of static shared memory. Use smaller tiles for the \"shared\" cache stages");
}

}  // namespace tessel
