#include "testing.h"

using namespace coil;

TEST(Cat, Smoke) { EXPECT_EQ(cat({ones({2}), zeros({3})}).sizes(), (Shape{5})); }
