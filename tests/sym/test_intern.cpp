// Hash-consing and the deterministic order: equal structure is the same node, built in any
// order and from any thread; operands sort by structure, never by address.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <unordered_set>
#include <vector>

#include "sym/expr.h"

using namespace coil::sym;

TEST(SymIntern, EqualStructureIsTheSameNode) {
  Expr x = index_var("x", 8), y = index_var("y", 8);
  EXPECT_EQ(constant(5), constant(5));
  EXPECT_EQ(x, var("x", {0, 7}));
  EXPECT_NE(x, var("x", {0, 8}));  // another range: another variable
  EXPECT_EQ(x + y, y + x);
  EXPECT_EQ((x + 1) * 2, x * 2 + 2);
  EXPECT_EQ(floordiv(x * 8 + y, 4), floordiv(y + x * 8, 4));
  EXPECT_EQ((x + y).get(), (y + x).get());
  EXPECT_EQ((x + y)->hash(), std::hash<Expr>()(y + x));
  std::unordered_set<Expr> set{x + y, y + x, x * y};
  EXPECT_EQ(set.size(), 2u);
}

TEST(SymIntern, NullIsNoExpression) {
  Expr none;
  EXPECT_FALSE(none);
  EXPECT_EQ(none, nullptr);
  EXPECT_TRUE(constant(0));
}

TEST(SymIntern, OrderIsByStructureNotAddress) {
  // Created in the opposite order of their names, so address order disagrees with name order.
  Expr late = index_var("order_b", 4);
  Expr early = index_var("order_a", 4);
  EXPECT_EQ(to_string(late + early), "order_a + order_b");
  EXPECT_EQ(to_string(late * early), "order_a*order_b");
  EXPECT_TRUE(less(early, late));
  EXPECT_FALSE(less(late, early));
  EXPECT_FALSE(less(early, early));
  // Kinds order first, then constants, names, ranges and operands.
  Expr narrow = var("order_a", {0, 2});
  EXPECT_TRUE(less(constant(7), early));
  EXPECT_TRUE(less(constant(-1), constant(7)));
  EXPECT_TRUE(less(narrow, early));
  EXPECT_TRUE(less(floordiv(early, 2), floordiv(early, 3)));
  std::vector<Expr> sorted{mod(late, 3), late, constant(2), early * late, early};
  std::sort(sorted.begin(), sorted.end(), less);
  std::vector<Expr> want{constant(2), early, late, early * late, mod(late, 3)};
  EXPECT_EQ(sorted, want);
}

TEST(SymIntern, ThreadsShareOneTable) {
  auto build = [](std::vector<Expr>* out) {
    Expr a = index_var("thread_a", 64), b = index_var("thread_b", 16);
    for (int i = 1; i <= 300; ++i) out->push_back(mod(floordiv(a * i + b, 1 + i % 7), 5) + i);
  };
  std::vector<Expr> first, second;
  std::thread t1(build, &first), t2(build, &second);
  t1.join();
  t2.join();
  EXPECT_EQ(first, second);
}
