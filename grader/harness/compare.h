/// @file compare.h
/// @brief Comparing a student's tensors with the reference's, in words a student reads.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "bundle.h"

namespace workbook {

/// @brief Up to `count` leading values of a CPU tensor, e.g. "[0.1250, -2.0000, ...] (12 values)".
std::string preview(const tiny::Tensor& tensor, int64_t count = 6);

/// @brief `v` with `digits` significant digits, e.g. "0.12346" (how checks quote a number).
std::string number_text(double v, int digits = 6);

/// @brief "[2.3066, 2.3516, ... (12 in all)]": up to `max` values of a JSON array, floats with 5 digits,
/// or each as `format` writes it when given (e.g. bytes as KiB).
std::string values_text(const nlohmann::json& values, size_t max = 8,
                        const std::function<std::string(const nlohmann::json&)>& format = {});

/// @brief "(3, 4)" for a shape.
std::string shape_text(const std::vector<int64_t>& shape);

/// @brief Why `yours` differs from `expected` (shape, dtype, then values beyond
/// rtol/atol, with both previews and the largest difference); nullopt when they match.
std::optional<std::string> differ(const std::string& what, const tiny::Tensor& yours, const tiny::Tensor& expected,
                                  double rtol = 1e-5, double atol = 1e-6);

/// @brief The same for two tensors of Bundles, including where each lives and
/// whether it requires grad when `facts` is true.
std::optional<std::string> differ(const std::string& what, const Bundle& yours, const Bundle& expected,
                                  const std::string& name, double rtol = 1e-5, double atol = 1e-6, bool facts = true);

/// @brief The same for every tensor of the expected bundle's state `prefix`
/// (put_state): the first that differs, named "<label>, <tensor>" (values only,
/// not where they live); nullopt when all match.
std::optional<std::string> state_differs(const std::string& label, const Bundle& yours, const Bundle& expected,
                                         const std::string& prefix, double rtol, double atol);

}  // namespace workbook
