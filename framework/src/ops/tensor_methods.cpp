// The Tensor methods that forward to the free functions of tiny/ops.h
// (a.add(b) is tiny::add(a, b)), as PyTorch's Tensor methods call torch.*.
#include "tiny/ops.h"

namespace tiny {

Tensor Tensor::add(const Tensor& other, const Scalar& alpha) const { return tiny::add(*this, other, alpha); }
Tensor Tensor::sub(const Tensor& other, const Scalar& alpha) const { return tiny::sub(*this, other, alpha); }
Tensor Tensor::mul(const Tensor& other) const { return tiny::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return tiny::div(*this, other); }
Tensor Tensor::add(const Scalar& other) const { return tiny::add(*this, other); }
Tensor Tensor::sub(const Scalar& other) const { return tiny::sub(*this, other); }
Tensor Tensor::mul(const Scalar& other) const { return tiny::mul(*this, other); }
Tensor Tensor::div(const Scalar& other) const { return tiny::div(*this, other); }
Tensor Tensor::pow(const Scalar& exponent) const { return tiny::pow(*this, exponent); }
Tensor Tensor::pow(const Tensor& exponent) const { return tiny::pow(*this, exponent); }
Tensor Tensor::neg() const { return tiny::neg(*this); }
Tensor Tensor::exp() const { return tiny::exp(*this); }
Tensor Tensor::log() const { return tiny::log(*this); }
Tensor Tensor::sqrt() const { return tiny::sqrt(*this); }
Tensor Tensor::abs() const { return tiny::abs(*this); }
Tensor Tensor::relu() const { return tiny::relu(*this); }
Tensor Tensor::sigmoid() const { return tiny::sigmoid(*this); }
Tensor Tensor::tanh() const { return tiny::tanh(*this); }
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return tiny::clamp(*this, min, max);
}
Tensor Tensor::sum() const { return tiny::sum(*this); }
Tensor Tensor::sum(const IntArrayRef& dims, bool keepdim) const { return tiny::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return tiny::mean(*this); }
Tensor Tensor::mean(const IntArrayRef& dims, bool keepdim) const { return tiny::mean(*this, dims, keepdim); }
Tensor Tensor::var(const IntArrayRef& dims, double correction, bool keepdim) const {
  return tiny::var(*this, dims, correction, keepdim);
}
Tensor Tensor::std(const IntArrayRef& dims, double correction, bool keepdim) const {
  return tiny::std_dev(*this, dims, correction, keepdim);
}
Tensor Tensor::logsumexp(const IntArrayRef& dims, bool keepdim) const { return tiny::logsumexp(*this, dims, keepdim); }
Tensor Tensor::prod() const { return tiny::prod(*this); }
Tensor Tensor::prod(int64_t dim, bool keepdim) const { return tiny::prod(*this, dim, keepdim); }
Tensor Tensor::cumsum(int64_t dim) const { return tiny::cumsum(*this, dim); }
std::tuple<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending) const { return tiny::sort(*this, dim, descending); }
std::tuple<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return tiny::topk(*this, k, dim, largest, sorted);
}
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return tiny::gather(*this, dim, index); }
Tensor Tensor::masked_select(const Tensor& mask) const { return tiny::masked_select(*this, mask); }
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& value) const { return tiny::masked_fill(*this, mask, value); }
const Tensor& Tensor::masked_fill_(const Tensor& mask, const Scalar& value) const {
  return copy_(tiny::masked_fill(*this, mask, value));  // copy_ records the in-place op's history
}
Tensor Tensor::flip(const IntArrayRef& dims) const { return tiny::flip(*this, dims); }
Tensor Tensor::tril(int64_t diagonal) const { return tiny::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return tiny::triu(*this, diagonal); }
Tensor Tensor::nonzero() const { return tiny::nonzero(*this); }
Tensor Tensor::repeat(const IntArrayRef& repeats) const { return tiny::repeat(*this, repeats); }
std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const { return tiny::split(*this, split_size, dim); }
std::vector<Tensor> Tensor::split(const IntArrayRef& split_sizes, int64_t dim) const {
  return tiny::split(*this, split_sizes, dim);
}
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const { return tiny::chunk(*this, chunks, dim); }
Tensor Tensor::max() const { return tiny::max(*this); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const { return tiny::max(*this, dim, keepdim); }
Tensor Tensor::min() const { return tiny::min(*this); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const { return tiny::min(*this, dim, keepdim); }
Tensor Tensor::argmax() const { return tiny::argmax(*this); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return tiny::argmax(*this, dim, keepdim); }
Tensor Tensor::matmul(const Tensor& other) const { return tiny::matmul(*this, other); }
Tensor Tensor::mm(const Tensor& other) const { return tiny::mm(*this, other); }
Tensor Tensor::eq(const Tensor& other) const { return tiny::eq(*this, other); }
Tensor Tensor::ne(const Tensor& other) const { return tiny::ne(*this, other); }
Tensor Tensor::lt(const Tensor& other) const { return tiny::lt(*this, other); }
Tensor Tensor::le(const Tensor& other) const { return tiny::le(*this, other); }
Tensor Tensor::gt(const Tensor& other) const { return tiny::gt(*this, other); }
Tensor Tensor::ge(const Tensor& other) const { return tiny::ge(*this, other); }

}  // namespace tiny
