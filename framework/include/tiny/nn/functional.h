/// @file nn/functional.h
/// @brief Activations, softmax, dropout and losses (PyTorch's `torch.nn.functional`, usually imported as `F`).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "tiny/generator.h"
#include "tiny/ops.h"
#include "tiny/tensor.h"

namespace tiny::nn::functional {

/// @brief `max(x, 0)`; with `inplace`, x.relu_() and x itself is returned (PyTorch's `F.relu(x, inplace=True)`).
Tensor relu(const Tensor& x, bool inplace = false);
/// @brief GELU; `approximate` is "none" (exact, with erf) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
/// @brief Logistic sigmoid.
Tensor sigmoid(const Tensor& x);
/// @brief Hyperbolic tangent.
Tensor tanh(const Tensor& x);
/// @brief SiLU (swish): x * sigmoid(x) (PyTorch's `F.silu`).
Tensor silu(const Tensor& x);
/// @brief x where x > 0, else negative_slope * x (PyTorch's `F.leaky_relu(x, negative_slope=0.01, inplace=False)`).
///
/// With `inplace`, x is overwritten and returned; its backward reads the
/// result, so, as in PyTorch, that needs negative_slope > 0 when x requires grad.
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01, bool inplace = false);
/// @brief `log(1 + exp(beta * x)) / beta`, and `x` itself where `beta * x > threshold` (PyTorch's `F.softplus`).
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
/// @brief int64 class indices of any shape to one-hot rows, shape + [num_classes] (PyTorch's `F.one_hot`).
///
/// num_classes -1 takes max(index) + 1. A negative index, or one >= num_classes,
/// throws tiny::IndexError naming it.
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);
/// @brief Softmax along `dim`, computed stably (online max and sum).
Tensor softmax(const Tensor& x, int64_t dim);
/// @brief Log-softmax along `dim`, computed stably.
Tensor log_softmax(const Tensor& x, int64_t dim);
/// @brief `x @ weight.T + bias` with weight of shape [out_features, in_features] (bias may be undefined).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

/// @brief Rows of `weight` [num_embeddings, dim] picked by int64 `indices` of any shape (PyTorch's `F.embedding`).
///
/// The result has shape `indices.shape + [dim]`. Its gradient adds each output
/// row into the row it came from (repeated indices accumulate, in index order,
/// so results are deterministic); the row `padding_idx` (when >= 0) gets no
/// gradient. An index outside [0, num_embeddings) throws tiny::IndexError
/// naming it. Unlike PyTorch, `padding_idx` -1 means "none" (no wrap-around).
Tensor embedding(const Tensor& indices, const Tensor& weight, int64_t padding_idx = -1);

/// @brief Normalises over the trailing dimensions `normalized_shape`, then scales and shifts (PyTorch's `F.layer_norm`).
///
/// `(x - mean) / sqrt(var + eps) * weight + bias` with the biased variance;
/// weight and bias (shaped `normalized_shape`) may be undefined.
Tensor layer_norm(const Tensor& x, const IntArrayRef& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

/// @brief Zeroes each element with probability `p` and scales the rest by `1/(1-p)` when `training`.
///
/// The mask comes from Philox (DESIGN.md section 5): the same seed gives the
/// same mask on the CPU and on a GPU, with any number of threads.
///
/// With `inplace` (PyTorch's `inplace=True`), x is multiplied by the mask in
/// place (x.mul_(mask)) and returned: the same values and gradients.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, std::optional<Generator> generator = std::nullopt,
               bool inplace = false);

/// @brief How a loss combines per-sample values.
enum class Reduction {
  None,  ///< one value per sample
  Mean,  ///< the average (PyTorch's default)
  Sum,   ///< the total
  BatchMean,  ///< the total divided by the batch size, input.size(0) (`kl_div` only: PyTorch's "batchmean")
};

/// @brief Options of `cross_entropy` (PyTorch's keyword arguments), set by name:
///
///     F::CrossEntropyOptions().set_weight(class_weights).set_label_smoothing(0.1)
///     // PyTorch: F.cross_entropy(x, y, weight=class_weights, label_smoothing=0.1)
struct CrossEntropyOptions {
  Reduction reduction = Reduction::Mean;  ///< how to combine samples
  int64_t ignore_index = -100;            ///< targets equal to this add nothing and are not counted in the mean
  double label_smoothing = 0.0;           ///< in [0, 1]: mixes the target with the uniform distribution
  Tensor weight = Tensor();               ///< optional [C]: a weight per class (PyTorch's `weight=`)

  /// @brief PyTorch's `reduction=`.
  CrossEntropyOptions& set_reduction(Reduction r) { reduction = r; return *this; }
  /// @brief PyTorch's `ignore_index=`.
  CrossEntropyOptions& set_ignore_index(int64_t i) { ignore_index = i; return *this; }
  /// @brief PyTorch's `label_smoothing=`.
  CrossEntropyOptions& set_label_smoothing(double s) { label_smoothing = s; return *this; }
  /// @brief PyTorch's `weight=`: a [C] tensor of class weights.
  CrossEntropyOptions& set_weight(Tensor w) { weight = std::move(w); return *this; }
};

/// @brief Cross-entropy of logits against class indices or class probabilities (PyTorch's `F.cross_entropy`).
///
/// `logits` is [C], [N, C] or [N, C, d1, d2, ...] (the classes on dimension 1,
/// e.g. a segmentation map). `target` is either int64 class indices of shape
/// [], [N] or [N, d1, ...], or class probabilities ("soft labels") of the same
/// shape and floating dtype as `logits`. With indices, `weight[c]` scales the
/// loss of each sample of class c and the mean divides by the sum of those
/// weights (ignored targets count 0); with probabilities, the loss is
/// -sum_c weight[c] * p_c * log_softmax(x)_c and the mean divides by the
/// number of samples N * d1 * ... . `label_smoothing` mixes the target with the
/// uniform distribution, as PyTorch 1.13 does for both kinds of target.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options = {});
/// @brief Negative log-likelihood of log-probabilities [C], [N, C] or [N, C, d1, ...] at int64 class indices
/// [], [N] or [N, d1, ...] (PyTorch's `F.nll_loss`).
///
/// `weight` (optional, [C]) scales each sample's loss by its class's weight;
/// the mean then divides by the sum of the weights of the samples not ignored.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction = Reduction::Mean,
                int64_t ignore_index = -100, const Tensor& weight = Tensor());
/// @brief Binary cross-entropy of logits against targets in [0, 1], computed stably
/// (PyTorch's `F.binary_cross_entropy_with_logits`).
///
/// loss = -w * [pos_weight * t * log(sigmoid(x)) + (1 - t) * log(1 - sigmoid(x))]
/// with the log-sum-exp trick. `weight` broadcasts to the input's shape;
/// `pos_weight` (one value per class, broadcast along the last dimension)
/// weighs the positive examples (> 1 raises recall).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                                        const Tensor& pos_weight = Tensor(), Reduction reduction = Reduction::Mean);
/// @brief Mean absolute error |input - target| (PyTorch's `F.l1_loss`); the shapes must match.
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
/// @brief Smooth L1: 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (PyTorch's `F.smooth_l1_loss`).
///
/// `beta` must be >= 0; 0 gives the L1 loss.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                      double beta = 1.0);
/// @brief Huber: 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta) (PyTorch's `F.huber_loss`); delta > 0.
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                  double delta = 1.0);
/// @brief Kullback-Leibler divergence of `target` from the distribution whose log-probabilities are `input`
/// (PyTorch's `F.kl_div`).
///
/// Pointwise target * (log(target) - input) (0 where target is 0), or, with
/// `log_target`, exp(target) * (target - input). Use Reduction::BatchMean for
/// the mathematical KL divergence (sum / batch size); Mean averages over every
/// element, as PyTorch's "mean" does.
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
              bool log_target = false);
/// @brief Mean squared error `(input - target)^2`, combined by `reduction`.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

}  // namespace tiny::nn::functional
