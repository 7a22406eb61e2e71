#include "tiny/generator.h"

#include <mutex>
#include <utility>
#include <vector>

namespace tiny {

// One mutex guards seed and offset together: manual_seed and set_state change
// both, and a reserve() racing with them must see a consistent pair.
struct Generator::Impl {
  std::mutex mutex;
  uint64_t seed;
  uint64_t offset = 0;

  explicit Impl(uint64_t s) : seed(s) {}
};

Generator::Generator(uint64_t seed) : impl_(std::make_shared<Impl>(seed)) {}

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->seed = seed;
  impl_->offset = 0;
}

uint64_t Generator::initial_seed() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->seed;
}

PhiloxState Generator::get_state() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return {impl_->seed, impl_->offset};
}

void Generator::set_state(PhiloxState state) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->seed = state.seed;
  impl_->offset = state.offset;
}

PhiloxState Generator::reserve(uint64_t counters) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  PhiloxState taken{impl_->seed, impl_->offset};
  impl_->offset += counters;
  return taken;
}

namespace {

// The default generators tiny::manual_seed walks. Device backends add theirs
// through detail::register_default_generator when they create them, so this
// file never needs to know which backends exist.
struct DefaultRegistry {
  std::mutex mutex;
  std::vector<Generator> generators;
  bool seeded = false;  // whether tiny::manual_seed has run, and with what
  uint64_t last_seed = 0;
};

// Leaked on purpose: random ops may run from static destructors or detached
// threads at exit, and must never find the registry already destroyed.
DefaultRegistry& registry() {
  static DefaultRegistry* r = new DefaultRegistry();
  return *r;
}

}  // namespace

void detail::register_default_generator(Generator generator) {
  DefaultRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.seeded) generator.manual_seed(r.last_seed);
  r.generators.push_back(std::move(generator));
}

Generator& default_cpu_generator() {
  // Leaked for the same reason as the registry.
  static Generator* gen = [] {
    auto* g = new Generator(default_rng_seed);
    detail::register_default_generator(*g);
    return g;
  }();
  return *gen;
}

void manual_seed(uint64_t seed) {
  // The CPU generator always exists, so seeding never depends on whether a
  // CPU random op happened to run first.
  default_cpu_generator();
  DefaultRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.seeded = true;
  r.last_seed = seed;
  for (Generator& g : r.generators) g.manual_seed(seed);
}

}  // namespace tiny
