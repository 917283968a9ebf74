// DTR's bookkeeping without the engine: scores by hand, equivalence classes, locks, and which
// buffers may be evicted at all.
#include <gtest/gtest.h>

#include "sim/policy/impl/dtr_core.h"

using namespace memsim;

namespace {

Op unit_op(const std::string& name, std::vector<BufferId> in, std::vector<BufferId> out) {
  Op op;
  op.name = name;
  op.kind = "matmul";
  op.inputs = std::move(in);
  op.outputs = std::move(out);
  return op;
}

// x (persistent) -f0-> a -f1-> b -f2-> c -f3-> d, then k reads all four (a backward).
// Sizes 100, 200, 300, 400 B; costs 1, 2, 3, 4 (the op's index + 1).
struct Chain {
  Trace t;
  Liveness l;
  BufferId x, a, b, c, d;
  Chain() {
    t.name = "chain";
    x = t.add_buffer("x", 10, Category::weight, true);
    a = t.add_buffer("a", 100, Category::activation);
    b = t.add_buffer("b", 200, Category::activation);
    c = t.add_buffer("c", 300, Category::activation);
    d = t.add_buffer("d", 400, Category::activation);
    BufferId out = t.add_buffer("out", 1, Category::activation);
    t.add_op(unit_op("f0", {x}, {a}));
    t.add_op(unit_op("f1", {a}, {b}));
    t.add_op(unit_op("f2", {b}, {c}));
    t.add_op(unit_op("f3", {c}, {d}));
    t.add_op(unit_op("k", {d, c, b, a}, {out}));
    l = compute_liveness(t);
  }
  // f_i runs from time i to i + 1 (times in seconds here).
  DtrCore run_forward(DtrHeuristic h) {
    DtrCore core(t, l, {1, 2, 3, 4, 5}, h);
    for (OpId i = 0; i < 4; ++i) {
      core.op_begins(i, i, false);
      core.op_ends(i, i + 1.0, false);
    }
    return core;
  }
};

}  // namespace

TEST(DtrCore, ScoreIsCostOverSizeTimesStaleness) {
  Chain ch;
  DtrCore core = ch.run_forward(DtrHeuristic::full);
  // At t = 10: a last accessed at 1 (read by f1, issued then), cost 1, 100 B, staleness 9;
  // d was made by f3, done at 4.
  EXPECT_DOUBLE_EQ(core.score(ch.a, 10), 1.0 / (100 * 9));
  EXPECT_DOUBLE_EQ(core.score(ch.b, 10), 2.0 / (200 * 8));
  EXPECT_DOUBLE_EQ(core.score(ch.d, 10), 4.0 / (400 * 6));
  // The smallest h: a (1/900) vs b (1/800) vs c (1/700) vs d (1/600).
  auto all = [](BufferId) { return true; };
  EXPECT_EQ(core.choose(10, all), ch.a);
}

TEST(DtrCore, EvictedNeighboursAddTheirClassCost) {
  Chain ch;
  DtrCore core = ch.run_forward(DtrHeuristic::full);
  core.evicted(ch.b);
  // a's neighbour b is evicted: e*(a) = c(b) = 2.
  EXPECT_DOUBLE_EQ(core.score(ch.a, 10), (1.0 + 2.0) / (100 * 9));
  core.evicted(ch.c);
  // b and c are one class now (cost 5): a sees it through b, d through c, each once.
  EXPECT_DOUBLE_EQ(core.score(ch.a, 10), (1.0 + 5.0) / (100 * 9));
  EXPECT_DOUBLE_EQ(core.score(ch.d, 10), (4.0 + 5.0) / (400 * 6));
  // Remaking b (f1 re-run) takes its cost out of the class: d sees c's 3 alone.
  core.op_begins(1, 10, true);
  core.op_ends(1, 11, true);
  EXPECT_FALSE(core.is_evicted(ch.b));
  EXPECT_DOUBLE_EQ(core.score(ch.d, 11), (4.0 + 3.0) / (400 * 7));
  // b was remade for an op not yet run: it stays locked until something reads it.
  EXPECT_TRUE(core.is_remade_locked(ch.b));
  core.op_begins(2, 11, true);
  core.op_ends(2, 12, true);  // f2 reads b, remakes c
  EXPECT_FALSE(core.is_remade_locked(ch.b));
  EXPECT_TRUE(core.is_remade_locked(ch.c));
}

TEST(DtrCore, LocalCountsOnlyImmediateNeighbours) {
  Chain ch;
  DtrCore core = ch.run_forward(DtrHeuristic::local);
  core.evicted(ch.b);
  core.evicted(ch.c);
  // a's only evicted neighbour is b (cost 2); c, beyond it, does not count.
  EXPECT_DOUBLE_EQ(core.score(ch.a, 10), (1.0 + 2.0) / (100 * 9));
}

TEST(DtrCore, ABufferRemadeForAnOpIsAsStaleAsTheRequest) {
  // k is issued at 10 and needs b, evicted: f1 re-runs from 10 to 12 (reading a) and remakes
  // b. Both count as accessed at 10, when k asked for them, not when the re-run ended: at
  // 14, staleness 4 for both (a: cost 1, 100 B; b: cost 2, 200 B).
  Chain ch;
  DtrCore core = ch.run_forward(DtrHeuristic::lru);
  core.evicted(ch.b);
  core.op_begins(4, 10, false);
  core.op_begins(1, 10, true);
  core.op_ends(1, 12, true);
  EXPECT_DOUBLE_EQ(core.score(ch.a, 14), 1.0 / 4);
  EXPECT_DOUBLE_EQ(core.score(ch.b, 14), 1.0 / 4);
}

TEST(DtrCore, LruAndLargest) {
  Chain ch;
  auto all = [](BufferId) { return true; };
  DtrCore lru = ch.run_forward(DtrHeuristic::lru);
  EXPECT_EQ(lru.choose(10, all), ch.a);  // accessed last at 1
  DtrCore largest = ch.run_forward(DtrHeuristic::largest);
  EXPECT_EQ(largest.choose(10, all), ch.d);  // 400 B
}

TEST(DtrCore, LockedAndNonResidentBuffersAreNotChosen) {
  Chain ch;
  DtrCore core = ch.run_forward(DtrHeuristic::full);
  core.op_begins(4, 10, false);  // k reads a, b, c, d: all locked
  auto all = [](BufferId) { return true; };
  EXPECT_EQ(core.choose(10, all), std::nullopt);
  DtrCore other = ch.run_forward(DtrHeuristic::full);
  auto not_a = [&](BufferId b) { return b != ch.a; };  // a lives in another tier
  EXPECT_EQ(other.choose(10, not_a), ch.b);
}

TEST(DtrCore, EvictableWhenWhatItNeedsLastsOrCanBeRemade) {
  // x (input, not persistent) -> p -relu-> r; p dies at relu, r is read later by k: r can
  // never be remade (p would need x, gone). q, made from a persistent weight, can be remade
  // at any time; s, made from q, too: q is dropped rather than freed at relu2, and remade
  // for s if s is.
  Trace t;
  BufferId x = t.add_buffer("x", 10, Category::input);
  BufferId w = t.add_buffer("w", 10, Category::weight, true);
  BufferId p = t.add_buffer("p", 10, Category::activation);
  BufferId r = t.add_buffer("r", 10, Category::activation);
  BufferId q = t.add_buffer("q", 10, Category::activation);
  BufferId s = t.add_buffer("s", 10, Category::activation);
  BufferId out = t.add_buffer("out", 10, Category::activation);
  t.add_op(unit_op("make_p", {x}, {p}));   // from a non-persistent input that dies here
  t.add_op(unit_op("relu", {p}, {r}));
  t.add_op(unit_op("make_q", {w}, {q}));   // from a persistent weight
  t.add_op(unit_op("relu2", {q}, {s}));
  t.add_op(unit_op("k", {r, s}, {out}));
  const DtrRemakeRules rules = dtr_remake_rules(t, compute_liveness(t));
  EXPECT_FALSE(rules.evictable[x]);  // no producer
  EXPECT_FALSE(rules.evictable[w]);  // persistent
  EXPECT_FALSE(rules.evictable[p]);  // needs x, which dies first
  EXPECT_FALSE(rules.evictable[r]);  // needs p, which dies first and cannot be remade then
  EXPECT_TRUE(rules.evictable[q]);
  EXPECT_TRUE(rules.evictable[s]);
  EXPECT_TRUE(rules.drop_at_death[q]);   // s may need it after relu2
  EXPECT_FALSE(rules.drop_at_death[s]);  // nothing needs s after k
  EXPECT_FALSE(rules.drop_at_death[p]);
}

TEST(DtrCore, ABufferRemadeForAnOpGoesLast) {
  Chain ch;
  DtrCore core = ch.run_forward(DtrHeuristic::largest);
  core.evicted(ch.b);
  core.op_begins(1, 10, true);
  core.op_ends(1, 11, true);  // b remade, for an op that has not read it yet
  auto a_or_b = [&](BufferId x) { return x == ch.a || x == ch.b; };
  EXPECT_EQ(core.choose(20, a_or_b), ch.a);  // b is larger, but held for its reader
  auto only_b = [&](BufferId x) { return x == ch.b; };
  EXPECT_EQ(core.choose(20, only_b), ch.b);  // unless nothing else is left
  EXPECT_TRUE(core.outer_op_done().empty());
  EXPECT_FALSE(core.is_remade_locked(ch.b));
}
