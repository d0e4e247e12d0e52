// Software prefetch (Stage::prefetch). A loop marked `prefetch:<buffer>` with offset d
// prefetches, while its iteration v runs, the cache lines of the buffer that iteration v + d
// reads: one ascending range, or rows of one a fixed stride apart (a block of an NCHW image's
// pixels in every channel's plane), whose lines no hardware prefetcher follows. The lines are
// spread over the iterations of the serial loops of the busiest nest inside, one or a few
// each, so that the fetches overlap the computation instead of queueing at the start of the
// iteration (a core tracks only 10-20 misses at a time).
#include <algorithm>
#include <functional>
#include <optional>

#include "ir/IRMutator.h"
#include "ir/IRVisitor.h"
#include "ir/Simplify.h"
#include "passes/Passes.h"
#include "tessel/error.h"

namespace tessel {
namespace {

constexpr int64_t kLineBytes = 64;

// The reads of one buffer under a loop, each with the loops around it below that loop. A
// gather (a vector index other than a ramp, as in the guarded tail of a block of pixels across
// the ends of rows) is only counted: its lanes need not ascend, and a prefetch is only a hint.
struct Read {
  Expr index;
  std::vector<const For*> loops;
};

class ReadFinder : public IRVisitor {
 public:
  explicit ReadFinder(std::string buffer) : buffer_(std::move(buffer)) {}
  std::vector<Read> reads;
  int gathers = 0;
  Var var;  // the buffer
  DType type;

 protected:
  void visit_node(const For* op, const Stmt& s) override {
    loops_.push_back(op);
    IRVisitor::visit_node(op, s);
    loops_.pop_back();
  }
  void visit_node(const Load* op, const Expr& e) override {
    if (op->buffer.name() == buffer_) {
      if (op->index.dtype().is_vector() && !op->index.as<Ramp>() && !op->index.as<Broadcast>()) {
        ++gathers;
      } else {
        reads.push_back({op->index, loops_});
        var = op->buffer, type = op->type.element_of();
      }
    }
    IRVisitor::visit_node(op, e);
  }

 private:
  std::string buffer_;
  std::vector<const For*> loops_;
};

Expr first_lane(const Expr& index) {
  if (const Ramp* r = index.as<Ramp>()) return r->base;
  if (const Broadcast* b = index.as<Broadcast>()) return b->value;
  return index;
}

Expr last_lane(const Expr& index) {
  if (const Ramp* r = index.as<Ramp>()) return r->base + r->stride * make_int(r->lanes - 1);
  return first_lane(index);
}

int64_t constant(const Expr& e, const char* what, const std::string& loop) {
  int64_t v = 0;
  TESSEL_USER_CHECK(is_const_int(simplify(e), &v), "prefetch at loop '", loop, "': the ", what,
                    " of a loop inside it is not a constant");
  return v;
}

// Whether two loops are one loop of the schedule: the copies that partitioning and
// unswitching make of a loop (a partial register block's own nest) keep its variable.
bool same_loop(const For* a, const For* b) {
  auto equal = [](const Expr& x, const Expr& y) {
    int64_t d = 1;
    return is_const_int(simplify(x - y), &d) && d == 0;
  };
  return a == b || (a->var.get() == b->var.get() && equal(a->min, b->min) && equal(a->extent, b->extent));
}

// Replaces one statement node (by identity) with another.
class Replace : public IRMutator {
 public:
  Replace(const StmtNode* from, Stmt to) : from_(from), to_(std::move(to)) {}
  Stmt mutate(const Stmt& s) override { return s.get() == from_ ? to_ : IRMutator::mutate(s); }

 private:
  const StmtNode* from_;
  Stmt to_;
};

// The statement that an annotation, a let or an allocation wraps (none for others).
Stmt wrapped(const Stmt& s) {
  if (const AttrStmt* a = s.as<AttrStmt>()) return a->body;
  if (const LetStmt* l = s.as<LetStmt>()) return l->body;
  if (const Allocate* a = s.as<Allocate>()) return a->body;
  return Stmt();
}

// Iterations of the innermost statements under s (a loop of unknown extent counts once).
double work(const Stmt& s) {
  if (const For* f = s.as<For>()) {
    int64_t e = 1;
    return (is_const_int(f->extent, &e) ? double(std::max<int64_t>(e, 1)) : 1.0) * work(f->body);
  }
  if (const Block* b = s.as<Block>()) {
    double n = 0;
    for (auto& p : b->stmts) n += work(p);
    return n;
  }
  if (const IfThenElse* c = s.as<IfThenElse>()) return work(c->then_case);
  Stmt inner = wrapped(s);
  return inner.defined() ? work(inner) : 1;
}

// The serial loops, outermost first, of the nest under s that does the most work: where the
// marked loop packs its input first, the fetches go into the computation after the packing.
std::vector<const For*> busiest_nest(Stmt s) {
  std::vector<const For*> nest;
  for (;;) {
    if (const For* f = s.as<For>()) {
      if (f->for_kind != ForKind::Serial) break;
      nest.push_back(f), s = f->body;
    } else if (const Block* b = s.as<Block>()) {
      double most = -1;
      for (auto& p : b->stmts)
        if (double w = work(p); w > most) most = w, s = p;
    } else if (Stmt inner = wrapped(s); inner.defined()) {
      s = inner;
    } else {
      break;
    }
  }
  return nest;
}

// What one iteration of the marked loop reads: `rows` ranges of `elements` from `start` on
// (a function of the loop's variable), each `stride` after the one before.
struct Footprint {
  Expr start;
  int64_t elements = 0, rows = 1, stride = 0;

  // A range that does not start a line (buffers start at one) ends in one line more.
  int64_t row_lines(int64_t line_elems) const {
    bool aligned = known_multiple(start, line_elems) && stride % line_elems == 0;
    return (elements + line_elems - 1) / line_elems + (aligned ? 0 : 1);
  }
};

class Injector : public IRMutator {
 protected:
  Stmt visit(const For* op, const Stmt& s) override {
    outer_.push_back(op->var);
    Stmt r = IRMutator::visit(op, s);
    outer_.pop_back();
    return r;
  }

  Stmt visit(const AttrStmt* op, const Stmt& s) override {
    std::string key = op->key;
    if (key.rfind(kPrefetchKey, 0) != 0) return IRMutator::visit(op, s);
    size_t at = key.rfind('@');
    size_t from = std::string(kPrefetchKey).size();
    return inject(mutate(op->body), key.substr(from, at - from), key.substr(at + 1), op->value);
  }

 private:
  // `body` is the marked loop `name`, the loops loop partitioning made of it, or, where it had
  // one iteration, its body (with nothing ahead to prefetch).
  Stmt inject(const Stmt& body, const std::string& buffer, const std::string& name, int64_t offset) {
    if (const Block* b = body.as<Block>()) {
      std::vector<Stmt> parts;
      for (auto& p : b->stmts) parts.push_back(p.as<For>() || p.as<AttrStmt>() ? inject(p, buffer, name, offset) : p);
      return Block::make(parts);
    }
    if (const AttrStmt* a = body.as<AttrStmt>())
      return AttrStmt::make(a->key, a->value, inject(a->body, buffer, name, offset));
    const For* loop = body.as<For>();
    if (!loop || loop->var.name() != name) return body;
    // A parallel loop that partitioning split runs `if (v < cut) main else tail`: the main part's iterations
    // prefetch what the next ones read, the tail's (at its end, with little ahead) nothing.
    int64_t cut = 0;
    if (const IfThenElse* parts = parallel_parts_of(loop, &cut)) {
      auto with_body = [&](const Stmt& b) {
        return For::make(loop->var, loop->min, loop->extent, loop->for_kind, b, loop->thread_tag);
      };
      Stmt main = inject(with_body(parts->then_case), buffer, name, offset);
      return with_body(IfThenElse::make(parts->cond, main.as<For>()->body, parts->else_case));
    }
    ReadFinder finder(buffer);
    finder.visit(loop->body);
    TESSEL_USER_CHECK(!finder.reads.empty() || finder.gathers, "prefetch at loop '", name,
                      "': nothing inside it reads '", buffer, "'");
    if (finder.reads.empty()) return body;
    int64_t line_elems = std::max<int64_t>(1, kLineBytes / finder.type.bytes());
    Footprint range = footprint(loop, finder, buffer, line_elems);
    int64_t row_lines = range.row_lines(line_elems);
    Expr ahead = simplify(substitute(range.start, loop->var, Expr(loop->var) + make_int(offset)));
    std::vector<const For*> nest = busiest_nest(loop->body);
    if (Stmt by_rows = spread_by_rows(body, name, nest, finder, range, ahead, line_elems, row_lines);
        by_rows.defined())
      return by_rows;
    auto address = [&](const Expr& line) {
      if (range.rows == 1) return ahead + line * make_int(line_elems);
      if (row_lines == 1) return ahead + line * make_int(range.stride);
      Expr row = line / make_int(row_lines);
      return ahead + row * make_int(range.stride) + (line - row * make_int(row_lines)) * make_int(line_elems);
    };
    return spread(body, loop, nest, finder, address, range.rows * row_lines);
  }

  // The range one iteration of `loop` reads, or where that is sparse, the rows of one loop
  // inside whose iterations read ranges a fixed stride apart that do not overlap.
  Footprint footprint(const For* loop, const ReadFinder& finder, const std::string& buffer, int64_t line_elems) {
    Footprint best = *iteration_range(loop, finder, buffer, nullptr);
    auto lines = [&](const Footprint& f) { return f.rows * f.row_lines(line_elems); };
    for (const For* f : finder.reads[0].loops) {
      int64_t extent = 0;
      bool everywhere = std::all_of(finder.reads.begin(), finder.reads.end(), [&](const Read& r) {
        return std::any_of(r.loops.begin(), r.loops.end(), [&](const For* g) { return same_loop(f, g); });
      });
      if (!everywhere || !is_const_int(simplify(f->extent), &extent) || extent < 2) continue;
      std::optional<Footprint> found = iteration_range(loop, finder, buffer, f);
      if (!found) continue;
      Footprint row = *found;
      auto at = [&](int64_t i) { return simplify(substitute(row.start, f->var, f->min + make_int(i))); };
      int64_t stride = 0, span = 0;
      if (!is_const_int(simplify(at(1) - at(0)), &stride) || !is_const_int(simplify(at(extent - 1) - at(0)), &span) ||
          stride < row.elements || span != stride * (extent - 1))
        continue;
      row.start = at(0), row.rows = extent, row.stride = stride;
      if (lines(row) < lines(best)) best = row;
    }
    return best;
  }

  // The first element one iteration of `loop` reads, as a function of its variable, and how
  // many elements from there it reads: found at iterations 0 and 1, with every loop inside
  // at its full range (but `fixed`, left a variable in the start and at its first iteration
  // in the range) and every loop outside at 0.
  // Where `fixed` is given and the reads do not fit that shape, nothing.
  std::optional<Footprint> iteration_range(const For* loop, const ReadFinder& finder, const std::string& buffer,
                                           const For* fixed) {
    const std::string& name = loop->var.name();
    BoundsMap inner;
    for (auto& r : finder.reads)
      for (const For* f : r.loops) {
        int64_t mn = constant(f->min, "start", name), ext = constant(f->extent, "extent", name);
        inner[f->var.get()] = {mn, fixed && same_loop(f, fixed) ? mn : mn + ext - 1};
      }
    auto at_iteration = [&](const Expr& e, int64_t p) {
      VarMap point{{loop->var.get(), make_int(p)}};
      for (auto& v : outer_) point[v.get()] = make_int(0);
      if (fixed) point[fixed->var.get()] = fixed->min;
      return simplify(substitute(e, point));
    };
    int64_t lo[2], hi[2];
    Expr start;
    for (int p = 0; p < 2; ++p) {
      lo[p] = ConstInterval::kPosInf, hi[p] = ConstInterval::kNegInf;
      for (auto& r : finder.reads) {
        ConstInterval a = const_bounds(at_iteration(first_lane(r.index), p), inner);
        ConstInterval b = const_bounds(at_iteration(last_lane(r.index), p), inner);
        if (fixed && !(a.bounded() && b.bounded())) return std::nullopt;
        TESSEL_USER_CHECK(a.bounded() && b.bounded(), "prefetch at loop '", name, "': the range of '", buffer,
                          "' that an iteration reads is not known (an index depends on a value computed inside)");
        if (p == 0 && std::min(a.min, b.min) < lo[0]) {
          VarMap at_min;
          for (const For* f : r.loops)
            if (!fixed || !same_loop(f, fixed)) at_min[f->var.get()] = f->min;
          start = simplify(substitute(first_lane(r.index), at_min));
        }
        lo[p] = std::min({lo[p], a.min, b.min}), hi[p] = std::max({hi[p], a.max, b.max});
      }
    }
    // The prefetched range starts a fixed distance from the iteration's first read (at no
    // distance where that read is the lowest; a guarded tail's wrapped columns read lower).
    int64_t first[2] = {0, 0};
    bool moves_with_it = is_const_int(at_iteration(start, 0), &first[0]) &&
                         is_const_int(at_iteration(start, 1), &first[1]) && lo[0] - first[0] == lo[1] - first[1];
    if (fixed && !moves_with_it) return std::nullopt;
    TESSEL_USER_CHECK(moves_with_it, "prefetch at loop '", name, "': the reads of '", buffer,
                      "' in one iteration do not move with its first read; prefetch a loop whose iterations read "
                      "one ascending range each");
    start = simplify(start + make_int(lo[0] - first[0]));
    return Footprint{start, std::max(hi[0] - lo[0], hi[1] - lo[1]) + 1};
  }

  // Rows of lines where the innermost serial loop of `nest` (the busiest inside the marked loop `name`) runs
  // once per row (a reduction over an NCHW image's channels under blocks of output channels): its iteration r
  // fetches lines of row r, the loops outside it choosing which, so that each address is the loop's variable
  // times the rows' stride and no line number is divided into a row and a line of it (a division, a shift and
  // a multiply in every iteration of a loop of 24 FMAs). AVX-512, alternating runs, 1 / 2 threads: 256->64 1x1
  // at 56x56 +2-4% / +3-5%, 96->24 at 112x112 +5% / +5%. Undefined where the nest does not take that shape, or
  // where the fetches would bunch in a few of the iterations of the loops outside it.
  Stmt spread_by_rows(const Stmt& body, const std::string& name, const std::vector<const For*>& nest,
                      const ReadFinder& finder, const Footprint& range, const Expr& ahead, int64_t line_elems,
                      int64_t row_lines) {
    int64_t rows = 0, outer = 1;
    if (range.rows < 2 || nest.empty() || !is_const_int(simplify(nest.back()->extent), &rows) || rows != range.rows)
      return Stmt();
    Expr iter = make_int(0);  // the iteration of the loops outside the innermost
    for (size_t i = 0; i + 1 < nest.size(); ++i) {
      int64_t ext = constant(nest[i]->extent, "extent", name);
      iter = iter * make_int(ext) + (Expr(nest[i]->var) - nest[i]->min), outer *= ext;
    }
    if (outer > 2 * row_lines) return Stmt();  // most iterations would fetch nothing, the others a line a row
    const For* at = nest.back();
    int64_t per = (row_lines + outer - 1) / outer;  // lines of its row an iteration fetches
    Var q(name + ".prefetch", int32);
    Expr line = per == 1 ? iter : iter * make_int(per) + Expr(q);
    Expr addr = simplify(ahead + (Expr(at->var) - at->min) * make_int(range.stride) + line * make_int(line_elems));
    Stmt pf = Evaluate::make(Call::make(int32, Intrinsic::Prefetch, {Load::make(finder.type, finder.var, addr)}));
    if (outer * per > row_lines) pf = IfThenElse::make(line < make_int(row_lines), pf);
    if (per > 1) pf = For::make(q, make_int(0), make_int(per), ForKind::Serial, pf);
    return first_in(body, at, pf);
  }

  // Prefetches of `lines` lines (the address of each given), spread over the iterations of the
  // serial loops of `nest` (the busiest inside `loop`), counted through the loops above.
  Stmt spread(const Stmt& body, const For* loop, const std::vector<const For*>& nest, const ReadFinder& finder,
              const std::function<Expr(const Expr&)>& address, int64_t lines) {
    const std::string& name = loop->var.name();
    Expr iter = make_int(0);
    int64_t count = 1;
    const For* at = loop;  // the prefetches go first in its body
    for (const For* f : nest) {
      int64_t ext = constant(f->extent, "extent", name);
      if (count * ext * lines >= (int64_t(1) << 30)) break;  // the line numbers stay within int32
      iter = iter * make_int(ext) + (Expr(f->var) - f->min), count *= ext, at = f;
    }
    // Each iteration fetches `per` lines; where there are more iterations than lines, each run
    // of 2^shift iterations (as many as keep every line covered) fetches one.
    int64_t per = (lines + count - 1) / count, shift = 0;
    while (count >> (shift + 1) >= lines) ++shift;
    Expr first_line = shift ? iter / make_int(int64_t(1) << shift) : iter * make_int(per);
    auto fetch = [&](const Expr& line) {
      Expr addr = simplify(address(line));
      return Evaluate::make(Call::make(int32, Intrinsic::Prefetch, {Load::make(finder.type, finder.var, addr)}));
    };
    Stmt pf;
    if (per == 1) {
      pf = fetch(first_line);
    } else {
      Var q(name + ".prefetch", int32);
      pf = For::make(q, make_int(0), make_int(per), ForKind::Serial, fetch(first_line + Expr(q)));
    }
    return first_in(body, at, pf);
  }

  // `body` with `pf` put first in the body of its loop `at`.
  static Stmt first_in(const Stmt& body, const For* at, const Stmt& pf) {
    Stmt with = For::make(at->var, at->min, at->extent, at->for_kind, Block::make({pf, at->body}), at->thread_tag);
    return Replace(at, with).mutate(body);
  }

  std::vector<Var> outer_;
};

}  // namespace

Stmt inject_prefetch(const Stmt& s) {
  return Injector().mutate(s);
}

}  // namespace tessel
