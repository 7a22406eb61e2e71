// Placeholder definitions, replaced op by op in the following commits.
#include "ops/op_helpers.h"

namespace tiny {

namespace {
[[noreturn]] void not_yet(const char* name) { TINY_THROW(ValueError, name, ": not implemented yet"); }
}  // namespace

Tensor repeat(const Tensor&, const IntArrayRef&) { not_yet("repeat"); }
std::vector<Tensor> split(const Tensor&, int64_t, int64_t) { not_yet("split"); }
std::vector<Tensor> split(const Tensor&, const IntArrayRef&, int64_t) { not_yet("split"); }
std::vector<Tensor> split_with_sizes(const Tensor&, const IntArrayRef&, int64_t) { not_yet("split_with_sizes"); }
std::vector<Tensor> chunk(const Tensor&, int64_t, int64_t) { not_yet("chunk"); }
Tensor gather(const Tensor&, int64_t, const Tensor&) { not_yet("gather"); }
Tensor prod(const Tensor&) { not_yet("prod"); }
Tensor prod(const Tensor&, int64_t, bool) { not_yet("prod"); }
Tensor cumsum(const Tensor&, int64_t) { not_yet("cumsum"); }
std::tuple<Tensor, Tensor> sort(const Tensor&, int64_t, bool) { not_yet("sort"); }
std::tuple<Tensor, Tensor> topk(const Tensor&, int64_t, int64_t, bool, bool) { not_yet("topk"); }

}  // namespace tiny
