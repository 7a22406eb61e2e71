// Internal helpers shared by the optimizers' sources.
#pragma once

#include <string>

#include "tiny/optim/optimizer.h"

namespace tiny::optim::detail {

// A value as written in the state dict and in messages: the shortest form that
// reads back to the same double ("0.1", "1e-08", "0.999").
std::string format_option(double value);

// The option `name` of a group (tiny::IndexError listing the names it has,
// e.g. when an option was erased from param_groups()[i].options).
double get_option(const OptionMap& options, const std::string& name);

// Checks that `grad` can update `param` (same shape, dtype and device) and
// that `param` is a floating dtype; `opt` and `index` name them in messages.
void check_grad(const std::string& opt, size_t index, const Tensor& param, const Tensor& grad);

// The state tensor `name` of a parameter, created as zeros on the parameter's
// device the first time it is asked for (PyTorch's lazy state initialisation;
// a buffer an option turns on later starts at zeros then).
Tensor state_buffer(ParamState& state, const char* name, const Tensor& param);

}  // namespace tiny::optim::detail
