#include "autotune/Features.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "ir/IRMutator.h"
#include "ir/IRVisitor.h"
#include "ir/Simplify.h"

namespace tessel::autotune {
namespace {

struct Loop {
  const VarNode* var;
  int64_t extent;
  ForKind kind;
  bool unrolled;  // becomes copies of its body once unroll_loops runs
};

struct Access {
  const VarNode* buffer;
  Expr index;
  int lanes;
  int bytes;
  bool write;
};

// Operation counts of one store's value (and index arithmetic).
struct OpCount {
  double add = 0, mul = 0, fma = 0, div = 0, math = 0, cmp = 0, intops = 0, loads = 0;
  std::vector<Access> reads;
};

void count(const Expr& e, OpCount& c) {
  visit_exprs(e, [&](const Expr& x) {
    const ExprNode* n = x.get();
    double lanes = n->type.lanes;
    bool f = n->type.is_float();
    switch (n->kind) {
      case NodeKind::Add:
      case NodeKind::Sub: {
        (f ? c.add : c.intops) += lanes;
        auto* b = static_cast<const BinaryNode*>(n);
        if (f && (b->a.as<Mul>() || b->b.as<Mul>())) c.fma += lanes;
        break;
      }
      case NodeKind::Mul: (f ? c.mul : c.intops) += lanes; break;
      case NodeKind::Div:
      case NodeKind::Mod: (f ? c.div : c.intops) += lanes; break;
      case NodeKind::Min:
      case NodeKind::Max:
      case NodeKind::EQ:
      case NodeKind::NE:
      case NodeKind::LT:
      case NodeKind::LE:
      case NodeKind::GT:
      case NodeKind::GE:
      case NodeKind::Select: c.cmp += lanes; break;
      case NodeKind::Call: {
        Intrinsic op = static_cast<const Call*>(n)->op;
        if (op == Intrinsic::ThreadIndex) c.intops += lanes;
        else if (op != Intrinsic::Skippable) c.math += lanes;  // a skippable guard is gone after lowering
        break;
      }
      case NodeKind::Load: {
        auto* l = static_cast<const Load*>(n);
        c.loads += 1;
        c.reads.push_back({l->buffer.var_node(), l->index, n->type.lanes, n->type.element_of().bytes(), false});
        break;
      }
      default: break;
    }
  });
}

float log2p(double x) { return float(x >= 0 ? std::log2(1 + x) : -std::log2(1 - x)); }

class Extractor : public IRVisitor {
 public:
  std::vector<std::vector<float>> rows;
  std::vector<double> trips;  // of a row's store and its unrolled copies together
  std::vector<double> copy_counts;  // of each row's store, by unrolling
  double stores = 0;                // rows with their unrolled copies
  int parallel_loops = 0;

  using IRVisitor::visit;

 protected:
  std::vector<Loop> loops_;
  std::map<const VarNode*, int64_t> scratch_;  // allocated buffers and their bytes
  int64_t scratch_bytes_ = 0;
  int64_t max_step_ = 0;  // the enclosing auto_unroll_max_step

  // A program lowered up to unrolling (lower_for_features) describes the code after it: a
  // loop that unroll_loops would unroll counts as its copies, not as a loop.
  void visit_node(const AttrStmt* op, const Stmt& s) override {
    if (op->key != "auto_unroll_max_step") return IRVisitor::visit_node(op, s);
    int64_t saved = max_step_;
    max_step_ = op->value;
    IRVisitor::visit_node(op, s);
    max_step_ = saved;
  }
  void visit_node(const For* op, const Stmt& s) override {
    int64_t ext = 1;
    if (!is_const_int(op->extent, &ext)) ext = 16;
    if (op->for_kind == ForKind::Parallel) ++parallel_loops;
    UnrolledSize body = unrolled_size(op->body, max_step_);
    bool unrolled = unrolls(op, max_step_, body);
    loops_.push_back({op->var.var_node(), ext, op->for_kind, unrolled});
    // Statements in this loop's body once unrolled (straight-line code).
    if (!unrolled) body_stores_.push_back(int(body.stmts));
    IRVisitor::visit_node(op, s);
    if (!unrolled) body_stores_.pop_back();
    loops_.pop_back();
  }
  void visit_node(const Allocate* op, const Stmt& s) override {
    int64_t b = op->size * op->dtype.bytes();
    scratch_[op->buffer.var_node()] = b;
    scratch_bytes_ += b;
    IRVisitor::visit_node(op, s);
    scratch_bytes_ -= b;
  }
  void visit_node(const Store* op, const Stmt& s) override {
    OpCount c;
    count(op->value, c);
    count(op->index, c);
    DType t = op->value.dtype();
    std::vector<Access> acc = c.reads;
    acc.push_back({op->buffer.var_node(), op->index, t.lanes, t.element_of().bytes(), true});
    std::vector<float> r(kStoreFeatures, 0.f);
    // The loops left after unrolling; the unrolled ones make copies of the store.
    std::vector<const Loop*> kept;
    double trip = 1, copies = 1;
    int64_t parallel = 0;
    for (auto& l : loops_) {
      (l.unrolled ? copies : trip) *= double(l.extent);
      if (!l.unrolled) kept.push_back(&l);
      if (l.kind == ForKind::Parallel) parallel = l.extent;
    }
    double flops = c.add + c.mul + c.div + c.math;
    r[0] = float(c.add), r[1] = float(c.mul), r[2] = float(c.fma), r[3] = float(c.div), r[4] = float(c.math);
    r[5] = float(c.cmp), r[6] = float(c.intops), r[7] = float(t.lanes), r[8] = op->predicate.defined();
    r[9] = float(c.loads), r[10] = float(trip), r[11] = float(kept.size());
    r[12] = kept.empty() ? 1.f : float(kept.back()->extent);
    r[13] = float(parallel);
    r[14] = body_stores_.empty() ? 1.f : float(body_stores_.back());
    r[15] = kept.empty() ? 1.f : float(kept.front()->extent);
    // Per buffer: merge accesses to the same buffer.
    struct Buf {
      double bytes = 0, footprint = 1, stride = 0;
      bool write = false, scratch = false;
    };
    std::map<const VarNode*, Buf> bufs;
    double total_bytes = 0;
    for (auto& a : acc) {
      Buf& b = bufs[a.buffer];
      double per = double(a.lanes) * a.bytes;
      b.bytes += per;
      total_bytes += per * trip;
      b.write |= a.write;
      b.scratch = scratch_.count(a.buffer) > 0;
      double fp = double(a.lanes) * a.bytes;
      for (auto* l : kept)
        if (uses_var(a.index, l->var)) fp *= double(l->extent);
      b.footprint = std::max(b.footprint, fp);
      if (!kept.empty()) b.stride = std::max(b.stride, stride_of(a.index, kept.back()->var));
    }
    std::vector<Buf> sorted;
    for (auto& [k, v] : bufs) sorted.push_back(v);
    // Biggest first; ties broken by every field, not by where the buffers' variables
    // happen to sit in memory (that made the features, and the model, vary run to run).
    std::sort(sorted.begin(), sorted.end(), [](const Buf& a, const Buf& b) {
      return std::tie(b.bytes, b.footprint, b.stride, b.write, b.scratch) <
             std::tie(a.bytes, a.footprint, a.stride, a.write, a.scratch);
    });
    for (size_t i = 0; i < 3 && i < sorted.size(); ++i) {
      const Buf& b = sorted[i];
      float* f = &r[16 + 7 * i];
      f[0] = float(b.bytes), f[1] = float(b.bytes * trip), f[2] = float(b.footprint), f[3] = float(b.stride);
      f[4] = float(b.bytes * trip / std::max(1.0, b.footprint)), f[5] = b.write, f[6] = b.scratch;
    }
    r[37] = float(flops * trip / std::max(1.0, total_bytes));
    r[38] = float(scratch_bytes_);
    r[39] = float(flops);
    rows.push_back(r);
    trips.push_back(trip * copies);
    copy_counts.push_back(copies);
    stores += copies;
  }

  static double stride_of(const Expr& index, const VarNode* v) {
    if (const Ramp* r = index.as<Ramp>()) {
      int64_t s;
      return is_const_int(simplify(r->stride), &s) ? double(std::abs(s)) : 64.0;
    }
    if (!uses_var(index, v)) return 0;
    Expr d = simplify(substitute(index, VarMap{{v, make_int(1)}}) - substitute(index, VarMap{{v, make_int(0)}}));
    int64_t s;
    return is_const_int(d, &s) ? double(std::abs(s)) : 64.0;
  }

  std::vector<int> body_stores_;
};

}  // namespace

std::vector<std::vector<float>> store_features(const Stmt& program) {
  Extractor x;
  x.visit(program);
  for (auto& row : x.rows)
    for (auto& v : row) v = log2p(v);
  return x.rows;
}

std::vector<float> program_features(const Stmt& program) {
  Extractor x;
  x.visit(program);
  std::vector<float> out(kProgramFeatures, 0.f);
  double trip_total = 0, flops = 0;
  for (size_t i = 0; i < x.rows.size(); ++i) trip_total += x.trips[i], flops += x.rows[i][39] * x.trips[i];
  for (size_t i = 0; i < x.rows.size(); ++i) {
    double w = x.trips[i] / std::max(1.0, trip_total);
    for (int k = 0; k < kStoreFeatures; ++k) {
      double v = x.rows[i][k];
      out[k] += float(v * (k == 10 ? x.copy_counts[i] : x.trips[i]));  // totals over the run
      out[kStoreFeatures + k] += float(v * w);                     // trip-weighted mean
      out[2 * kStoreFeatures + k] = std::max(out[2 * kStoreFeatures + k], float(v));  // maximum
    }
  }
  for (auto& v : out) v = log2p(v);
  out[3 * kStoreFeatures] = log2p(x.stores);
  out[3 * kStoreFeatures + 1] = log2p(x.parallel_loops);
  out[3 * kStoreFeatures + 2] = log2p(flops);
  return out;
}


namespace {

// The GPU side of one kernel: its memory by scope, barriers, and how its accesses move
// along threadIdx.x.
class GpuExtractor : public IRVisitor {
 public:
  std::set<const VarNode*> shared, local;
  double shared_bytes = 0, local_bytes = 0, barriers = 0, global_bytes = 0, flops = 0;
  double global_n = 0, coalesced = 0, stride_sum = 0, shared_n = 0, conflict_sum = 0, lanes_sum = 0;
  using IRVisitor::visit;

 protected:
  std::vector<double> trips_{1.0};
  void visit_node(const For* op, const Stmt& s) override {
    int64_t ext = 16;
    is_const_int(op->extent, &ext);
    trips_.push_back(trips_.back() * double(ext));
    IRVisitor::visit_node(op, s);
    trips_.pop_back();
  }
  void visit_node(const Allocate* op, const Stmt& s) override {
    double b = double(op->size * op->dtype.bytes());
    if (op->scope == "shared") shared.insert(op->buffer.var_node()), shared_bytes += b;
    else local.insert(op->buffer.var_node()), local_bytes += b;
    IRVisitor::visit_node(op, s);
  }
  void visit_node(const Evaluate* op, const Stmt& s) override {
    if (const Call* c = op->value.as<Call>())
      if (c->op == Intrinsic::Barrier) barriers += trips_.back();
    IRVisitor::visit_node(op, s);
  }
  void visit_node(const Store* op, const Stmt& s) override {
    DType t = op->value.dtype();
    access(op->buffer.var_node(), op->index, t.lanes, t.element_of().bytes());
    OpCount c;
    count(op->value, c);
    flops += (c.add + c.mul + c.div + c.math) * trips_.back();
    for (auto& r : c.reads) access(r.buffer, r.index, r.lanes, r.bytes);
    IRVisitor::visit_node(op, s);
  }

 private:
  // The index with threadIdx.x fixed at `x`.
  static Expr at_thread(const Expr& index, int64_t x) {
    struct Fix : IRMutator {
      int64_t x;
      Expr visit(const Call* op, const Expr& e) override {
        int64_t d;
        if (op->op == Intrinsic::ThreadIndex && is_const_int(op->args[0], &d) && d == 3) return make_int(x);
        return IRMutator::visit(op, e);
      }
    } fix;
    fix.x = x;
    return fix.mutate(index);
  }
  static double thread_stride(const Expr& index) {
    Expr base = index.as<Ramp>() ? index.as<Ramp>()->base : index;
    int64_t s;
    if (!is_const_int(simplify(at_thread(base, 1) - at_thread(base, 0)), &s)) return 64;
    return double(std::abs(s));
  }
  void access(const VarNode* buf, const Expr& index, int lanes, int bytes) {
    double n = trips_.back();
    if (local.count(buf)) return;
    double stride = thread_stride(index);
    if (shared.count(buf)) {
      // 32 banks of 4 bytes: a warp's word addresses `stride` apart hit gcd(stride, 32) ways.
      int64_t words = int64_t(stride) * std::max(1, bytes * lanes / 4);
      double ways = words == 0 ? 1 : double(std::gcd<int64_t>(words, 32));
      shared_n += n, conflict_sum += ways * n;
      return;
    }
    global_n += n;
    global_bytes += n * lanes * bytes;
    lanes_sum += n * lanes;
    stride_sum += n * stride / std::max(1, lanes);
    if (stride <= lanes) coalesced += n;
  }
};

}  // namespace

namespace {

// Resident blocks per multiprocessor, limited by threads, shared memory and (estimated)
// registers; and the occupancy that gives.
struct Occupancy {
  double resident = 0, occupancy = 0, registers = 0;
};
Occupancy occupancy_of(const GpuExtractor& x, double threads, const Target& target) {
  Occupancy o;
  double warps = std::ceil(threads / target.warp_size);
  o.registers = std::min<double>(target.max_registers_per_thread, x.local_bytes / 4 + 24);
  double r = std::min(32.0, std::floor(target.max_threads_per_sm / std::max(1.0, warps * target.warp_size)));
  if (x.shared_bytes > 0) r = std::min(r, std::floor(target.shared_memory_per_sm / x.shared_bytes));
  r = std::min(r, std::floor(target.registers_per_sm / std::max(1.0, o.registers * warps * target.warp_size)));
  o.resident = std::max(r, 0.0);
  o.occupancy = o.resident * warps * target.warp_size / target.max_threads_per_sm;
  return o;
}

double threads_of(const DeviceKernel& k) { return double(k.block[0] * k.block[1] * k.block[2]); }
double blocks_of(const DeviceKernel& k) { return double(k.grid[0] * k.grid[1] * k.grid[2]); }

}  // namespace

std::vector<float> gpu_features(const LoweredProgram& prog, const Target& target) {
  const DeviceKernel* main = nullptr;
  double most = -1;
  GpuExtractor gx;
  for (auto& k : prog.device.kernels) {
    GpuExtractor x;
    x.visit(k.body);
    double work = (x.flops + x.global_bytes) * threads_of(k) * blocks_of(k);
    if (work > most) most = work, main = &k, gx = x;
  }
  std::vector<float> out = main ? program_features(main->body) : std::vector<float>(kProgramFeatures, 0.f);
  std::vector<float> g(kGpuFeatures, 0.f);
  if (main) {
    double threads = threads_of(*main), blocks = blocks_of(*main);
    double warps = std::ceil(threads / target.warp_size);
    Occupancy occ = occupancy_of(gx, threads, target);
    g[0] = log2p(threads), g[1] = log2p(blocks), g[2] = log2p(warps), g[3] = log2p(gx.shared_bytes);
    g[4] = log2p(gx.local_bytes), g[5] = log2p(occ.registers), g[6] = log2p(gx.barriers);
    g[7] = log2p(gx.global_bytes);
    g[8] = float(gx.global_n > 0 ? gx.coalesced / gx.global_n : 1);
    g[9] = log2p(gx.global_n > 0 ? gx.stride_sum / gx.global_n : 0);
    g[10] = float(gx.shared_n > 0 ? gx.conflict_sum / gx.shared_n : 1);
    g[11] = log2p(gx.flops / std::max(1.0, gx.global_bytes));
    g[12] = float(occ.occupancy);
    g[13] = log2p(blocks / std::max(1.0, occ.resident * target.multiprocessors));
    g[14] = log2p(double(prog.device.kernels.size()));
    g[15] = log2p(gx.global_n > 0 ? gx.lanes_sum / gx.global_n : 1);
  }
  out.insert(out.end(), g.begin(), g.end());
  return out;
}

GpuProfile gpu_profile(const LoweredProgram& prog, const Target& target) {
  GpuProfile p;
  double most = -1, conflicts = 0, coalesced = 0, global_n = 0;
  for (auto& k : prog.device.kernels) {
    GpuExtractor x;
    x.visit(k.body);
    double n = threads_of(k) * blocks_of(k);
    p.flops += x.flops * n;
    p.global_bytes += x.global_bytes * n;
    p.shared_accesses += x.shared_n * n;
    conflicts += x.conflict_sum * n;
    p.barriers += x.barriers * blocks_of(k);
    coalesced += x.coalesced * n, global_n += x.global_n * n;
    ++p.kernels;
    double work = (x.flops + x.global_bytes) * n;
    if (work > most) {  // the launch shape of the kernel doing the most work
      most = work;
      p.occupancy = occupancy_of(x, threads_of(k), target).occupancy;
      p.blocks = int64_t(blocks_of(k));
      p.threads_per_block = int64_t(threads_of(k));
    }
  }
  p.conflict_ways = p.shared_accesses > 0 ? conflicts / p.shared_accesses : 1;
  p.coalesced = global_n > 0 ? coalesced / global_n : 1;
  return p;
}

std::vector<float> candidate_features(const LoweredProgram& prog, const Target& target) {
  return target.is_gpu() ? gpu_features(prog, target) : program_features(prog.func.body);
}

}  // namespace tessel::autotune
