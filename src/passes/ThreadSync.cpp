// Barrier insertion (TVM's ThreadSync, for shared memory). Threads of a block see each
// other's shared-memory writes only after a barrier: one goes before a statement that
// reads what an earlier one wrote (RAW), or writes what an earlier one read (WAR), and at
// the end of a loop body whose last accesses conflict with its first ones
// on the next iteration. Buffers are compared whole, which is exact for the staged tiles
// lowering makes. A barrier under a condition that depends on the thread would hang or
// be skipped by some threads: that is an error.
#include <set>

#include "ir/IRMutator.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "passes/Passes.h"
#include "tessel/target.h"

namespace tessel {
namespace {

using BufSet = std::set<const ExprNode*>;

struct Accesses {
  BufSet reads, writes;
  // Write after write needs no barrier: lowering never has two threads write one element
  // of a staged tile, and the reads that follow get theirs.
  bool conflicts(const Accesses& later) const {
    for (auto* b : later.reads)
      if (writes.count(b)) return true;
    for (auto* b : later.writes)
      if (reads.count(b)) return true;
    return false;
  }
  void add(const Accesses& o) {
    reads.insert(o.reads.begin(), o.reads.end());
    writes.insert(o.writes.begin(), o.writes.end());
  }
};

// What a statement does to shared memory: with a barrier inside, the accesses before the
// first one (head) and after the last one (tail); without, head and tail are all of them.
struct Summary {
  bool barrier = false;
  Accesses head, tail;
  bool converge = false;  // holds a barrier or an all-reduce: every thread of the block must reach it
};

Stmt barrier() { return Evaluate::make(Call::make(int32, Intrinsic::Barrier, {})); }

class Sync : public IRMutator {
 public:
  BufSet shared;
  int64_t threads_x = 1;
  const Target* target = nullptr;
  Summary last;  // of the statement just mutated
  using IRMutator::mutate;

 protected:
  Accesses expr_reads(const Expr& e) {
    Accesses a;
    visit_exprs(e, [&](const Expr& x) {
      if (const Load* l = x.as<Load>(); l && shared.count(l->buffer.get())) a.reads.insert(l->buffer.get());
    });
    return a;
  }
  void leaf(const Accesses& a) { last = Summary{false, a, a}; }

  Stmt visit(const Allocate* op, const Stmt& s) override {
    if (op->scope == "shared") shared.insert(op->buffer.get());
    Stmt body = mutate(op->body);
    return body.same_as(op->body) ? s : Allocate::make(op->buffer, op->dtype, op->size, op->scope, body);
  }
  Stmt visit(const Store* op, const Stmt& s) override {
    const Call* c = op->value.as<Call>();
    if (c && c->op == Intrinsic::ThreadAllReduce) {
      Accesses in = expr_reads(c->args[0]);
      last = allreduce_has_barrier(*target, threads_x) ? Summary{true, in, {}, true} : Summary{false, in, in, true};
      return s;
    }
    Accesses a = expr_reads(op->value);
    a.add(expr_reads(op->index));
    if (shared.count(op->buffer.get())) a.writes.insert(op->buffer.get());
    leaf(a);
    return s;
  }
  Stmt visit(const Evaluate* op, const Stmt& s) override {
    const Call* c = op->value.as<Call>();
    if (c && c->op == Intrinsic::Barrier) last = Summary{true, {}, {}, true};
    else leaf(expr_reads(op->value));
    return s;
  }
  Stmt visit(const LetStmt* op, const Stmt& s) override {
    if (thread_dependent(op->value)) thread_vars_.insert(op->var.get());
    Accesses a = expr_reads(op->value);
    Stmt body = mutate(op->body);
    last.head.add(a);
    if (!last.barrier) last.tail.add(a);
    return body.same_as(op->body) ? s : LetStmt::make(op->var, op->value, body);
  }
  Stmt visit(const AttrStmt* op, const Stmt& s) override {
    Stmt body = mutate(op->body);
    return body.same_as(op->body) ? s : AttrStmt::make(op->key, op->value, body);
  }
  Stmt visit(const Block* op, const Stmt& s) override { return sequence(op->stmts); }

  Stmt visit(const For* op, const Stmt& s) override {
    Stmt body = mutate(op->body);
    Summary b = last;
    int64_t ext = 0;
    bool repeats = !is_const_int(op->extent, &ext) || ext > 1;
    if (repeats && b.tail.conflicts(b.head)) {
      body = Block::make({body, barrier()});
      b.barrier = b.converge = true;
      b.tail = {};
    }
    if (!b.barrier) b.head.add(b.tail), b.tail = b.head;
    Accesses bounds = expr_reads(op->min);
    bounds.add(expr_reads(op->extent));
    b.head.add(bounds);
    last = b;
    return For::make(op->var, op->min, op->extent, op->for_kind, body, op->thread_tag);
  }

  Stmt visit(const IfThenElse* op, const Stmt& s) override {
    Accesses c = expr_reads(op->cond);
    Stmt t = mutate(op->then_case);
    Summary st = last;
    Summary se;
    Stmt e;
    if (op->else_case.defined()) {
      e = mutate(op->else_case);
      se = last;
    }
    TESSEL_USER_CHECK(!((st.converge || se.converge) && thread_dependent(op->cond)),
                      "a barrier is needed inside a condition that depends on the thread index (", to_string(op->cond),
                      "), where some threads of the block would not reach it. This happens when a stage that "
                      "synchronises (a shared-memory fetch, a cross-thread reduction) is bound to fewer threads "
                      "than the kernel launches: bind the same thread extents in every stage of the kernel");
    Summary out;
    out.barrier = st.barrier && se.barrier;
    out.converge = st.converge || se.converge;
    out.head = st.head, out.head.add(se.head), out.head.add(c);
    out.tail = st.tail, out.tail.add(se.tail);
    if (!out.barrier) out.head.add(out.tail), out.tail = out.head;
    last = out;
    return IfThenElse::make(op->cond, t, e);
  }

 private:
  BufSet thread_vars_;

  bool thread_dependent(const Expr& e) const {
    bool dep = false;
    visit_exprs(e, [&](const Expr& x) {
      if (const Call* c = x.as<Call>(); c && c->op == Intrinsic::ThreadIndex) {
        int64_t d;
        dep |= is_const_int(c->args[0], &d) && d >= 3;
      }
      dep |= thread_vars_.count(x.get()) > 0;
    });
    return dep;
  }

  Stmt sequence(const std::vector<Stmt>& stmts) {
    std::vector<Stmt> out;
    Summary whole;
    Accesses pending;
    for (auto& st : stmts) {
      Stmt m = mutate(st);
      Summary s = last;
      whole.converge |= s.converge;
      if (pending.conflicts(s.head)) {
        out.push_back(barrier());
        whole.converge = true;
        if (!whole.barrier) whole.head = pending;
        whole.barrier = true;
        pending = {};
      }
      out.push_back(m);
      if (s.barrier) {
        if (!whole.barrier) whole.head = pending, whole.head.add(s.head);
        whole.barrier = true;
        pending = s.tail;
      } else {
        pending.add(s.head);
      }
    }
    whole.tail = pending;
    if (!whole.barrier) whole.head = pending;
    last = whole;
    return Block::make(out);
  }
};

}  // namespace

Stmt thread_sync(const DeviceKernel& k, const Target& target) {
  Sync s;
  s.threads_x = k.block[0];
  s.target = &target;
  return s.mutate(k.body);
}

}  // namespace tessel
