// The layers of tiny::nn: Linear, the activations, Dropout, Flatten, Sequential, Embedding, LayerNorm, the losses.
#include <cmath>
#include <string>

#include "amp/autocast_policy.h"
#include "tiny/autograd.h"
#include "tiny/nn/nn.h"
#include "tiny/ops.h"

namespace tiny::nn {

namespace F = functional;

// ---- Linear -----------------------------------------------------------------------

Linear::Linear(int64_t in_features_, int64_t out_features_, bool with_bias)
    : in_features(in_features_), out_features(out_features_) {
  TINY_CHECK(in_features >= 0 && out_features >= 0, ValueError, "Linear: in_features and out_features must be ",
             "non-negative, got in_features=", in_features, " and out_features=", out_features);
  weight = register_parameter("weight", empty({out_features, in_features}));
  bias = register_parameter("bias", with_bias ? empty({out_features}) : Tensor());
  reset_parameters();
}

void Linear::reset_parameters() {
  // PyTorch: kaiming_uniform_(weight, a=sqrt(5)) is uniform in ±1/sqrt(fan_in); the bias uses the same bound.
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) { return F::linear(x, weight, bias); }

std::string Linear::extra_repr() const {
  return tiny::detail::concat("in_features=", in_features, ", out_features=", out_features,
                        ", bias=", detail::python_bool(bias.defined()));
}

// ---- activations, Dropout, Flatten ----------------------------------------------------

Tensor ReLU::forward(const Tensor& x) { return F::relu(x, inplace); }
Tensor SiLU::forward(const Tensor& x) { return F::silu(x); }
Tensor LeakyReLU::forward(const Tensor& x) { return F::leaky_relu(x, negative_slope, inplace); }

GELU::GELU(std::string approximate_) : approximate(std::move(approximate_)) {
  TINY_CHECK(approximate == "none" || approximate == "tanh", ValueError,
             "GELU: approximate must be 'none' or 'tanh', got '", approximate, "'");
}
Tensor GELU::forward(const Tensor& x) { return F::gelu(x, approximate); }
std::string GELU::extra_repr() const { return "approximate='" + approximate + "'"; }

Tensor Softplus::forward(const Tensor& x) { return F::softplus(x, beta, threshold); }
std::string Softplus::extra_repr() const {
  return "beta=" + detail::python_float_repr(beta) + ", threshold=" + detail::python_float_repr(threshold);
}
Tensor Softmax::forward(const Tensor& x) { return F::softmax(x, dim); }
std::string Softmax::extra_repr() const { return tiny::detail::concat("dim=", dim); }
Tensor LogSoftmax::forward(const Tensor& x) { return F::log_softmax(x, dim); }
std::string LogSoftmax::extra_repr() const { return tiny::detail::concat("dim=", dim); }
Tensor Tanh::forward(const Tensor& x) { return F::tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) { return F::sigmoid(x); }

Dropout::Dropout(double p_, bool inplace_) : p(p_), inplace(inplace_) {
  TINY_CHECK(p >= 0.0 && p <= 1.0, ValueError, "dropout probability has to be between 0 and 1, but got ", p);
}
Tensor Dropout::forward(const Tensor& x) { return F::dropout(x, p, is_training(), std::nullopt, inplace); }
std::string Dropout::extra_repr() const {
  return "p=" + detail::python_float_repr(p) + (inplace ? ", inplace=True" : ", inplace=False");
}

Flatten::Flatten(int64_t start_dim_, int64_t end_dim_) : start_dim(start_dim_), end_dim(end_dim_) {}
Tensor Flatten::forward(const Tensor& x) {
  TINY_CHECK(start_dim < 0 || x.dim() > start_dim || x.dim() == 0, IndexError, "Flatten(", extra_repr(),
             ") got an input of shape ", shape_str(x.sizes()), ", which has no dimension ", start_dim,
             ": it keeps the dimensions before start_dim (the batch), so give one sample a batch dimension first "
             "(x.unsqueeze(0) makes it ", shape_str(x.unsqueeze(0).sizes()), ")");
  return x.flatten(start_dim, end_dim);
}
std::string Flatten::extra_repr() const { return tiny::detail::concat("start_dim=", start_dim, ", end_dim=", end_dim); }

// ---- Sequential -------------------------------------------------------------------------

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

std::shared_ptr<Module> Sequential::operator[](int64_t index) const {
  const auto n = static_cast<int64_t>(modules_.size());
  TINY_CHECK(index >= -n && index < n, IndexError, "index ", index, " is out of range for a Sequential of ", n,
             " module", n == 1 ? "" : "s");
  return modules_[static_cast<size_t>(index < 0 ? index + n : index)];
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& m : modules_) y = (*m)(y);  // with each child's hooks, as PyTorch's Sequential
  return y;
}

// ---- ModuleList, ModuleDict ------------------------------------------------------------

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  TINY_CHECK(module != nullptr, ValueError, "ModuleList::push_back: the module is null (make it with std::make_shared)");
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

std::shared_ptr<Module> ModuleList::operator[](int64_t index) const {
  const auto n = static_cast<int64_t>(modules_.size());
  TINY_CHECK(index >= -n && index < n, IndexError, "index ", index, " is out of range for a ModuleList of ", n,
             " module", n == 1 ? "" : "s");
  return modules_[static_cast<size_t>(index < 0 ? index + n : index)];
}

Tensor ModuleList::forward(const Tensor& /*x*/) {
  TINY_THROW(NotImplemented, "ModuleList has no forward (as in PyTorch): call its modules from your own module's "
             "forward, e.g. `for (const auto& m : *layers) h = (*m)(h);`, or use nn::Sequential to chain them");
}

ModuleDict::ModuleDict(std::initializer_list<std::pair<std::string, std::shared_ptr<Module>>> items) {
  for (const auto& item : items) insert(item.first, item.second);
}

void ModuleDict::insert(const std::string& key, std::shared_ptr<Module> module) {
  TINY_CHECK(module != nullptr, ValueError, "ModuleDict::insert: the module for '", key, "' is null");
  register_module(key, module);  // checks the name (empty, dotted, taken)
  items_.emplace_back(key, std::move(module));
}

bool ModuleDict::contains(const std::string& key) const {
  for (const auto& item : items_) {
    if (item.first == key) return true;
  }
  return false;
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& item : items_) out.push_back(item.first);
  return out;
}

std::shared_ptr<Module> ModuleDict::operator[](const std::string& key) const {
  for (const auto& item : items_) {
    if (item.first == key) return item.second;
  }
  std::string known;
  for (const auto& item : items_) known += (known.empty() ? "'" : ", '") + item.first + "'";
  TINY_THROW(IndexError, "ModuleDict has no module named '", key, "'; its keys are: ",
             known.empty() ? "(none, it is empty)" : known);
}

Tensor ModuleDict::forward(const Tensor& /*x*/) {
  TINY_THROW(NotImplemented, "ModuleDict has no forward (as in PyTorch): call the module you need from your own "
             "module's forward, e.g. `(*(*heads)[\"digits\"])(h)`");
}

// ---- Embedding ----------------------------------------------------------------------------

Embedding::Embedding(int64_t num_embeddings_, int64_t embedding_dim_, int64_t padding_idx_)
    : num_embeddings(num_embeddings_), embedding_dim(embedding_dim_), padding_idx(padding_idx_) {
  TINY_CHECK(num_embeddings >= 0 && embedding_dim >= 0, ValueError, "Embedding: num_embeddings and embedding_dim ",
             "must be non-negative, got ", num_embeddings, " and ", embedding_dim);
  TINY_CHECK(padding_idx == -1 || (padding_idx >= 0 && padding_idx < num_embeddings), ValueError,
             "Padding_idx must be within num_embeddings: got padding_idx=", padding_idx, " for num_embeddings=",
             num_embeddings, " (use -1 for no padding row)");
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  reset_parameters();
}

void Embedding::reset_parameters() {
  init::normal_(weight);
  if (padding_idx >= 0) {
    NoGradGuard no_grad;
    weight.select(0, padding_idx).fill_(0);
  }
}

Tensor Embedding::forward(const Tensor& indices) { return F::embedding(indices, weight, padding_idx); }

std::string Embedding::extra_repr() const {
  std::string s = tiny::detail::concat(num_embeddings, ", ", embedding_dim);
  if (padding_idx >= 0) s += tiny::detail::concat(", padding_idx=", padding_idx);
  return s;
}

// ---- LayerNorm ------------------------------------------------------------------------------

LayerNorm::LayerNorm(IntArrayRef normalized_shape_, double eps_, bool elementwise_affine_)
    : normalized_shape(std::move(normalized_shape_)), eps(eps_), elementwise_affine(elementwise_affine_) {
  for (int64_t s : normalized_shape) {
    TINY_CHECK(s >= 0, ValueError, "LayerNorm: normalized_shape must not hold negative sizes, got ",
               shape_str(normalized_shape));
  }
  if (elementwise_affine) {
    weight = register_parameter("weight", empty(normalized_shape));
    bias = register_parameter("bias", empty(normalized_shape));
  } else {
    weight = register_parameter("weight", Tensor());
    bias = register_parameter("bias", Tensor());
  }
  reset_parameters();
}

LayerNorm::LayerNorm(int64_t normalized_size, double eps_, bool elementwise_affine_)
    : LayerNorm(IntArrayRef{normalized_size}, eps_, elementwise_affine_) {}

void LayerNorm::reset_parameters() {
  if (!elementwise_affine) return;
  init::ones_(weight);
  init::zeros_(bias);
}

Tensor LayerNorm::forward(const Tensor& x) { return F::layer_norm(x, normalized_shape, weight, bias, eps); }

std::string LayerNorm::extra_repr() const {
  // Python prints a tuple: (5,) or (4, 5).
  std::string shape = "(";
  for (size_t i = 0; i < normalized_shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(normalized_shape[i]);
  shape += normalized_shape.size() == 1 ? ",)" : ")";
  return shape + ", eps=" + detail::python_float_repr(eps) +
         ", elementwise_affine=" + detail::python_bool(elementwise_affine);
}

// ---- losses -------------------------------------------------------------------------------------

Tensor Loss::forward(const Tensor& /*input*/) {
  TINY_THROW(NotImplemented, name(), " needs an input and a target: call loss(input, target)");
}

CrossEntropyLoss::CrossEntropyLoss(CrossEntropyOptions options_) : options(std::move(options_)) {}
CrossEntropyLoss::CrossEntropyLoss(Tensor weight) : options(CrossEntropyOptions().set_weight(std::move(weight))) {}
Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  return F::cross_entropy(input, target, options);
}

MSELoss::MSELoss(Reduction reduction_) : reduction(reduction_) {}
Tensor MSELoss::forward(const Tensor& input, const Tensor& target) { return F::mse_loss(input, target, reduction); }

NLLLoss::NLLLoss(Reduction reduction_, int64_t ignore_index_, Tensor weight_)
    : reduction(reduction_), ignore_index(ignore_index_), weight(std::move(weight_)) {}
Tensor NLLLoss::forward(const Tensor& input, const Tensor& target) {
  return F::nll_loss(input, target, reduction, ignore_index, weight);
}

BCEWithLogitsLoss::BCEWithLogitsLoss(Tensor weight_, Reduction reduction_, Tensor pos_weight_)
    : ReducedLoss(reduction_), weight(std::move(weight_)), pos_weight(std::move(pos_weight_)) {}
Tensor BCEWithLogitsLoss::forward(const Tensor& input, const Tensor& target) {
  return F::binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction);
}
Tensor L1Loss::forward(const Tensor& input, const Tensor& target) { return F::l1_loss(input, target, reduction); }
Tensor SmoothL1Loss::forward(const Tensor& input, const Tensor& target) {
  return F::smooth_l1_loss(input, target, reduction, beta);
}
Tensor HuberLoss::forward(const Tensor& input, const Tensor& target) {
  return F::huber_loss(input, target, reduction, delta);
}
Tensor KLDivLoss::forward(const Tensor& input, const Tensor& target) {
  return F::kl_div(input, target, reduction, log_target);
}

}  // namespace tiny::nn

namespace tiny::nn::functional {

Tensor layer_norm(const Tensor& x_in, const IntArrayRef& normalized_shape, const Tensor& weight_in,
                  const Tensor& bias_in, double eps) {
  // In autocast's float32 list: statistics of 16-bit activations are taken in float32.
  const Tensor x = amp::detail::upcast(x_in), weight = amp::detail::upcast(weight_in),
               bias = amp::detail::upcast(bias_in);
  const auto k = static_cast<int64_t>(normalized_shape.size());
  bool fits = k >= 1 && x.dim() >= k;
  for (int64_t i = 0; fits && i < k; ++i) fits = x.size(x.dim() - k + i) == normalized_shape[static_cast<size_t>(i)];
  TINY_CHECK(fits, ShapeError, "Given normalized_shape=", shape_str(normalized_shape), ", expected input with shape [*",
             [&] {
               std::string s;
               for (int64_t v : normalized_shape) s += ", " + std::to_string(v);
               return s;
             }(),
             "], but got input of size", shape_str(x.sizes()));
  TINY_CHECK(x.is_floating_point(), DtypeError, "layer_norm: expected a floating-point input, got ",
             dtype_name(x.dtype()));
  TINY_CHECK(!weight.defined() || weight.sizes() == normalized_shape, ShapeError, "layer_norm: weight of shape ",
             shape_str(weight.defined() ? weight.sizes() : IntArrayRef{}), " does not match normalized_shape ",
             shape_str(normalized_shape));
  TINY_CHECK(!bias.defined() || bias.sizes() == normalized_shape, ShapeError, "layer_norm: bias of shape ",
             shape_str(bias.defined() ? bias.sizes() : IntArrayRef{}), " does not match normalized_shape ",
             shape_str(normalized_shape));
  IntArrayRef dims;
  for (int64_t i = 0; i < k; ++i) dims.push_back(x.dim() - k + i);
  const Tensor centered = x - x.mean(dims, /*keepdim=*/true);
  const Tensor var = (centered * centered).mean(dims, /*keepdim=*/true);  // biased, as PyTorch's layer_norm
  Tensor y = centered / (var + eps).sqrt();
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

}  // namespace tiny::nn::functional
