#include "autotune/SearchSpace.h"

#include <algorithm>
#include <set>

#include "autotune/Tracer.h"

namespace tessel::autotune {
namespace {

// Rows a constant matrix may have for its loop to be unrolled (Winograd's have 4 or 6); a
// select on a longer axis (`i == 0` at a border, say) is left to the search.
constexpr int64_t kMaxMatrixRows = 8;

using RowAxes = std::vector<std::pair<std::string, int64_t>>;

// Adds to `rows` the axis of `op` that picks a row through `v`: `v` itself, read modulo `mod`
// (0: none), or, where `mod` is 0, `v`'s operand when `v` is `axis % constant`. Only where
// the matrix has few enough rows.
void add_row_axis(const OperationNode* op, Expr v, int64_t mod, RowAxes& rows) {
  if (const Mod* m = v.as<Mod>(); m && mod == 0 && is_const_int(m->b, &mod)) v = m->a;
  for (auto& iv : op->axis) {
    std::pair<std::string, int64_t> row{iv.name(), mod};
    if (v.same_as(iv.var()) && (mod > 0 ? mod : iv.extent()) <= kMaxMatrixRows &&
        std::find(rows.begin(), rows.end(), row) == rows.end())
      rows.push_back(row);
  }
}

// The axes of `op` its selects compare with a constant, as `i == c` or `i % m == c`.
RowAxes constant_row_axes(const OperationNode* op) {
  RowAxes out;
  visit_exprs(op->body, [&](const Expr& e) {
    const Select* sel = e.as<Select>();
    const EQ* eq = sel ? sel->cond.as<EQ>() : nullptr;
    if (eq && is_const_int(eq->b)) add_row_axis(op, eq->a, 0, out);
  });
  return out;
}

}  // namespace

SearchSpace::SearchSpace(const Workload& w, const Target& t)
    : w_(w), target_(t), constants_(w.constants.begin(), w.constants.end()) {
  Schedule s(w.outputs);
  const ScheduleState& st = s.state();
  for (auto& stage : st.stages) {
    StageInfo in;
    in.name = stage.name;
    in.placeholder = stage.is_placeholder();
    in.output = st.is_output(stage.name);
    if (!in.placeholder) {
      const OperationNode* op = stage.op.get();
      in.reduce = op->reduction() != nullptr;
      in.inline_always = !in.output && !in.reduce && !expensive(op->body) && plain_indices(op->body);
      // Multi-level tiling pays off when some input is reused across output axes.
      if (in.reduce)
        for (auto& input : op->inputs()) {
          auto used = index_vars(op->body, input.get());
          int missing = 0;
          for (auto& iv : op->axis) missing += iv.extent() > 1 && !used.count(iv.var().get());
          in.multi_level_tiling |= missing >= 1;
        }
      int64_t space = 1, red = 1;
      for (auto& iv : op->axis) space *= iv.extent();
      for (auto& iv : op->reduce_axis) red *= iv.extent();
      in.needs_rfactor = in.reduce && !in.multi_level_tiling && op->reduce_axis.size() == 1 &&
                         space <= 16 * t.num_cores && red > 64;
      if (!in.reduce) in.row_axes = constant_row_axes(op);
    }
    info_.push_back(in);
  }
  // An element-wise reader indexing a producer's row dimension with one of its own axes picks
  // the rows through that axis: it is unrolled too, or a producer computed inside its loop
  // keeps the selects (Winograd's input transform reads the row transform's rows along its
  // second axis).
  for (size_t i = 0; i < info_.size(); ++i) {
    if (info_[i].row_axes.empty()) continue;
    const OperationNode* producer = st.stages[i].op.get();
    for (auto& reader : st.readers(info_[i].name)) {
      StageInfo& r = *std::find_if(info_.begin(), info_.end(), [&](auto& x) { return x.name == reader; });
      const OperationNode* rop = st.stage(reader).op.get();
      if (r.reduce) continue;  // a reduction reads them at the root (see generate_cpu)
      for (auto& [axis, mod] : info_[i].row_axes) {
        size_t dim = 0;
        while (dim < producer->axis.size() && producer->axis[dim].name() != axis) ++dim;
        visit_exprs(rop->body, [&](const Expr& e) {
          const TensorLoad* l = e.as<TensorLoad>();
          if (l && l->op.get() == producer && dim < l->indices.size())
            add_row_axis(rop, l->indices[dim], mod, r.row_axes);
        });
      }
    }
  }
  // Fusion of an element-wise output consumer (after inlining cheap stages between).
  for (auto& in : info_) {
    if (!in.multi_level_tiling || in.output) continue;
    std::vector<std::string> readers = st.readers(in.name);
    std::string cur = in.name;
    while (readers.size() == 1) {
      auto it = std::find_if(info_.begin(), info_.end(), [&](auto& x) { return x.name == readers[0]; });
      if (it->inline_always) {
        cur = it->name;
        readers = st.readers(cur);
        continue;
      }
      if (it->output && !it->reduce && st.stage(it->name).op->shape == st.stage(in.name).op->shape) {
        // Element-wise over the same space, possibly through inlined stages.
        bool direct = elementwise_match(st.stage(it->name).op.get(), st.stage(cur).op.get());
        if (direct) {
          in.fused_consumer = it->name;
          it->fused_into_producer = true;
        }
      }
      break;
    }
  }
}

std::vector<std::string> SearchSpace::sketch_names() const {
  std::vector<std::string> names{""};
  for (auto it = info_.rbegin(); it != info_.rend(); ++it) {
    const StageInfo& in = *it;
    std::vector<std::string> opts;
    if (in.multi_level_tiling) {
      if (!in.fused_consumer.empty()) opts = {in.name + ":tile+fuse@1", in.name + ":tile+fuse@2"};
      else if (in.output) opts = {in.name + ":tile+cache_write@1", in.name + ":tile+cache_write@2", in.name + ":tile",
                               in.name + ":tile+micro_kernel"};
      else opts = {in.name + ":tile"};
    } else if (in.needs_rfactor) {
      opts = {in.name + ":plain", in.name + ":rfactor"};
    }
    if (opts.empty()) continue;
    std::vector<std::string> next;
    for (auto& n : names)
      for (auto& o : opts) next.push_back(n.empty() ? o : n + " " + o);
    names = next;
  }
  return names;
}

Candidate SearchSpace::generate(const std::vector<Decision>* replay, std::mt19937_64& rng) const {
  Tracer tr(replay, rng);
  return target_.is_gpu() ? generate_gpu(tr) : generate_cpu(tr);
}

Candidate SearchSpace::sample(std::mt19937_64& rng) const { return generate(nullptr, rng); }

Candidate SearchSpace::replay(const std::vector<Decision>& d, std::mt19937_64& rng) const {
  return generate(&d, rng);
}

namespace {

// Reshapes a tiled stage's register block: rows of one vector become rows of two (or back)
// while another axis' innermost level halves (or doubles), and the level above each changes
// the other way, so the block keeps about as many accumulators and covers the same tile.
// No single-level change gets there from a good block: ResNet-50 conv 512@7 3x3 on znver3
// ran 157 GFLOP/s with 7 columns of one vector and 172 with 2 x 4 columns of two, and the
// steps between (7 columns of two: 14 accumulators, spilled; 4 of one) lose, so the
// evolutionary search never kept one. A stage's spatial tiles are the consecutive 3-level
// tile decisions, its vector axis last (see `tile` in generate).
bool reshape_register_block(std::vector<Decision>& d, int64_t lanes, std::mt19937_64& rng) {
  std::vector<std::pair<size_t, size_t>> blocks;  // [first, last] spatial tiles of a stage
  for (size_t i = 0; i < d.size();) {
    size_t j = i;
    while (j < d.size() && d[j].kind == Decision::Tile && d[j].value.size() == 3) ++j;
    if (j - i >= 2) blocks.push_back({i, j - 1});
    i = std::max(i + 1, j);
  }
  if (blocks.empty()) return false;
  auto [first, vec] = blocks[std::uniform_int_distribution<size_t>(0, blocks.size() - 1)(rng)];
  Decision& v = d[vec];
  Decision& o = d[std::uniform_int_distribution<size_t>(first, vec - 1)(rng)];
  auto halve = [](int64_t x) { return (x + 1) / 2; };
  // The tile's outer levels shrink by half: level 1, or level 0 when level 1 is already 1.
  auto halve_outer = [&](std::vector<int64_t>& f) {
    int64_t& x = f[1] > 1 ? f[1] : f[0];
    x = halve(x);
  };
  std::vector<int64_t> vv = v.value, ov = o.value;
  if (vv[2] == lanes && 2 * lanes <= v.max_inner && ov[2] > 1) {
    vv[2] = 2 * lanes, halve_outer(vv);
    ov = {ov[0], 2 * ov[1], halve(ov[2])};
  } else if (vv[2] == 2 * lanes) {
    vv = {vv[0], 2 * vv[1], lanes};
    ov[2] *= 2, halve_outer(ov);
  } else {
    return false;
  }
  if (!fits(vv, v.range, v.max_inner) || !fits(ov, o.range, o.max_inner)) return false;
  v.value = vv, o.value = ov;  // only a whole reshape: on failure `d` is left as it was
  return true;
}

// Moves a prime factor from one level of a tile to another, the implied outermost level
// (extent / product of the others) included: the tile keeps its size where the factor
// divides, only its shape between the levels changes (Ansor's tile-size mutation). Near the
// best programs a redraw of one level mostly changes the tile's size and loses; the fastest
// ResNet-50 conv 128@28 programs on znver4 differ from each other in where a factor of 28
// sits (1 x 16 x 1 against 7 x 1 x 4), and a cold search there stalled within their sketch
// ~3% below them. False if the drawn move does not fit.
bool move_factor(Decision& x, std::mt19937_64& rng) {
  size_t n = x.value.size();
  int64_t product = 1;
  for (int64_t v : x.value) product *= v;
  std::uniform_int_distribution<size_t> level(0, n);  // n: the implied outermost level
  size_t from = level(rng), to = level(rng);
  if (from == to) return false;
  int64_t source = from == n ? x.range / product : x.value[from];
  std::vector<int64_t> primes;
  for (int64_t p = 2, left = source; left > 1; ++p)
    for (; left % p == 0; left /= p) primes.push_back(p);
  if (primes.empty()) return false;
  int64_t p = primes[std::uniform_int_distribution<size_t>(0, primes.size() - 1)(rng)];
  std::vector<int64_t> moved = x.value;
  if (from < n) moved[from] /= p;
  if (to < n) moved[to] *= p;
  if (!fits(moved, x.range, x.max_inner)) return false;
  x.value = std::move(moved);
  return true;
}

}  // namespace

Candidate SearchSpace::mutate(const Candidate& c, std::mt19937_64& rng) const {
  std::vector<Decision> d = c.decisions;
  if (d.empty()) return c;
  // Tile sizes are most of the space: change them most often (Ansor: 90%).
  std::vector<size_t> tiles, choices;
  for (size_t i = 0; i < d.size(); ++i) (d[i].kind == Decision::Tile ? tiles : choices).push_back(i);
  bool tile = !tiles.empty() && (choices.empty() || std::uniform_real_distribution<double>(0, 1)(rng) < 0.85);
  if (tile && std::uniform_int_distribution<int>(0, 4)(rng) == 0 && reshape_register_block(d, lanes(), rng))
    return generate(&d, rng);
  auto& pool = tile ? tiles : choices;
  Decision& x = d[pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)]];
  if (x.kind == Decision::Tile) {
    // Move a factor between two levels (half the time), or redraw one level.
    if (std::uniform_int_distribution<int>(0, 1)(rng) == 0 && move_factor(x, rng)) return generate(&d, rng);
    size_t n = x.value.size();
    size_t level = std::uniform_int_distribution<size_t>(0, n - 1)(rng);
    int64_t others = 1;
    for (size_t k = 0; k < n; ++k)
      if (k != level) others *= x.value[k];
    int64_t cap = std::max<int64_t>(1, x.range / std::max<int64_t>(others, 1));
    if (level == n - 1) cap = std::min(cap, x.max_inner);
    std::vector<int64_t> opts;
    for (int64_t v = 1; v <= cap; v = v < 8 ? v + 1 : v * 2) opts.push_back(v);
    for (int64_t v = 1; v <= cap; ++v)
      if (x.range % v == 0 && v > 8) opts.push_back(v);
    x.value[level] = opts[std::uniform_int_distribution<size_t>(0, opts.size() - 1)(rng)];
  } else {
    // Left empty, the choice is drawn afresh where the generator makes it, with that
    // choice's preferred options (a padding copy at the root, or inlined): a uniform redraw
    // moved the best conv2d kernels' padding to the root about one mutation in a thousand.
    x.value.clear();
  }
  return generate(&d, rng);
}

}  // namespace tessel::autotune
