// Software prefetch (Stage::prefetch). A loop marked `prefetch:<buffer>` with offset d
// prefetches, while its iteration v runs, the cache lines of the buffer that iteration v + d
// reads. The lines are spread over the iterations of the innermost serial loop around the
// reads, one or a few each, so that the fetches overlap the computation instead of queueing
// at the start of the iteration (a core tracks only 10-20 misses at a time).
#include <algorithm>

#include "ir/IRMutator.h"
#include "ir/IRVisitor.h"
#include "ir/Simplify.h"
#include "passes/Passes.h"
#include "tessel/error.h"

namespace tessel {
namespace {

constexpr int64_t kLineBytes = 64;

// The reads of one buffer under a loop, each with the loops around it below that loop.
struct Read {
  Expr index;
  std::vector<const For*> loops;
};

class ReadFinder : public IRVisitor {
 public:
  explicit ReadFinder(std::string buffer) : buffer_(std::move(buffer)) {}
  std::vector<Read> reads;
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
      reads.push_back({op->index, loops_});
      var = op->buffer, type = op->type.element_of();
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

// Replaces one statement node (by identity) with another.
class Replace : public IRMutator {
 public:
  Replace(const StmtNode* from, Stmt to) : from_(from), to_(std::move(to)) {}
  Stmt mutate(const Stmt& s) override { return s.get() == from_ ? to_ : IRMutator::mutate(s); }

 private:
  const StmtNode* from_;
  Stmt to_;
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
    ReadFinder finder(buffer);
    finder.visit(loop->body);
    TESSEL_USER_CHECK(!finder.reads.empty(), "prefetch at loop '", name, "': nothing inside it reads '", buffer, "'");
    auto [start, elements] = iteration_range(loop, finder, buffer);
    int64_t line_elems = std::max<int64_t>(1, kLineBytes / finder.type.bytes());
    // A range that does not start a line (buffers start at one) ends in one line more.
    int64_t lines = (elements * finder.type.bytes() + kLineBytes - 1) / kLineBytes +
                    (known_multiple(start, line_elems) ? 0 : 1);
    Expr ahead = simplify(substitute(start, loop->var, Expr(loop->var) + make_int(offset)));
    return spread(body, loop, finder, ahead, lines, line_elems);
  }

  // The first element one iteration of `loop` reads, as a function of its variable, and how
  // many elements from there it reads: found at iterations 0 and 1, with every loop inside
  // at its full range and every loop outside at 0.
  std::pair<Expr, int64_t> iteration_range(const For* loop, const ReadFinder& finder, const std::string& buffer) {
    const std::string& name = loop->var.name();
    BoundsMap inner;
    for (auto& r : finder.reads)
      for (const For* f : r.loops) {
        int64_t mn = constant(f->min, "start", name), ext = constant(f->extent, "extent", name);
        inner[f->var.get()] = {mn, mn + ext - 1};
      }
    auto at_iteration = [&](const Expr& e, int64_t p) {
      VarMap point{{loop->var.get(), make_int(p)}};
      for (auto& v : outer_) point[v.get()] = make_int(0);
      return simplify(substitute(e, point));
    };
    int64_t lo[2], hi[2];
    Expr start;
    for (int p = 0; p < 2; ++p) {
      lo[p] = ConstInterval::kPosInf, hi[p] = ConstInterval::kNegInf;
      for (auto& r : finder.reads) {
        ConstInterval a = const_bounds(at_iteration(first_lane(r.index), p), inner);
        ConstInterval b = const_bounds(at_iteration(last_lane(r.index), p), inner);
        TESSEL_USER_CHECK(a.bounded() && b.bounded(), "prefetch at loop '", name, "': the range of '", buffer,
                          "' that an iteration reads is not known (an index depends on a value computed inside)");
        if (p == 0 && std::min(a.min, b.min) < lo[0]) {
          VarMap at_min;
          for (const For* f : r.loops) at_min[f->var.get()] = f->min;
          start = simplify(substitute(first_lane(r.index), at_min));
        }
        lo[p] = std::min({lo[p], a.min, b.min}), hi[p] = std::max({hi[p], a.max, b.max});
      }
    }
    // The prefetched range starts where the iteration's first read does, so it must be its lowest.
    for (int p = 0; p < 2; ++p) {
      int64_t first = 0;
      TESSEL_USER_CHECK(is_const_int(at_iteration(start, p), &first) && first == lo[p], "prefetch at loop '", name,
                        "': the reads of '", buffer, "' in one iteration do not start at its first read; prefetch "
                        "a loop whose iterations read one ascending range each");
    }
    return {start, std::max(hi[0] - lo[0], hi[1] - lo[1]) + 1};
  }

  // Prefetches of `lines` lines from `ahead` on, spread over the iterations of the innermost
  // serial loop around every read, counted through the loops above it.
  Stmt spread(const Stmt& body, const For* loop, const ReadFinder& finder, const Expr& ahead, int64_t lines,
              int64_t line_elems) {
    const std::string& name = loop->var.name();
    std::vector<const For*> common = finder.reads[0].loops;
    for (auto& r : finder.reads) {
      size_t n = 0;
      while (n < common.size() && n < r.loops.size() && common[n] == r.loops[n]) ++n;
      common.resize(n);
    }
    while (!common.empty() && common.back()->for_kind != ForKind::Serial) common.pop_back();
    Expr iter = make_int(0);
    int64_t count = 1;
    const For* at = loop;  // the prefetches go first in its body
    for (const For* f : common) {
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
      Expr addr = simplify(ahead + line * make_int(line_elems));
      return Evaluate::make(Call::make(int32, Intrinsic::Prefetch, {Load::make(finder.type, finder.var, addr)}));
    };
    Stmt pf;
    if (per == 1) {
      pf = fetch(first_line);
    } else {
      Var q(name + ".prefetch", int32);
      pf = For::make(q, make_int(0), make_int(per), ForKind::Serial, fetch(first_line + Expr(q)));
    }
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
