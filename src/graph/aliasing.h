// Which nodes of a graph share storage: view ops (and contiguous, which returns its input when
// that is contiguous already) and getitems alias their input; other calls allocate.
#pragma once

#include <functional>

#include "graph/graph.h"

namespace coil {

// Whether `n`'s value is (a view of) its first argument's storage: a getitem, a view op, or
// contiguous.
bool aliases_its_input(const Node& n);
// The node that allocated the storage `n`'s value lives in (`n` itself unless it aliases).
const Node* storage_root(const Node* n);
// Whether some user of `n`, or of a value aliasing it, satisfies `pred`.
bool any_alias_user(const Node* n, const std::function<bool(const Node&)>& pred);

}  // namespace coil
