// Pass internals: the simplifier, guard removal and the vectorizer, on small programs.
#include "ir/IRMutator.h"
#include "ir/IRPrinter.h"
#include "ir/Simplify.h"
#include "passes/Passes.h"
#include "reference.h"

using namespace tessel;

TEST(Simplify, LinearCancellation) {
  Var io("io"), ii("ii");
  Expr e = (io * 32 + ii) - io * 32;
  EXPECT_EQ(to_string(simplify(e)), "ii");
  EXPECT_EQ(to_string(simplify((io + 3) * 4 - 12)), "(io*4)");
}

TEST(Simplify, DivModWithRanges) {
  Var x("x"), y("y");
  BoundsMap b{{x.get(), {0, 99}}, {y.get(), {0, 15}}};
  EXPECT_EQ(to_string(simplify((x * 16 + y) / 16, &b)), "x");
  EXPECT_EQ(to_string(simplify((x * 16 + y) % 16, &b)), "y");
  EXPECT_EQ(to_string(simplify(y / 16, &b)), "0");
  EXPECT_EQ(to_string(simplify(y % 32, &b)), "y");
  // One quotient over the whole range: a partitioned tail's fused index.
  BoundsMap tail{{x.get(), {0, 42}}};
  EXPECT_EQ(to_string(simplify((x + 516) / 43, &tail)), "12");
  // and its remainder: the last 4 pixels of a 14x14 plane are columns 10 to 13 of one row.
  BoundsMap last4{{x.get(), {0, 3}}};
  EXPECT_EQ(to_string(simplify((x + 192) % 14, &last4)), "(x + 10)");
}

TEST(Simplify, ExactMultiplesDivideWithoutRanges) {
  // A stride-2 read's phase and position, x of any sign: (2x) % 2 is 0 and (2x + 4) / 2 is x + 2.
  Var x("x"), y("y");
  EXPECT_EQ(to_string(simplify((x * 2) % 2)), "0");
  EXPECT_EQ(to_string(simplify((x * 2 + 4) / 2)), "(x + 2)");
  EXPECT_EQ(to_string(simplify((x * 4 + y * 8) / 4)), "(x + (y*2))");
  // Not exact: left as they are without ranges.
  EXPECT_EQ(to_string(simplify((x * 2 + 1) % 2)), "(((x*2) + 1) % 2)");
  EXPECT_EQ(to_string(simplify((x * 2 + y) / 2)), "(((x*2) + y)/2)");
}

TEST(Simplify, NegativeConstantsDivideByTheirFloor) {
  // A padded stride-2 read's column 2x - 1 where x >= 1 (the padding's condition): phase 1 of
  // pair x - 1. Split as 2(x - 1) + 1, not 2x + -1, whose remainder is negative.
  Var x("x"), y("y");
  BoundsMap b{{x.get(), {1, 7}}, {y.get(), {1, 3}}};
  EXPECT_EQ(to_string(simplify((x * 2 - 1) % 2, &b)), "1");
  EXPECT_EQ(to_string(simplify((x * 2 - 1) / 2, &b)), "(x - 1)");
  EXPECT_EQ(to_string(simplify((x * 4 - 3) / 4, &b)), "(x - 1)");
  // The truncated split still comes first: 2x + (y - 1) with y >= 1 needs no x >= 1.
  BoundsMap from0{{x.get(), {0, 7}}, {y.get(), {1, 1}}};
  EXPECT_EQ(to_string(simplify((x * 2 + y - 1) / 2, &from0)), "x");
  // x may be 0: (2x - 1) / 2 is then 0 (truncated), not x - 1; left alone.
  EXPECT_EQ(to_string(simplify((x * 2 - 1) / 2, &from0)), "(((x*2) - 1)/2)");
}

TEST(Simplify, ComparisonsProvedFromLoopRanges) {
  Var io("io"), ii("ii");
  BoundsMap b{{io.get(), {0, 3}}, {ii.get(), {0, 7}}};
  EXPECT_TRUE(can_prove(io * 8 + ii < 32, &b));
  EXPECT_FALSE(can_prove(io * 8 + ii < 31, &b));
  EXPECT_EQ(to_string(simplify(min(io * 8 + ii, 40), &b)), "((io*8) + ii)");
  EXPECT_EQ(to_string(simplify(max(ii - 8, 0), &b)), "0");
}

TEST(Simplify, ConstantFolding) {
  EXPECT_EQ(to_string(simplify(Expr(2.0f) * 3.0f + 1.0f)), "7f");
  EXPECT_EQ(to_string(simplify(select(Expr(3) < 4, Expr(1), Expr(2)))), "1");
  Var x("x");
  EXPECT_EQ(to_string(simplify((x < 3) && (Expr(1) < 2))), "(x < 3)");
}

TEST(Passes, GuardRemovedWhenSplitDivides) {
  Tensor A = placeholder({64}, float32, "A");
  Tensor B = compute({64}, [&](Var i) { return A(i) + 1.0f; }, "B");
  Schedule s({B});
  s[B].split("i", 16);
  EXPECT_EQ(lower(s, {A, B}).str().find("if ("), std::string::npos);
}

TEST(Passes, LoopPartitionPeelsTheTail) {
  Tensor A = placeholder({70}, float32, "A");
  Tensor B = compute({70}, [&](Var i) { return A(i) + 1.0f; }, "B");
  Schedule s({B});
  s[B].split("i", 16);
  std::string ir = lower(s, {A, B}).str();
  // Main part: i.outer in [0, 4) without a guard; the last tile keeps it (6 of 16 rows
  // are too few to pay for another copy).
  EXPECT_NE(ir.find("for (i.outer, 0, 4)"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("if ("), ir.rfind("if (")) << ir;
}

TEST(Passes, LoopPartitionSplitsAFusedLoopBeforeItsLastRowOfTiles) {
  // 70 rows in tiles of 16 fused with 4 column tiles: the row guard fails in the last 4
  // iterations of the fused loop, not only the last one. Both parts stay in the parallel loop, so
  // that the last row of tiles is shared among the threads too.
  Tensor A = placeholder({70, 64}, float32, "A");
  Tensor B = compute({70, 64}, [&](Var i, Var j) { return A(i, j) * 2.0f; }, "B");
  Schedule s({B});
  auto t = s[B].tile("i", "j", 16, 16);
  s[B].parallel(s[B].fuse(t.xo, t.yo));
  s[B].vectorize(t.yi);
  std::string ir = lower(s, {A, B}).str();
  size_t loop = ir.find("parallel (i.outer.j.outer.fused.spread, 0, 20)"), parts = ir.find("if (");
  ASSERT_NE(loop, std::string::npos) << ir;
  EXPECT_NE(ir.find("let i.outer.j.outer.fused = (i.outer.j.outer.fused.spread - i.outer.j.outer.fused.tails)",
                    parts),
            std::string::npos)
      << ir;
  EXPECT_EQ(ir.find("if (", parts + 1), std::string::npos) << ir;  // the one guard: which part an iteration runs
  EXPECT_NE(ir.find("for (i.inner, 0, 6)", ir.find("} else {", parts)), std::string::npos) << ir;
  ref::Buffer a = ref::random({70, 64}, 3);
  ref::Buffer want({70, 64}, float32);
  for (int64_t i = 0; i < a.size(); ++i) want.set(i, a.get(i) * 2);
  ref::expect_close(ref::run(s, {A, B}, {a})[0], want);
}

TEST(Passes, SpreadParallelPartsSharesTheTailAmongTheThreads) {
  // 256 iterations, the last 64 a cheaper part (a 1x1 convolution's 4-pixel tails of 64 blocks of
  // channels): spread, every contiguous share of the loop holds a quarter of tails, and each part
  // keeps its own order.
  Var v("v"), out("out", handle);
  auto mark = [&](int part) { return Store::make(out, make_const(float32, part), v); };
  Stmt loop = For::make(v, make_int(0), make_int(256), ForKind::Parallel, IfThenElse::make(v < 192, mark(0), mark(1)));
  Stmt spread = spread_parallel_parts(loop);
  const For* f = spread.as<For>();
  ASSERT_TRUE(f && f->for_kind == ForKind::Parallel) << to_string(spread);
  const LetStmt* tails = f->body.as<LetStmt>();
  const IfThenElse* parts = tails ? tails->body.as<IfThenElse>() : nullptr;
  ASSERT_TRUE(parts) << to_string(spread);
  // Where iteration u runs: its part and the original iteration it stands for.
  auto iteration = [&](int64_t u) {
    auto at = [&](const Expr& e) {
      Expr q = simplify(substitute(tails->value, f->var, make_int(u)));
      int64_t value = -1;
      EXPECT_TRUE(is_const_int(simplify(substitute(substitute(e, tails->var, q), f->var, make_int(u))), &value));
      return value;
    };
    bool main = at(parts->cond) != 0;
    const LetStmt* let = (main ? parts->then_case : parts->else_case).as<LetStmt>();
    EXPECT_TRUE(let && let->var.same_as(v));
    return std::make_pair(main, at(let->value));
  };
  int64_t next_main = 0, next_tail = 192;
  for (int64_t u = 0; u < 256; ++u) {
    auto [main, was] = iteration(u);
    EXPECT_EQ(was, main ? next_main++ : next_tail++) << "iteration " << u;
    if (u % 64 == 63) EXPECT_EQ(next_tail - 192, (u + 1) / 4) << "tails in the first " << u + 1;
  }
  EXPECT_EQ(next_main, 192);
  EXPECT_EQ(next_tail, 256);
  // A loop of one part, or a serial one, stays as it was.
  Stmt serial = For::make(v, make_int(0), make_int(256), ForKind::Serial, IfThenElse::make(v < 192, mark(0), mark(1)));
  EXPECT_TRUE(spread_parallel_parts(serial).same_as(serial));
}

TEST(Passes, LoopPartitionCountsEachConjunctOfAGuard) {
  // Rows and columns both leave a tail, and one `if` checks both: the row loop still
  // partitions because its main part drops the row check.
  Tensor A = placeholder({37, 29}, float32, "A");
  Tensor B = compute({37, 29}, [&](Var i, Var j) { return A(i, j) + 1.0f; }, "B");
  Schedule s({B});
  auto t = s[B].tile("i", "j", 8, 8);
  s[B].vectorize(t.yi);
  std::string ir = lower(s, {A, B}).str();
  EXPECT_NE(ir.find("for (i.outer, 0, 4)"), std::string::npos) << ir;
  ref::Buffer a = ref::random({37, 29}, 4);
  ref::Buffer want({37, 29}, float32);
  for (int64_t i = 0; i < a.size(); ++i) want.set(i, a.get(i) + 1);
  ref::expect_close(ref::run(s, {A, B}, {a})[0], want);
}

TEST(Passes, VectorizerMakesDenseRampsAndMasks) {
  Var buf("buf", handle), out("out", handle), i("i");
  Stmt loop = For::make(i, make_int(0), make_int(8), ForKind::Vectorized,
                        IfThenElse::make(i < 5, Store::make(out, Load::make(float32, buf, i * 2) + 1.0f, i)));
  std::string v = to_string(simplify(vectorize_loops(loop)));
  EXPECT_NE(v.find("out[ramp(0, 1, 8)]"), std::string::npos) << v;
  EXPECT_NE(v.find("buf[ramp(0, 2, 8)]"), std::string::npos) << v;  // strided: a gather
  EXPECT_NE(v.find(" if (ramp(0, 1, 8) < x8(5))"), std::string::npos) << v;
}

TEST(Passes, PaddedWindowSkipsItsBorderTaps) {
  // A 1-D convolution over a zero-padded input sums only where its window reads the
  // input: the loop over outputs splits into a head, an unguarded main part and a tail,
  // and the head and tail run only their two inner taps.
  Tensor X = placeholder({16}, float32, "X");
  Tensor K = placeholder({3}, float32, "K");
  Tensor Xp = ops::pad(X, {1}, {1}, 0.0, "Xp");
  IterVar r = reduce_axis(3, "r");
  Tensor Y = compute({16}, [&](Var i) {
    Expr at = i + r;
    return sum(Xp(at) * K(r), {r}, skippable(at >= 1 && at < 17));
  }, "Y");
  Schedule s({Y});
  std::string ir = lower(s, {X, K, Y}).str();
  EXPECT_EQ(ir.find("if ("), std::string::npos) << ir;
  EXPECT_EQ(ir.find("skippable"), std::string::npos) << ir;
  EXPECT_NE(ir.find("for (i, 0, 14)"), std::string::npos) << ir;
  size_t head = ir.find("for (r, 0, 2)"), tail = ir.rfind("for (r, 0, 2)");  // two taps each
  EXPECT_LT(head, ir.find("for (i, 0, 14)")) << ir;
  EXPECT_GT(tail, ir.find("for (i, 0, 14)")) << ir;
  ref::Buffer x = ref::random({16}, 5), k = ref::random({3}, 6);
  ref::Buffer want({16}, float32);
  for (int64_t i = 0; i < 16; ++i) {
    double acc = 0;
    for (int64_t t = 0; t < 3; ++t)
      if (i + t - 1 >= 0 && i + t - 1 < 16) acc += x.get(i + t - 1) * k.get(t);
    want.set(i, acc);
  }
  ref::expect_close(ref::run(s, {X, K, Y}, {x, k})[0], want);
}

TEST(Passes, SkippableGuardIsCheckedBeforeALoopAndDroppedOnAStore) {
  // x >= 2 holds for the whole r loop: checked once in front of it. x + r < 9 would be a
  // branch per store: dropped (the store is harmless where it fails).
  Var buf("buf", handle), x("x"), r("r");
  Stmt body = IfThenElse::make(skippable(x >= 2) && skippable(x + r < 9), Store::make(buf, Expr(1.0f), x));
  Stmt loops = For::make(x, make_int(0), make_int(8), ForKind::Serial,
                         For::make(r, make_int(0), make_int(3), ForKind::Serial, body));
  std::string out = to_string(place_skippable_guards(loops));
  size_t check = out.find("if ((x >= 2))"), inner = out.find("for (r");
  ASSERT_NE(check, std::string::npos) << out;
  EXPECT_LT(check, inner) << out;
  EXPECT_EQ(out.find("if (", check + 1), std::string::npos) << out;
  EXPECT_EQ(out.find("skippable"), std::string::npos) << out;
}

TEST(Passes, UnrollUnderPragma) {
  Var buf("buf", handle), i("i"), j("j");
  Stmt inner = For::make(j, make_int(0), make_int(4), ForKind::Serial, Store::make(buf, Expr(1.0f), i * 4 + j));
  Stmt outer = For::make(i, make_int(0), make_int(4), ForKind::Serial, inner);
  std::string small = to_string(unroll_loops(AttrStmt::make("auto_unroll_max_step", 16, outer)));
  EXPECT_EQ(small.find("for ("), std::string::npos) << small;
  std::string partial = to_string(unroll_loops(AttrStmt::make("auto_unroll_max_step", 4, outer)));
  EXPECT_NE(partial.find("for (i"), std::string::npos) << partial;
  EXPECT_EQ(partial.find("for (j"), std::string::npos) << partial;
}

TEST(Readme, ExampleRunsAndIsCorrect) {
  const int64_t n = 256;
  Tensor A = placeholder({n, n}, float32, "A");
  Tensor B = placeholder({n, n}, float32, "B");
  IterVar k = reduce_axis(n, "k");
  Tensor C = compute({n, n}, [&](Var i, Var j) { return sum(A(i, k) * B(k, j), {k}); }, "C");
  Schedule s({C});
  Tensor CC = s.cache_write(C, "local");
  auto t = s[C].tile("i", "j", 64, 32);
  Axis block = s[C].fuse(t.xo, t.yo);
  s[C].parallel(block);
  auto [jo, ji] = s[C].split(t.yi, 16);
  s[C].vectorize(ji);
  s[CC].compute_at(s[C], block);
  auto [cj, cji] = s[CC].split("j", 16);
  s[CC].reorder({"k", "i", cj, cji});
  s[CC].vectorize(cji);
  ref::Buffer a = ref::random({n, n}, 1), b = ref::random({n, n}, 2);
  ref::expect_close(ref::run(s, {A, B, C}, {a, b})[0], ref::matmul(a, b));
}
