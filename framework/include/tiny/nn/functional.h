/// @file nn/functional.h
/// @brief Activations, softmax, dropout and losses (PyTorch's `torch.nn.functional`, usually imported as `F`).
#pragma once

#include <optional>
#include <string>

#include "tiny/generator.h"
#include "tiny/ops.h"
#include "tiny/tensor.h"

namespace tiny::nn::functional {

/// @brief `max(x, 0)`.
Tensor relu(const Tensor& x);
/// @brief GELU; `approximate` is "none" (exact, with erf) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
/// @brief Logistic sigmoid.
Tensor sigmoid(const Tensor& x);
/// @brief Hyperbolic tangent.
Tensor tanh(const Tensor& x);
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
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, std::optional<Generator> generator = std::nullopt);

/// @brief How a loss combines per-sample values.
enum class Reduction {
  None,  ///< one value per sample
  Mean,  ///< the average (PyTorch's default)
  Sum,   ///< the total
};

/// @brief Options of `cross_entropy` (PyTorch's keyword arguments).
struct CrossEntropyOptions {
  Reduction reduction = Reduction::Mean;  ///< how to combine samples
  int64_t ignore_index = -100;            ///< targets equal to this add nothing and are not counted in the mean
  double label_smoothing = 0.0;           ///< in [0, 1]: mixes the target with the uniform distribution
};

/// @brief Cross-entropy between logits [N, C] (or [C]) and class indices [N] (or []), int64.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options = {});
/// @brief Negative log-likelihood of log-probabilities [N, C] at class indices [N].
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction = Reduction::Mean,
                int64_t ignore_index = -100);
/// @brief Mean squared error `(input - target)^2`, combined by `reduction`.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

}  // namespace tiny::nn::functional
