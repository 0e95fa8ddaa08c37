#include "graph/eager_destination.h"

namespace coil {

namespace {
struct Offer {
  OpId op{};
  const Tensor* self = nullptr;
};
thread_local Offer tls_offer;
}  // namespace

EagerDestination::EagerDestination(OpId op, const Tensor& self) { tls_offer = {op, &self}; }
EagerDestination::~EagerDestination() { tls_offer = {}; }

std::optional<Tensor> EagerDestination::take(OpId op) {
  if (!tls_offer.self || tls_offer.op != op) return std::nullopt;
  Tensor t = *tls_offer.self;
  tls_offer.self = nullptr;
  return t;
}

}  // namespace coil
