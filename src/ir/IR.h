#pragma once
/** \file
 * The IR: expression and statement nodes shared by the tensor language, lowering and
 * code generation.
 *
 * Semantics every pass relies on:
 *  - Expressions are pure except Load/TensorLoad (which read memory) and have no side
 *    effects; they may be evaluated in any order, duplicated or dropped.
 *  - Integer arithmetic wraps in two's complement at the type's width. Div and Mod on
 *    integers truncate toward zero (C semantics); lowering only forms them on
 *    non-negative operands, so floor and truncation agree there. Division by zero is
 *    undefined and never formed by lowering.
 *  - Float arithmetic is IEEE; code generation may contract a*b+c into a fused
 *    multiply-add. float16 values are stored as half and computed in float32.
 *  - Vectors: an expression of type T x n evaluates n lanes. Ramp(base, stride, n) is
 *    base + i*stride for lane i; Broadcast(v, n) repeats v. A Load or Store with a
 *    vector index touches one element per lane. Scalars and vectors never mix in a
 *    binary node: the vectorizer broadcasts.
 *  - Booleans are 1-bit; comparisons of n-lane operands give n-lane booleans.
 *  - Before storage flattening, tensors are accessed by multi-dimensional TensorLoad /
 *    TensorStore over their full logical index space and made to exist by Realize; after
 *    it, only flat Load/Store on buffer variables remain, made by Allocate (scratch) or
 *    passed in as kernel arguments.
 *  - Loops run var from min to min+extent-1. A Parallel loop's iterations may run
 *    concurrently and in any order; a Vectorized loop has a constant extent and becomes
 *    vector code; an Unrolled loop has a constant extent and becomes straight-line code.
 *  - Reduce only appears as the whole body of a compute operation.
 */
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessel/error.h"
#include "tessel/expr.h"
#include "tessel/tensor.h"

namespace tessel {

#define TESSEL_EXPR_NODES(X) \
  X(IntImm) X(FloatImm) X(Variable) X(Cast) X(Add) X(Sub) X(Mul) X(Div) X(Mod) X(Min) X(Max) \
  X(EQ) X(NE) X(LT) X(LE) X(GT) X(GE) X(And) X(Or) X(Not) X(Select) X(Call) X(TensorLoad)  \
  X(Load) X(Ramp) X(Broadcast) X(Reduce) X(Let)

#define TESSEL_STMT_NODES(X) \
  X(LetStmt) X(For) X(Store) X(TensorStore) X(Realize) X(Allocate) X(IfThenElse) X(Block) \
  X(Evaluate) X(AttrStmt)

enum class NodeKind : uint8_t {
#define TESSEL_ENUM(N) N,
  TESSEL_EXPR_NODES(TESSEL_ENUM) TESSEL_STMT_NODES(TESSEL_ENUM)
#undef TESSEL_ENUM
};

struct ExprNode {
  NodeKind kind;
  DType type;
  ExprNode(NodeKind k, DType t) : kind(k), type(t) {}
  virtual ~ExprNode() = default;
};

struct StmtNode {
  NodeKind kind;
  explicit StmtNode(NodeKind k) : kind(k) {}
  virtual ~StmtNode() = default;
};

template <typename T>
const T* Expr::as() const {
  return node_ && node_->kind == T::static_kind ? static_cast<const T*>(node_.get()) : nullptr;
}
template <typename T>
const T* Stmt::as() const {
  return node_ && node_->kind == T::static_kind ? static_cast<const T*>(node_.get()) : nullptr;
}

#define TESSEL_NODE(N, Base) \
  static constexpr NodeKind static_kind = NodeKind::N;

struct IntImm : ExprNode {
  TESSEL_NODE(IntImm, ExprNode)
  int64_t value;
  IntImm(DType t, int64_t v) : ExprNode(NodeKind::IntImm, t), value(v) {}
  static Expr make(DType t, int64_t v);
};

struct FloatImm : ExprNode {
  TESSEL_NODE(FloatImm, ExprNode)
  double value;
  FloatImm(DType t, double v) : ExprNode(NodeKind::FloatImm, t), value(v) {}
  static Expr make(DType t, double v);
};

struct VarNode : ExprNode {
  std::string name;
  VarNode(DType t, std::string n) : ExprNode(NodeKind::Variable, t), name(std::move(n)) {}
};
struct Variable : VarNode {
  TESSEL_NODE(Variable, ExprNode)
  using VarNode::VarNode;
};

struct Cast : ExprNode {
  TESSEL_NODE(Cast, ExprNode)
  Expr value;
  Cast(DType t, Expr v) : ExprNode(NodeKind::Cast, t), value(std::move(v)) {}
  static Expr make(DType t, Expr v);
};

// Arithmetic, comparison and logical binary nodes share one layout.
struct BinaryNode : ExprNode {
  Expr a, b;
  BinaryNode(NodeKind k, DType t, Expr a_, Expr b_)
      : ExprNode(k, t), a(std::move(a_)), b(std::move(b_)) {}
};

#define TESSEL_BINARY(N)                                                  \
  struct N : BinaryNode {                                                 \
    TESSEL_NODE(N, ExprNode)                                              \
    N(DType t, Expr a_, Expr b_) : BinaryNode(NodeKind::N, t, std::move(a_), std::move(b_)) {} \
    static Expr make(Expr a, Expr b);                                     \
  };
TESSEL_BINARY(Add) TESSEL_BINARY(Sub) TESSEL_BINARY(Mul) TESSEL_BINARY(Div) TESSEL_BINARY(Mod)
TESSEL_BINARY(Min) TESSEL_BINARY(Max) TESSEL_BINARY(EQ) TESSEL_BINARY(NE) TESSEL_BINARY(LT)
TESSEL_BINARY(LE) TESSEL_BINARY(GT) TESSEL_BINARY(GE) TESSEL_BINARY(And) TESSEL_BINARY(Or)
#undef TESSEL_BINARY

struct Not : ExprNode {
  TESSEL_NODE(Not, ExprNode)
  Expr a;
  Not(DType t, Expr a_) : ExprNode(NodeKind::Not, t), a(std::move(a_)) {}
  static Expr make(Expr a);
};

struct Select : ExprNode {
  TESSEL_NODE(Select, ExprNode)
  Expr cond, t, f;
  Select(DType ty, Expr c, Expr t_, Expr f_)
      : ExprNode(NodeKind::Select, ty), cond(std::move(c)), t(std::move(t_)), f(std::move(f_)) {}
  static Expr make(Expr c, Expr t, Expr f);
};

// Skippable wraps a guard's condition that may be dropped (see skippable() in expr.h);
// remove_true_guards replaces it by true once loop partitioning has used it.
// GPU only, made by lowering:
//  - ThreadIndex(d): the hardware index d (0-2 blockIdx.x/y/z, 3-5 threadIdx.x/y/z), int32.
//  - Barrier(): every thread of the block waits here (Evaluate only, never under a
//    condition that depends on the thread).
//  - ThreadAllReduce(value, combiner): the combination of `value` over all threadIdx.x of
//    the block (one group per threadIdx.y/z), the same in every thread; only as the whole
//    value of a Store into a local buffer, which lower_thread_allreduce expands.
//  - ShuffleXor(value, offset, mask): `value` of the lane whose index differs from this one's
//    by xor `offset`, among the warp's lanes in `mask` (CUDA).
// Made by vectorize_loops from a vectorized reduction loop (s = combine(s, f(k))):
//  - VectorReduce(value, combiner): the lanes of `value` combined into one scalar, in a tree
//    (a vectorized reduction's order of operations is its own).
// CPU only, made by a checked build (LowerOptions::check_bounds):
//  - CheckIndex(index, extent, guard, id): `index`; where `guard` holds and the index is
//    outside [0, extent), the program stops with the function's message `id`.
enum class Intrinsic : uint8_t {
  Exp, Log, Sqrt, Rsqrt, Tanh, Sigmoid, Erf, Abs, Pow, Floor, Ceil, Skippable,
  ThreadIndex, Barrier, ThreadAllReduce, ShuffleXor, CheckIndex, VectorReduce,
  Prefetch  // of the cache line its one argument, a Load, would read (no value, never a fault)
};
const char* intrinsic_name(Intrinsic op);

struct Call : ExprNode {
  TESSEL_NODE(Call, ExprNode)
  Intrinsic op;
  std::vector<Expr> args;
  Call(DType t, Intrinsic o, std::vector<Expr> a)
      : ExprNode(NodeKind::Call, t), op(o), args(std::move(a)) {}
  static Expr make(DType t, Intrinsic op, std::vector<Expr> args);
};

// A read of a tensor's element, before storage flattening.
struct TensorLoad : ExprNode {
  TESSEL_NODE(TensorLoad, ExprNode)
  Operation op;
  std::vector<Expr> indices;
  TensorLoad(DType t, Operation o, std::vector<Expr> i)
      : ExprNode(NodeKind::TensorLoad, t), op(std::move(o)), indices(std::move(i)) {}
  static Expr make(Operation op, std::vector<Expr> indices);
};

// A read of a flat buffer; type lanes == index lanes. With a predicate (a boolean vector)
// only the lanes where it holds are read; the others are undefined and touch no memory.
struct Load : ExprNode {
  TESSEL_NODE(Load, ExprNode)
  Var buffer;
  Expr index;
  Expr predicate;  // undefined = every lane
  Load(DType t, Var b, Expr i, Expr p)
      : ExprNode(NodeKind::Load, t), buffer(std::move(b)), index(std::move(i)), predicate(std::move(p)) {}
  static Expr make(DType t, Var buffer, Expr index, Expr predicate = Expr());
};

struct Ramp : ExprNode {
  TESSEL_NODE(Ramp, ExprNode)
  Expr base, stride;
  int lanes;
  Ramp(DType t, Expr b, Expr s, int l)
      : ExprNode(NodeKind::Ramp, t), base(std::move(b)), stride(std::move(s)), lanes(l) {}
  static Expr make(Expr base, Expr stride, int lanes);
};

struct Broadcast : ExprNode {
  TESSEL_NODE(Broadcast, ExprNode)
  Expr value;
  int lanes;
  Broadcast(DType t, Expr v, int l) : ExprNode(NodeKind::Broadcast, t), value(std::move(v)), lanes(l) {}
  static Expr make(Expr value, int lanes);
};

enum class Combiner : uint8_t { Sum, Max, Min, Prod };
const char* combiner_name(Combiner c);
Expr combiner_identity(Combiner c, DType t);
Expr combine(Combiner c, Expr acc, Expr value);

struct Reduce : ExprNode {
  TESSEL_NODE(Reduce, ExprNode)
  Combiner combiner;
  Expr source;
  std::vector<IterVar> axes;
  Expr condition;  // undefined = always
  Expr init;       // undefined = the combiner's identity
  Reduce(DType t, Combiner c, Expr s, std::vector<IterVar> a, Expr cond, Expr i)
      : ExprNode(NodeKind::Reduce, t), combiner(c), source(std::move(s)), axes(std::move(a)),
        condition(std::move(cond)), init(std::move(i)) {}
  static Expr make(Combiner c, Expr source, std::vector<IterVar> axes, Expr cond, Expr init);
};

struct Let : ExprNode {
  TESSEL_NODE(Let, ExprNode)
  Var var;
  Expr value, body;
  Let(DType t, Var v, Expr val, Expr b)
      : ExprNode(NodeKind::Let, t), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
  static Expr make(Var v, Expr value, Expr body);
};

// ---- statements ----

struct LetStmt : StmtNode {
  TESSEL_NODE(LetStmt, StmtNode)
  Var var;
  Expr value;
  Stmt body;
  LetStmt(Var v, Expr val, Stmt b)
      : StmtNode(NodeKind::LetStmt), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
  static Stmt make(Var v, Expr value, Stmt body);
};

enum class ForKind : uint8_t { Serial, Parallel, Vectorized, Unrolled, ThreadBound };
const char* for_kind_name(ForKind k);

struct For : StmtNode {
  TESSEL_NODE(For, StmtNode)
  Var var;
  Expr min, extent;
  ForKind for_kind;
  std::string thread_tag;  // for ThreadBound loops
  Stmt body;
  For(Var v, Expr mn, Expr ext, ForKind k, std::string tag, Stmt b)
      : StmtNode(NodeKind::For), var(std::move(v)), min(std::move(mn)), extent(std::move(ext)),
        for_kind(k), thread_tag(std::move(tag)), body(std::move(b)) {}
  static Stmt make(Var v, Expr min, Expr extent, ForKind k, Stmt body, std::string tag = "");
};

// A write of a flat buffer; with a predicate only the lanes where it holds are written.
struct Store : StmtNode {
  TESSEL_NODE(Store, StmtNode)
  Var buffer;
  Expr value, index;
  Expr predicate;  // undefined = every lane
  Store(Var b, Expr v, Expr i, Expr p)
      : StmtNode(NodeKind::Store), buffer(std::move(b)), value(std::move(v)), index(std::move(i)),
        predicate(std::move(p)) {}
  static Stmt make(Var buffer, Expr value, Expr index, Expr predicate = Expr());
};

struct TensorStore : StmtNode {
  TESSEL_NODE(TensorStore, StmtNode)
  Operation op;
  Expr value;
  std::vector<Expr> indices;
  TensorStore(Operation o, Expr v, std::vector<Expr> i)
      : StmtNode(NodeKind::TensorStore), op(std::move(o)), value(std::move(v)), indices(std::move(i)) {}
  static Stmt make(Operation op, Expr value, std::vector<Expr> indices);
};

// The region [min, min+extent) per dimension of `op`'s tensor that exists inside body.
struct Realize : StmtNode {
  TESSEL_NODE(Realize, StmtNode)
  Operation op;
  std::vector<Expr> mins;
  std::vector<int64_t> extents;
  std::string scope;
  Stmt body;
  Realize(Operation o, std::vector<Expr> m, std::vector<int64_t> e, std::string s, Stmt b)
      : StmtNode(NodeKind::Realize), op(std::move(o)), mins(std::move(m)), extents(std::move(e)),
        scope(std::move(s)), body(std::move(b)) {}
  static Stmt make(Operation op, std::vector<Expr> mins, std::vector<int64_t> extents,
                   std::string scope, Stmt body);
};

struct Allocate : StmtNode {
  TESSEL_NODE(Allocate, StmtNode)
  Var buffer;
  DType dtype;
  int64_t size;  // elements
  std::string scope;
  Stmt body;
  Allocate(Var b, DType t, int64_t n, std::string s, Stmt bd)
      : StmtNode(NodeKind::Allocate), buffer(std::move(b)), dtype(t), size(n), scope(std::move(s)),
        body(std::move(bd)) {}
  static Stmt make(Var buffer, DType t, int64_t size, std::string scope, Stmt body);
};

struct IfThenElse : StmtNode {
  TESSEL_NODE(IfThenElse, StmtNode)
  Expr cond;
  Stmt then_case, else_case;  // else may be undefined
  IfThenElse(Expr c, Stmt t, Stmt e)
      : StmtNode(NodeKind::IfThenElse), cond(std::move(c)), then_case(std::move(t)), else_case(std::move(e)) {}
  static Stmt make(Expr cond, Stmt then_case, Stmt else_case = Stmt());
};

struct Block : StmtNode {
  TESSEL_NODE(Block, StmtNode)
  std::vector<Stmt> stmts;
  explicit Block(std::vector<Stmt> s) : StmtNode(NodeKind::Block), stmts(std::move(s)) {}
  // Flattens nested blocks and drops undefined statements; one statement stays itself.
  static Stmt make(std::vector<Stmt> stmts);
};

struct Evaluate : StmtNode {
  TESSEL_NODE(Evaluate, StmtNode)
  Expr value;
  explicit Evaluate(Expr v) : StmtNode(NodeKind::Evaluate), value(std::move(v)) {}
  static Stmt make(Expr v);
};

// A keyed annotation over a statement, e.g. pragma auto_unroll_max_step.
struct AttrStmt : StmtNode {
  TESSEL_NODE(AttrStmt, StmtNode)
  std::string key;
  int64_t value;
  Stmt body;
  AttrStmt(std::string k, int64_t v, Stmt b)
      : StmtNode(NodeKind::AttrStmt), key(std::move(k)), value(v), body(std::move(b)) {}
  static Stmt make(std::string key, int64_t value, Stmt body);
};
// The AttrStmt key of a loop whose iterations prefetch what the iteration `value` ahead reads
// of a buffer: kPrefetchKey + buffer + "@" + the loop's variable (Stage::prefetch, inject_prefetch).
inline constexpr const char* kPrefetchKey = "prefetch:";

#undef TESSEL_NODE

// ---- operations ----

struct OperationNode {
  enum Kind { Placeholder, Compute };
  Kind kind;
  std::string name;
  std::vector<int64_t> shape;
  DType dtype;
  // Compute only:
  std::vector<IterVar> axis;
  std::vector<IterVar> reduce_axis;
  Expr body;
  std::string tag;
  std::map<std::string, std::string> attrs;

  bool is_compute() const { return kind == Compute; }
  const Reduce* reduction() const { return body.as<Reduce>(); }
  // Tensors read by the body, in first-read order, without repeats.
  std::vector<Operation> inputs() const;
};

Operation make_compute_op(std::string name, std::vector<IterVar> axis, Expr body, std::string tag = "",
                          std::map<std::string, std::string> attrs = {});

// ---- small helpers used everywhere ----

bool is_const_int(const Expr& e, int64_t* value = nullptr);
inline bool is_zero(const Expr& e) { int64_t v; return is_const_int(e, &v) && v == 0; }
inline bool is_one(const Expr& e) { int64_t v; return is_const_int(e, &v) && v == 1; }
Expr const_true();
Expr const_false();
inline bool is_skippable(const Expr& e) {
  const Call* c = e.as<Call>();
  return c && c->op == Intrinsic::Skippable;
}
Expr make_int(int64_t v, DType t = int32);

}  // namespace tessel
