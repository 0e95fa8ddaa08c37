#include "testing.h"

using namespace coil;

TEST(View, Smoke) { EXPECT_EQ(arange(6).view({2, -1}).sizes(), (Shape{2, 3})); }
