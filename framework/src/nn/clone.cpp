// clone() of the library's modules (LibTorch's Cloneable): build a skeleton of
// the same type and structure, then Module::copy_state_into gives it copies of
// the values. Skeletons with weights are built small and their sizes set
// afterwards, so that cloning (once per replica per DataParallel step) does not
// draw and throw away a full random initialisation.
#include "tiny/nn/nn.h"

namespace tiny::nn {

namespace {
// Builds a skeleton with the random generators left as they were.
template <class M, class... Args>
std::shared_ptr<M> skeleton(Args&&... args) {
  nn::detail::GeneratorStateGuard keep_random_state;
  return std::make_shared<M>(std::forward<Args>(args)...);
}
}  // namespace

std::shared_ptr<Module> Linear::clone(const std::optional<Device>& device) const {
  auto copy = skeleton<Linear>(1, 1, bias.defined());
  copy->in_features = in_features;
  copy->out_features = out_features;
  copy_state_into(*copy, device);
  return copy;
}

std::shared_ptr<Module> Embedding::clone(const std::optional<Device>& device) const {
  auto copy = skeleton<Embedding>(1, 1, -1);
  copy->num_embeddings = num_embeddings;
  copy->embedding_dim = embedding_dim;
  copy->padding_idx = padding_idx;
  copy_state_into(*copy, device);
  return copy;
}

std::shared_ptr<Module> LayerNorm::clone(const std::optional<Device>& device) const {
  auto copy = skeleton<LayerNorm>(normalized_shape, eps, elementwise_affine);  // ones and zeros: nothing random
  copy_state_into(*copy, device);
  return copy;
}

std::shared_ptr<Module> Sequential::clone(const std::optional<Device>& device) const {
  auto copy = std::make_shared<Sequential>();
  for (const auto& m : modules_) copy->push_back(m->clone(device));  // each child clones itself (its own type)
  copy_state_into(*copy, device, /*recurse=*/false);                  // the training mode
  return copy;
}

std::shared_ptr<Module> ModuleList::clone(const std::optional<Device>& device) const {
  auto copy = std::make_shared<ModuleList>();
  for (const auto& m : modules_) copy->push_back(m->clone(device));
  copy_state_into(*copy, device, /*recurse=*/false);
  return copy;
}

std::shared_ptr<Module> ModuleDict::clone(const std::optional<Device>& device) const {
  auto copy = std::make_shared<ModuleDict>();
  for (const auto& item : items_) copy->insert(item.first, item.second->clone(device));
  copy_state_into(*copy, device, /*recurse=*/false);
  return copy;
}

// Layers without parameters: a new one with the same settings (and training mode).
#define TINY_CLONE_STATELESS(Type, ...)                                                  \
  std::shared_ptr<Module> Type::clone(const std::optional<Device>& device) const {       \
    auto copy = std::make_shared<Type>(__VA_ARGS__);                                     \
    copy_state_into(*copy, device);                                                      \
    return copy;                                                                         \
  }
TINY_CLONE_STATELESS(ReLU, inplace)
TINY_CLONE_STATELESS(SiLU)
TINY_CLONE_STATELESS(LeakyReLU, negative_slope, inplace)
TINY_CLONE_STATELESS(Tanh)
TINY_CLONE_STATELESS(Softplus, beta, threshold)
TINY_CLONE_STATELESS(Softmax, dim)
TINY_CLONE_STATELESS(LogSoftmax, dim)
TINY_CLONE_STATELESS(Sigmoid)
TINY_CLONE_STATELESS(GELU, approximate)
TINY_CLONE_STATELESS(Dropout, p, inplace)
TINY_CLONE_STATELESS(Flatten, start_dim, end_dim)
#undef TINY_CLONE_STATELESS

}  // namespace tiny::nn
