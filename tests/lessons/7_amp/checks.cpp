// Lesson 7's checks: the float16 forward pass and the memory it keeps; loss
// scaling by hand (unscaling with the inf/NaN check, the scale's rule, a step
// that uses them, compared with tiny::amp::GradScaler over a sequence with an
// overflow); the float16 step with a GradScaler (compared with the reference
// over 3 steps, clipping, a skipped step); and the bfloat16 step. Student and
// reference start from the same snapshot of a small MLP on cuda:0 (emulated)
// and get the same batches; probes in the glue record where autocast was on,
// the dtypes, the gradients the optimizer was handed, whether the previous
// step's gradients were cleared, and the GPU's GEMM counters: the products
// must really run in 16 bits, not only give numbers that agree. unscale_grads
// runs in the emulator's deferred mode (queued GPU work runs only when the host
// waits), so a flag read from a non_blocking copy nobody waited for is stale
// every time; amp_cache watches the caching allocator over three larger steps
// (segments given back, allocations that reached the device).
//
// Tolerances: student and reference usually run the same ops and agree exactly;
// a correct step written another way rounds in other places. float16 keeps 11
// significant bits, so over 1-3 steps two correct answers agree to about 1e-3;
// the checks allow 1e-2 of the largest value (bfloat16, 8 bits: 3e-2). Longer
// float16 runs are not compared: rounding differences grow chaotically.
#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>

#include "harness/checker.h"
#include "harness/compare.h"
#include "model.h"

using workbook::Bundle;
using workbook::number_text;
using workbook::values_text;
using workbook::Context;
using workbook::Outcome;
using workbook::Run;
using workbook::RunOptions;

WORKBOOK_LESSON(7, "7_amp");
// What lesson 7 is about besides the numbers: the memory float16 activations save.
WORKBOOK_LESSON_COUNTERS("max_memory_allocated");

namespace {

constexpr int64_t kIn = 32, kHidden = 64, kClasses = 10, kBatch = 64;
constexpr double kLr = 0.1, kMomentum = 0.9;
constexpr double kHalfTol = 1e-2;      // float16: 1e-2 of the largest value, over 1-3 steps
constexpr double kBFloat16Tol = 3e-2;  // bfloat16: 8 significant bits
constexpr double kInitScale = 1024.0;  // small enough that no clean step here overflows float16
constexpr double kNoClip = 100.0;      // far above the gradient norms here: clipping never acts
constexpr double kClipNorm = 0.05;     // far below them: clipping always acts
// Left in every .grad() before the first step, as a previous step would leave them (a step must clear them).
constexpr double kStaleGrad = 3.0;
// The memory check: a wider model and a large batch, where the activations dominate.
constexpr int64_t kMemIn = 16, kMemHidden = 256, kMemBatch = 4096;
// float16 activations: about half of float32's (the reference keeps ~54%: the float16 copies of the input and
// the weights come on top); a pass without autocast keeps 100%.
constexpr double kMemRatio = 0.65;

const char* kOnlyForward =
    "autocast should cover only the forward pass and the loss: close its scope (the guard's braces, or the end of "
    "amp_forward) before backward() and the optimizer step. The backward pass runs each op in the dtype its forward "
    "op chose, and the scaler and the optimizer must work on the float32 gradients and weights";

RunOptions one_gpu(const std::string& call) {
  RunOptions o;
  o.gpus = 1;
  o.call = call;
  o.timeout_s = 120;
  return o;
}



std::string mb(double bytes) { return number_text(bytes / 1e6, 3) + " MB"; }

// The snapshot both sides start from: the graded MLP initialised from the run's seed.
void put_model(Bundle& in, const Context& ctx, int64_t features, int64_t hidden) {
  tiny::manual_seed(ctx.seed);
  lesson7_checks::ProbedMLP model(features, hidden, kClasses);
  in.put_state("init", model.state_dict());
  in.values["in"] = features;
  in.values["hidden"] = hidden;
  in.values["classes"] = kClasses;
  in.values["lr"] = kLr;
  in.values["momentum"] = kMomentum;
}

tiny::Tensor features(const Context& ctx, uint64_t stream, int64_t n, int64_t width) {
  return tiny::randn({n, width}, {}, ctx.generator(stream));
}
tiny::Tensor labels(const Context& ctx, uint64_t stream, int64_t n) {
  return tiny::randint(0, kClasses, {n}, tiny::TensorOptions(tiny::kInt64), ctx.generator(stream));
}

// `steps` batches x.k, y.k of random features and labels.
void put_batches(Bundle& in, const Context& ctx, uint64_t stream, int steps) {
  for (int k = 0; k < steps; ++k) {
    in.put("x." + std::to_string(k), features(ctx, stream * 100 + 2 * k, kBatch, kIn));
    in.put("y." + std::to_string(k), labels(ctx, stream * 100 + 2 * k + 1, kBatch));
  }
  in.values["steps"] = steps;
}

// Inputs for amp_steps: model, batches, the scaler's options, the clipping norm.
Bundle step_inputs(const Context& ctx, uint64_t stream, int steps, double init_scale, int64_t growth_interval,
                   double max_grad_norm) {
  Bundle in;
  put_model(in, ctx, kIn, kHidden);
  put_batches(in, ctx, stream, steps);
  in.values["init_scale"] = init_scale;
  in.values["growth_interval"] = growth_interval;
  in.values["max_grad_norm"] = max_grad_norm;
  in.values["stale_grad"] = kStaleGrad;
  return in;
}

// The matrix products of a run, by the math they ran in (the GEMM counters the glue read).
int64_t gemms(const Run& run, const char* math) {
  const nlohmann::json g = run.out.values.value("gemms", nlohmann::json::object());
  return g.contains(math) ? g[math].get<int64_t>() : 0;
}

// Did the products run in `dtype` ("float16" or "bfloat16"), as many as the
// reference's, with no more in float32 or TF32? Else why not, from the counters.
std::optional<Outcome> products_not_16_bit(const Run& mine, const Run& ref, const std::string& dtype,
                                           const std::string& function) {
  const int64_t wide = gemms(mine, "float32") + gemms(mine, "tf32");
  const int64_t ref_wide = gemms(ref, "float32") + gemms(ref, "tf32");
  // float16 where bfloat16 belongs (or back) is autocast's dtype, which probe_step names.
  const int64_t sixteen = gemms(mine, "float16") + gemms(mine, "bfloat16");
  if (sixteen >= gemms(ref, dtype.c_str()) && wide <= ref_wide) return std::nullopt;
  std::string why = function + "'s matrix products did not run in " + dtype + ": the GPU's GEMM counters show " +
                    std::to_string(gemms(mine, dtype.c_str())) + " in " + dtype + ", " +
                    std::to_string(gemms(mine, "float32")) + " in float32 and " + std::to_string(gemms(mine, "tf32")) +
                    " in TF32, where the reference ran " + std::to_string(gemms(ref, dtype.c_str())) + " in " + dtype +
                    " and " + std::to_string(ref_wide) + " in float32 or TF32. ";
  if (gemms(mine, "tf32") > 0) {
    why += "TF32 (set_float32_matmul_precision(\"high\")) runs float32 products on tensor cores: faster, but the "
           "inputs, the activations and their memory stay float32. ";
  }
  const nlohmann::json calls = mine.out.values.value("forward_calls", nlohmann::json::array());
  const bool outside = std::any_of(calls.begin(), calls.end(), [](const nlohmann::json& c) { return !c["autocast"].get<bool>(); });
  if (outside) {
    why += "Here the forward pass did not run under autocast: run the model itself inside the autocast region";
    if (gemms(mine, "tf32") == 0) why += " (casting its output to " + dtype + " afterwards gives 16-bit numbers from float32 products)";
  } else {
    why += "Run the model's forward pass inside the autocast region, with its inputs and weights float32 "
           "(autocast casts them for each product)";
  }
  return Outcome::fail(why);
}

// The dtype the forward passes saw for the weights, when not float32 ("" when all were float32).
std::string wrong_weight_dtype(const Run& run) {
  for (const auto& c : run.out.values.value("forward_calls", nlohmann::json::array())) {
    if (c["weight_dtype"] != "float32") return c["weight_dtype"].get<std::string>();
  }
  for (const auto& d : run.out.values.value("param_dtypes", nlohmann::json::array())) {
    if (d != "float32") return d.get<std::string>();
  }
  return "";
}

std::string whole_model_cast(const std::string& dtype, const std::string& function) {
  return "the model's weights are " + dtype + " after " + function + ": do not cast the model (model.to(" +
         (dtype == "bfloat16" ? "tiny::kBFloat16), PyTorch's model.bfloat16()" : "tiny::kFloat16), PyTorch's model.half()") +
         "); autocast makes " +
         dtype + " copies of the weights for the matrix products and keeps the weights themselves in float32, "
         "because an update much smaller than a weight is lost when it is rounded to " + dtype;
}

// Was any forward pass run with autocast off? The dtype it ran in otherwise ("" when none ran).
bool forward_without_autocast(const Run& run) {
  const nlohmann::json calls = run.out.values.value("forward_calls", nlohmann::json::array());
  return std::any_of(calls.begin(), calls.end(), [](const nlohmann::json& c) { return !c["autocast"].get<bool>(); });
}
std::string autocast_dtype(const Run& run) {
  for (const auto& c : run.out.values.value("forward_calls", nlohmann::json::array())) {
    if (c["autocast"].get<bool>()) return c["autocast_dtype"].get<std::string>();
  }
  return "";
}

// Sum of squares of all the gradients handed to the optimizer at its last step, as a norm.
double grad_norm(const Run& run, const tiny::StateDict& names) {
  double sum = 0;
  for (const auto& [name, t] : names) {
    (void)t;
    const std::string key = "grad." + name;
    if (!run.out.has(key) || !run.out.info(key).defined) continue;
    for (float v : run.out.tensor(key).to(tiny::kFloat32).contiguous().to_vector<float>()) sum += double(v) * v;
  }
  return std::sqrt(sum);
}

bool near(double a, double b, double rel) { return std::fabs(a - b) <= rel * std::fabs(b); }

// Why the weights' updates (final - init) differ beyond `tol` of the largest update, or nullopt.
std::optional<std::string> updates_differ(const Run& mine, const Run& ref, const tiny::StateDict& init,
                                          const std::string& after, double tol) {
  double largest = 0;
  std::map<std::string, tiny::Tensor> want;
  for (const auto& [name, w0] : init) {
    want[name] = ref.out.tensor("final." + name).to(tiny::kFloat32) - w0;
    largest = std::max(largest, want[name].abs().max().item<double>());
  }
  for (const auto& [name, w0] : init) {
    if (!mine.out.has("final." + name)) return "after " + after + ", the weight " + name + " is missing";
    const tiny::Tensor got = mine.out.tensor("final." + name).to(tiny::kFloat32) - w0;
    if (auto why = workbook::differ("after " + after + ", the update of " + name + " (weight minus its start)", got,
                                    want[name], tol, tol * largest + 1e-7)) {
      return why;
    }
  }
  return std::nullopt;
}

// Why the gradients handed to the optimizer at the last step differ, or nullopt.
std::optional<std::string> grads_differ(const Run& mine, const Run& ref, const tiny::StateDict& init,
                                        const std::string& when, double tol) {
  double largest = 0;
  for (const auto& [name, t] : init) {
    (void)t;
    const std::string key = "grad." + name;
    if (ref.out.has(key) && ref.out.info(key).defined) {
      largest = std::max(largest, ref.out.tensor(key).to(tiny::kFloat32).abs().max().item<double>());
    }
  }
  for (const auto& [name, t] : init) {
    (void)t;
    const std::string key = "grad." + name;
    if (!ref.out.has(key)) continue;
    if (!mine.out.has(key) || !mine.out.info(key).defined) {
      return "the optimizer's step " + when + " found no gradient in " + name + ".grad()";
    }
    if (auto why = workbook::differ("the gradient of " + name + " handed to optimizer.step() " + when,
                                    mine.out.tensor(key).to(tiny::kFloat32), ref.out.tensor(key).to(tiny::kFloat32),
                                    tol, tol * largest + 1e-8)) {
      return why;
    }
  }
  return std::nullopt;
}

// The loss of the first step that differs beyond `tol`, or -1.
int first_loss_difference(const nlohmann::json& mine, const nlohmann::json& ref, double tol) {
  for (size_t k = 0; k < std::min(mine.size(), ref.size()); ++k) {
    if (mine[k].is_null() || ref[k].is_null()) {
      if (mine[k].is_null() != ref[k].is_null()) return static_cast<int>(k);
      continue;
    }
    const double a = mine[k].get<double>(), b = ref[k].get<double>();
    if (std::fabs(a - b) > tol * std::fabs(b) + 1e-6) return static_cast<int>(k);
  }
  return mine.size() == ref.size() ? -1 : static_cast<int>(std::min(mine.size(), ref.size()));
}

// The failure of a step whose gradients were clipped to max_norm / scale.
std::string clipped_scaled(double norm, double scale, double max_norm) {
  return "the gradients handed to optimizer.step() have a norm of " + number_text(norm) + " = " + number_text(max_norm) + " / " +
         number_text(scale) + ": you clipped the scaled gradients (their norm is " + number_text(scale) + " times the true one, so "
         "clipping cut them to max_grad_norm=" + number_text(max_norm) + ", and unscaling then divided them by the scale). "
         "Call scaler.unscale_(optimizer) before clip_grad_norm_";
}

// The named failure of a step that threw, when a probe explains it.
std::optional<Outcome> explain_error(const Run& mine, const std::string& function) {
  if (mine.status != "error") return std::nullopt;
  const std::string& m = mine.message;
  if (m.find("unscale_()") != std::string::npos &&
      (m.find("since the last update()") != std::string::npos || m.find("after step()") != std::string::npos)) {
    // update() counts a clean step: a tracker of 1 after the first step says it ran, before step().
    const nlohmann::json t = mine.out.values.value("growth_trackers", nlohmann::json::array());
    if (!t.empty() && t[0].is_number() && t[0].get<int64_t>() > 0) {
      return Outcome::fail(function + " threw at its second step: \"" + mine.message + "\": scaler.update() ran "
                           "before scaler.step(optimizer). update() ends the step's bookkeeping, so step() found the "
                           "gradients not unscaled, unscaled them a second time (the optimizer got them divided by "
                           "the scale twice) and marked the step taken, and the next unscale_() refused. Call "
                           "scaler.update() last, after scaler.step(optimizer)");
    }
    return Outcome::fail(function + " threw at its second step: \"" + mine.message +
                         "\": call scaler.update() at the end of every step. update() adjusts the scale and starts "
                         "the next step's bookkeeping; without it the scale never adapts");
  }
  if (m.find("did not use scaler.scale") != std::string::npos) {
    return Outcome::fail(function + " never called scaler.scale(loss): you called backward on the unscaled loss, so "
                         "the gradients were not multiplied by the scale and small ones underflow to 0 in float16 "
                         "(and the scaler, which never saw a scaled loss, refused to unscale_: \"" + m +
                         "\"). Call scaler.scale(loss).backward()");
  }
  const std::string dtype = wrong_weight_dtype(mine);
  if (!dtype.empty()) {
    return Outcome::fail(whole_model_cast(dtype, function) + "\n(your step then threw: " + mine.message + ")");
  }
  return std::nullopt;
}

// The probes every training step shares: dtypes, autocast where it belongs, one forward pass per step.
std::optional<Outcome> probe_step(const Run& mine, const Run& ref, int steps, const std::string& function,
                                  const std::string& dtype) {
  const nlohmann::json& v = mine.out.values;
  const std::string weights = wrong_weight_dtype(mine);
  if (!weights.empty()) return Outcome::fail(whole_model_cast(weights, function));
  const size_t passes = v.value("forward_calls", nlohmann::json::array()).size();
  if (passes != static_cast<size_t>(steps)) {
    return Outcome::fail(function + " ran the model " + std::to_string(passes) + " times in " + std::to_string(steps) +
                         " steps: one forward pass per step");
  }
  if (v.value("stale_grads_kept", false)) {
    return Outcome::fail(function + " did not clear the gradients of the previous step: at its first backward() the "
                         "parameters' .grad() still held the gradients left before the step, and backward adds to "
                         "them. Call optimizer.zero_grad() at the start of every step, before backward()");
  }
  if (auto why = products_not_16_bit(mine, ref, dtype, function)) return *why;
  if (forward_without_autocast(mine)) {
    return Outcome::fail(function + "'s forward pass did not run under autocast: run the model and the loss inside "
                         "the scope of a tiny::amp::autocast guard for \"cuda\" (" +
                         (dtype == "float16" ? std::string("amp_forward does it") : "with tiny::kBFloat16") + ")");
  }
  const std::string used = autocast_dtype(mine);
  if (used != dtype) {
    std::string why = function + "'s autocast ran in " + used + ", not " + dtype;
    if (dtype == "bfloat16") {
      why += ": pass the dtype, tiny::amp::autocast guard(\"cuda\", tiny::kBFloat16); without one, autocast for "
             "\"cuda\" uses float16";
    }
    return Outcome::fail(why);
  }
  if (v.value("backward_autocast", false) || v.value("step_autocast", false)) {
    std::string where = v.value("backward_autocast", false) ? "backward()" : "";
    if (v.value("step_autocast", false)) where += std::string(where.empty() ? "" : " and ") + "optimizer.step()";
    return Outcome::fail(function + " ran " + where + " with autocast still on: " + kOnlyForward);
  }
  return std::nullopt;
}

// Gradients for unscale_grads_: `n` float32 tensors of assorted shapes, scaled
// up as a scaled backward leaves them (the scale is a power of two, so dividing
// by it is exact and any correct answer matches exactly).
Bundle unscale_inputs(const Context& ctx, uint64_t stream, double scale) {
  Bundle in;
  const std::vector<std::vector<int64_t>> shapes = {{64, 32}, {64}, {10, 64}, {10}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    in.put("g." + std::to_string(i), tiny::randn(shapes[i], {}, ctx.generator(stream * 10 + i)) * scale * 1e-3);
  }
  in.values["count"] = static_cast<int>(shapes.size());
  in.values["undefined"] = nlohmann::json::array({1});  // a parameter backward did not reach
  in.values["scale"] = scale;
  return in;
}

// `t` on the CPU as float32 with its infs and NaNs set to 0 (an inf matches an inf, which differ() does not see).
tiny::Tensor finite_part(const tiny::Tensor& t) {
  std::vector<float> v = t.cpu().to(tiny::kFloat32).contiguous().to_vector<float>();
  for (float& x : v) x = std::isfinite(x) ? x : 0.0f;
  return tiny::from_vector(v, t.sizes());
}

// `in` with element `at` of gradient `which` set to `value`.
Bundle with_element(Bundle in, int which, int64_t at, float value) {
  const std::string key = "g." + std::to_string(which);
  const tiny::Tensor g = in.tensor(key);
  std::vector<float> v = g.contiguous().to_vector<float>();
  v[static_cast<size_t>(at)] = value;
  in.put(key, tiny::from_vector(v, g.sizes()));
  return in;
}

}  // namespace

WORKBOOK_CHECK(amp_forward, "amp_forward() runs the model under float16 autocast and returns the float32 loss with its graph") {
  Bundle in;
  put_model(in, ctx, kIn, kHidden);
  in.put("x", features(ctx, 1, kBatch, kIn));
  in.put("y", labels(ctx, 2, kBatch));
  in.values["keep_trace"] = true;
  const std::string call = "amp_forward(model, x, y) on a batch of 64";
  Run mine, ref;
  if (auto early = ctx.both("amp_forward", in, mine, ref, one_gpu(call))) return *early;
  if (mine.out.values.contains("trace") && ref.out.values.contains("trace")) {  // the report's two GPU timelines
    ctx.details["timelines"] = {{"yours", mine.out.values["trace"]}, {"reference", ref.out.values["trace"]}};
  }
  const nlohmann::json& v = mine.out.values;
  if (v["forward_calls"].size() != 1) {
    return Outcome::fail(call + " ran the model " + std::to_string(v["forward_calls"].size()) + " times: once");
  }
  const std::string weights = wrong_weight_dtype(mine);
  if (!weights.empty()) return Outcome::fail(whole_model_cast(weights, "amp_forward"));
  if (auto why = products_not_16_bit(mine, ref, "float16", "amp_forward")) return *why;
  if (forward_without_autocast(mine)) {
    return Outcome::fail(call + ": the forward pass did not run under autocast, so every matrix product ran in "
                         "float32: open a guard first, tiny::amp::autocast guard(\"cuda\", tiny::kFloat16); (PyTorch's "
                         "with torch.amp.autocast(\"cuda\", dtype=torch.float16):), then run the model and the loss in "
                         "its scope");
  }
  if (autocast_dtype(mine) != "float16") {
    return Outcome::fail(call + ": autocast ran in " + autocast_dtype(mine) + ": amp_forward is the float16 one, "
                         "tiny::amp::autocast guard(\"cuda\", tiny::kFloat16)");
  }
  if (!mine.out.has("loss") || !mine.out.info("loss").defined) return Outcome::fail(call + " returned no tensor");
  const workbook::TensorInfo& loss = mine.out.info("loss");
  if (!loss.shape.empty()) {
    return Outcome::fail(call + " returned a tensor of shape " + workbook::shape_text(loss.shape) +
                         ": return the mean loss over the batch, one number (cross_entropy's default reduction)");
  }
  if (loss.dtype != "float32") {
    return Outcome::fail(call + " returned a " + loss.dtype + " loss: compute the loss inside the autocast scope too; "
                         "autocast runs cross_entropy in float32 (a softmax over float16 values loses too much), so "
                         "the loss comes out float32");
  }
  if (!v["loss_requires_grad"].get<bool>()) {
    return Outcome::fail(call + " returned the loss without its graph (it does not require grad): return the tensor "
                         "cross_entropy gave, not a detached copy, so that amp_train_step can call backward on it");
  }
  const double got = mine.out.tensor("loss").item<double>(), want = ref.out.tensor("loss").item<double>();
  if (!(std::fabs(got - want) <= kHalfTol * std::fabs(want))) {
    return Outcome::fail(call + " returned " + number_text(got) + ", expected " + number_text(want) + " (within " + number_text(kHalfTol) +
                         " relative: float16 rounding): cross_entropy of model(x) and y, averaged over the batch");
  }
  return Outcome::pass("loss " + number_text(got, 5) + " (reference " + number_text(want, 5) + ")");
}

WORKBOOK_CHECK(activation_memory, "at a batch of 4096, amp_forward() keeps about half the activation bytes of float32") {
  Bundle in;
  put_model(in, ctx, kMemIn, kMemHidden);
  in.put("x", features(ctx, 3, kMemBatch, kMemIn));
  in.put("y", labels(ctx, 4, kMemBatch));
  in.values["measure_memory"] = true;
  const std::string call = "amp_forward(model, x, y) on a batch of 4096 (16-256-256-10 MLP)";
  Run mine, ref;
  if (auto early = ctx.both("amp_forward", in, mine, ref, one_gpu(call))) return *early;
  const double amp = mine.out.values["amp_bytes"].get<double>(), fp32 = mine.out.values["fp32_bytes"].get<double>();
  const double ref_amp = ref.out.values["amp_bytes"].get<double>(), ref_fp32 = ref.out.values["fp32_bytes"].get<double>();
  ctx.details["activation_bytes"] = {{"yours", amp}, {"float32", fp32}, {"reference", ref_amp}};
  if (!(ref_amp <= kMemRatio * ref_fp32)) {
    return Outcome::error("the reference's float16 forward kept " + mb(ref_amp) + " for backward, float32 " +
                          mb(ref_fp32) + ": more than " + number_text(kMemRatio) + " of it (a bug in the workbook)");
  }
  // Bytes that memory_allocated() shows after the forward pass minus before: what the graph keeps for backward
  // (the weights and the input were allocated before and do not count).
  const std::string figures = "your forward pass kept " + mb(amp) + " for backward, a float32 one " + mb(fp32) +
                              " (the reference's float16 pass " + mb(ref_amp) + ")";
  if (!(amp <= kMemRatio * fp32)) {
    if (forward_without_autocast(mine)) {
      return Outcome::fail(figures + ": the forward pass did not run under autocast, so the activations it keeps "
                           "are float32 (4 bytes each instead of 2)");
    }
    return Outcome::fail(figures + ": a float16 forward pass should keep about half; keep only what the graph "
                         "needs (no extra copies of the activations, return the loss itself)");
  }
  return Outcome::pass(figures + ", " + number_text(100.0 * amp / fp32, 3) + "%");
}

// Loss scaling by hand must not call amp's own helpers, the fused kernels of
// GradScaler that do the exercise in one call: the runner counts their kernels.
static std::optional<std::string> used_amp_helpers(const Run& mine, const std::string& function) {
  const nlohmann::json calls = mine.out.values.value("amp_helper_kernels", nlohmann::json::object());
  std::string used;
  for (const auto& [name, count] : calls.items()) {
    if (count.get<int>() > 0) used += (used.empty() ? "" : ", ") + name + " (" + count.dump() + " kernels)";
  }
  if (used.empty()) return std::nullopt;
  return "your " + function + " called amp's own helpers: " + used + ". Those are GradScaler's fused kernels "
         "(tiny::amp::foreach_non_finite_check_and_unscale_ and update_scale_, PyTorch's "
         "torch._amp_foreach_non_finite_check_and_unscale_ and torch._amp_update_scale_): this exercise is to build "
         "what they do from ordinary tensor ops and arithmetic, so write it yourself" +
         (function == "scaled_train_step" ? std::string(", with your unscale_grads_ and update_scale") : std::string());
}

WORKBOOK_CHECK(unscale_grads, "unscale_grads_() divides the gradients by the scale in place and finds an inf or a NaN, with one wait for the GPU") {
  constexpr double scale = 1024.0;
  const Bundle clean = unscale_inputs(ctx, 9, scale);
  struct Case {
    const char* what;
    Bundle in;
  };
  const Case cases[] = {{"finite gradients", clean},
                        {"an inf in the third gradient", with_element(clean, 2, 17, INFINITY)},
                        {"a NaN in the first gradient", with_element(clean, 0, 5, NAN)},
                        {"a -inf in the fourth gradient", with_element(clean, 3, 4, -INFINITY)}};
  std::string summary;
  for (const Case& c : cases) {
    const std::string call = "unscale_grads_(4 gradients of a 32-64-10 MLP, the second undefined, with " +
                             std::string(c.what) + "; scale 1024)";
    Run mine, ref;
    // Deferred mode: queued GPU work runs only when the host waits, so a flag read from a
    // non_blocking copy back that nobody waited for is stale every time, not now and then.
    RunOptions options = one_gpu(call);
    options.mode = "deferred";
    if (auto early = ctx.both("unscale", c.in, mine, ref, options)) return *early;
    if (auto why = used_amp_helpers(mine, "unscale_grads_")) return Outcome::fail(*why);
    const bool found = mine.out.values["found_inf"].get<bool>(), want = ref.out.values["found_inf"].get<bool>();
    // The probe: a copy into pinned memory, and the GPU still busy when the answer came back.
    if (found != want && !mine.out.values.value("idle", true) &&
        mine.out.values.value("bytes_to_pinned", int64_t{0}) > 0) {
      return Outcome::fail(call + " returned " + (found ? "true" : "false") + ", expected " + (want ? "true" : "false") +
                           ": you read the host copy before the copy finished. A non_blocking copy to the CPU (into "
                           "pinned memory) returns at once and the GPU writes the flag later: your function returned "
                           "with the copy still queued (in this check's deferred mode nothing queued runs until the "
                           "host waits; on a real GPU it is a race you lose now and then, and a missed inf ruins the "
                           "weights). Wait before reading it, tiny::cuda::synchronize() (PyTorch's "
                           "torch.cuda.synchronize()), or use a blocking copy: .item() waits for the GPU, and it is "
                           "the one wait this function needs");
    }
    if (found != want && std::string(c.what).find("-inf") != std::string::npos) {
      return Outcome::fail(call + " returned false, expected true: an overflow can be negative too, and a test of the "
                           "largest value (g.max()) never sees a -inf. Look at the size of the values, whatever their "
                           "sign");
    }
    if (found != want) {
      return Outcome::fail(call + " returned " + (found ? "true" : "false") + ", expected " + (want ? "true" : "false") +
                           (want ? ": look at every element of every gradient, inf and NaN both (NaN compares false "
                                   "with everything, so a test like g > limit misses it)"
                                 : ": every element here is finite"));
    }
    for (int i = 0; i < c.in.values["count"].get<int>(); ++i) {
      const std::string key = "g." + std::to_string(i);
      if (!ref.out.has(key)) continue;
      const tiny::Tensor before = c.in.tensor(key);
      if (!mine.out.has(key)) return Outcome::fail(call + ": gradient " + std::to_string(i) + " is missing after the call");
      const tiny::Tensor got = mine.out.tensor(key);
      if (!workbook::differ("", got, before, 0, 0)) {
        return Outcome::fail(call + ": gradient " + std::to_string(i) + " is unchanged: divide every gradient by the "
                             "scale in place (mul_ or div_ on the tensor itself: a new tensor leaves p.grad() as it "
                             "was), whatever the check finds; the step is skipped anyway when it finds an inf");
      }
      if (auto why = workbook::differ(call + ", gradient " + std::to_string(i) + " after the call (infs and NaNs "
                                      "set to 0)", finite_part(got), finite_part(ref.out.tensor(key)), 1e-6, 1e-12)) {
        return Outcome::fail(*why);
      }
    }
    // Right values, and the gradients went through the host: named from the copy counters before the
    // waits (each .cpu() waits too, and the waits' message would blame an .item()).
    const int64_t to_host = mine.out.values.value("bytes_to_host", int64_t{0});
    const int64_t to_device = mine.out.values.value("bytes_to_device", int64_t{0});
    if (to_device > ref.out.values.value("bytes_to_device", int64_t{0}) &&
        to_host > ref.out.values.value("bytes_to_host", int64_t{0})) {
      return Outcome::fail(call + ": the right gradients, but they went from the GPU to the host and back (" +
                           std::to_string(to_host) + " bytes copied to the host and " + std::to_string(to_device) +
                           " back to the GPU; the reference copies " +
                           std::to_string(ref.out.values.value("bytes_to_host", int64_t{0})) + " bytes to the host, "
                           "its one flag, and none back). Each trip waits for the GPU and moves every gradient twice "
                           "over the PCIe link: divide them where they are, on the GPU (mul_ or div_ in place)");
    }
    const int64_t waits = mine.out.values["synchronizations"].get<int64_t>();
    const int64_t ref_waits = ref.out.values["synchronizations"].get<int64_t>();
    ctx.details["synchronizations"] = {{"yours", waits}, {"reference", ref_waits}};
    if (waits > ref_waits) {
      return Outcome::fail(call + " waited for the GPU " + std::to_string(waits) + " times (the reference " +
                           std::to_string(ref_waits) + "): each .item() waits until the GPU has done everything "
                           "queued. Keep one flag on the GPU for all the gradients (combine them there: a maximum "
                           "of their largest |values| is inf or NaN when any element is) and read it once at the end");
    }
    summary += std::string(summary.empty() ? "" : "; ") + c.what + ": " + (found ? "true" : "false");
  }
  return Outcome::pass(summary + "; one wait for the GPU");
}

WORKBOOK_CHECK(update_scale, "update_scale() halves the scale after an overflow and doubles it after growth_interval clean steps in a row") {
  Bundle in;
  in.values["init_scale"] = 65536.0;
  in.values["growth_interval"] = 3;
  // Clean runs of 3 (growth), 2 then an overflow (the count starts again), two overflows in a row.
  in.values["found_inf"] = {false, false, false, false, false, true, false, false, false, true, true, false};
  const std::string call = "update_scale after each of 12 steps (init_scale 65536, growth_interval 3; overflows at "
                           "steps 6, 10 and 11)";
  Run mine, ref;
  if (auto early = ctx.both("update_scale", in, mine, ref, one_gpu(call))) return *early;
  const nlohmann::json& scales = mine.out.values["scales"];
  const nlohmann::json& trackers = mine.out.values["growth_trackers"];
  const nlohmann::json& want = ref.out.values["scales"];
  const nlohmann::json& want_trackers = ref.out.values["growth_trackers"];
  ctx.details["curves"]["the scale after each step"] = {{"yours", scales}, {"reference", want}};
  const nlohmann::json& flags = in.values["found_inf"];
  for (size_t k = 0; k < flags.size() && k < trackers.size(); ++k) {
    if (flags[k].get<bool>() && trackers[k].get<int64_t>() != 0) {
      return Outcome::fail(call + ": after the overflow at step " + std::to_string(k + 1) + " your growth_tracker is " +
                           number_text(trackers[k].get<double>()) + ": start counting clean steps again from 0 "
                           "after an overflow (the scale grows only after growth_interval clean steps in a row). "
                           "Your scales: " + values_text(scales) + ", expected " + values_text(want));
    }
  }
  if (scales != want || trackers != want_trackers) {
    return Outcome::fail(call + ": your scales " + values_text(scales) + " (growth_tracker " + values_text(trackers) +
                         "), expected " + values_text(want) + " (" + values_text(want_trackers) + ")");
  }
  return Outcome::pass("scales " + values_text(scales));
}

WORKBOOK_CHECK(scaled_step, "scaled_train_step() with your scaler matches tiny::amp::GradScaler over 6 float16 steps with an overflow") {
  constexpr int steps = 6, bad = 1;
  Bundle in = step_inputs(ctx, 10, steps, kInitScale, 3, 1e9);
  const tiny::Tensor clean = in.tensor("x." + std::to_string(bad));
  std::vector<float> values = clean.contiguous().to_vector<float>();
  values[0] = 1e6f;  // inf in float16: the gradients of step 2 overflow
  in.put("x." + std::to_string(bad), tiny::from_vector(values, clean.sizes()));
  const std::string function = "scaled_train_step";
  const std::string call = "6 steps of scaled_train_step, step 2 with an input of 1e6 (scale 1024, growth_interval 3)";
  const Run mine = ctx.student("scaled_steps", in, one_gpu(call));
  if (auto early = ctx.unless_ok(mine)) return *early;
  // The same steps through tiny::amp::GradScaler: the reference's amp_train_step, clipping at 1e9 (never).
  const Run ref = ctx.reference("amp_steps", in, one_gpu(call + ", with tiny::amp::GradScaler"));
  if (!ref.ok()) return Outcome::error("the reference solution failed on these inputs (a bug in the workbook): " + ref.message);
  // The report plots both, whatever the verdict.
  ctx.details["curves"]["float16 training loss per step"] = {{"yours", mine.out.values["losses"]},
                                                             {"GradScaler", ref.out.values["losses"]}};
  ctx.details["curves"]["the scale after each step (an inf at step 2)"] = {{"yours", mine.out.values["scales"]},
                                                                          {"GradScaler", ref.out.values["scales"]}};
  if (auto why = used_amp_helpers(mine, function)) return Outcome::fail(*why);
  if (auto why = probe_step(mine, ref, steps, function, "float16")) return *why;
  const nlohmann::json& v = mine.out.values;
  const nlohmann::json& want = ref.out.values;
  const bool ran_on_inf = v["stepped"].size() > bad && v["stepped"][bad].get<bool>();
  if (ran_on_inf) {
    return Outcome::fail("at step 2 the gradients were inf, and yet optimizer.step() ran" +
                         std::string(v["params_finite"][bad].get<bool>() ? "" : " and the weights became inf or NaN") +
                         ": step only when unscale_grads_ found every gradient finite (GradScaler.step skips it)");
  }
  if (v["scales"] != want["scales"]) {
    return Outcome::fail("the scale after each step was " + values_text(v["scales"]) + ", GradScaler's " +
                         values_text(want["scales"]) + " (the count of clean steps: yours " +
                         values_text(v["growth_trackers"]) + ", GradScaler's " + values_text(want["growth_trackers"]) +
                         "): one update_scale per step, after the optimizer's step, told whether this step's "
                         "gradients overflowed");
  }
  if (v["stepped"] != want["stepped"]) {
    return Outcome::fail("optimizer.step() ran at steps " + values_text(v["stepped"]) + ", with GradScaler at " +
                         values_text(want["stepped"]) + " (true: it ran)");
  }
  const tiny::StateDict init = in.state("init");
  const double scale = kInitScale, my_norm = grad_norm(mine, init), ref_norm = grad_norm(ref, init);
  if (ref_norm > 0 && near(my_norm * scale, ref_norm, 0.1)) {
    return Outcome::fail("the gradients handed to optimizer.step() are 1/" + number_text(scale) + " of GradScaler's: "
                         "run backward on the loss multiplied by the scale (it is what keeps small float16 "
                         "gradients from underflowing), then unscale");
  }
  if (ref_norm > 0 && near(my_norm, ref_norm * scale, 0.1)) {
    return Outcome::fail("the gradients handed to optimizer.step() are still multiplied by the scale: unscale the "
                         "parameters' gradients (unscale_grads_ on each p.grad()) before the optimizer steps");
  }
  const int k = first_loss_difference(v["losses"], want["losses"], kHalfTol);
  if (k >= 0) {
    return Outcome::fail("the loss of step " + std::to_string(k + 1) + " differs from GradScaler's beyond float16 "
                         "rounding: your losses " + values_text(v["losses"]) + ", GradScaler's " + values_text(want["losses"]));
  }
  if (auto why = updates_differ(mine, ref, init, "6 steps (one skipped)", kHalfTol)) return Outcome::fail(*why);
  // The overflow that matters in practice: a scale too large for these
  // gradients, a finite loss, and scaled gradients past float16's 65504.
  // Only the gradients tell; a scaler that looks at the loss steps on inf.
  const std::string high_call = "6 steps of scaled_train_step from a scale of 2^24 (clean inputs, growth_interval 3)";
  const Bundle high = step_inputs(ctx, 11, steps, 16777216.0, 3, 1e9);
  const Run mine_high = ctx.student("scaled_steps", high, one_gpu(high_call));
  if (auto early = ctx.unless_ok(mine_high)) return *early;
  const Run ref_high = ctx.reference("amp_steps", high, one_gpu(high_call + ", with tiny::amp::GradScaler"));
  if (!ref_high.ok()) {
    return Outcome::error("the reference solution failed on these inputs (a bug in the workbook): " + ref_high.message);
  }
  const nlohmann::json& vh = mine_high.out.values;
  const nlohmann::json& wh = ref_high.out.values;
  ctx.details["curves"]["the scale after each step, from 2^24"] = {{"yours", vh["scales"]}, {"GradScaler", wh["scales"]}};
  if (vh["stepped"] != wh["stepped"] || vh["scales"] != wh["scales"]) {
    return Outcome::fail(high_call + ": optimizer.step() ran at steps " + values_text(vh["stepped"]) +
                         " (true: it ran) and the scale went " + values_text(vh["scales"]) + "; with GradScaler " +
                         values_text(wh["stepped"]) + " and " + values_text(wh["scales"]) + ". From 2^24 the first "
                         "loss is finite (GradScaler's " + values_text(wh["losses"]) + ") while the scaled "
                         "gradients are not: float16 ends at 65504. What tells an overflowed step from a clean one?");
  }
  return Outcome::pass("scales " + values_text(v["scales"]) + ", as GradScaler's; step 2 skipped; from 2^24, " +
                       values_text(vh["scales"]));
}

WORKBOOK_CHECK(amp_step, "amp_train_step() matches the reference over 3 float16 steps (loss, gradients, weights, within 1e-2)") {
  constexpr int steps = 3;
  const Bundle in = step_inputs(ctx, 5, steps, kInitScale, 2000, kNoClip);
  const std::string function = "amp_train_step";
  const std::string call = "3 steps of amp_train_step (GradScaler init_scale=1024, max_grad_norm=100, SGD)";
  const Run mine = ctx.student("amp_steps", in, one_gpu(call));
  if (auto named = explain_error(mine, function)) return *named;
  if (auto early = ctx.unless_ok(mine)) return *early;
  const Run ref = ctx.reference("amp_steps", in, one_gpu(call));
  if (!ref.ok()) return Outcome::error("the reference solution failed on these inputs (a bug in the workbook): " + ref.message);
  ctx.details["curves"]["float16 training loss per step"] = {{"yours", mine.out.values["losses"]},
                                                             {"reference", ref.out.values["losses"]}};
  if (auto why = probe_step(mine, ref, steps, function, "float16")) return *why;

  const nlohmann::json& v = mine.out.values;
  const tiny::StateDict init = in.state("init");
  if (v["growth_trackers"] != ref.out.values["growth_trackers"]) {
    const nlohmann::json& t = v["growth_trackers"];
    if (std::all_of(t.begin(), t.end(), [](const nlohmann::json& x) { return x.get<int64_t>() == 0; })) {
      return Outcome::fail("the scaler counted no clean step in 3 (its growth tracker stayed at 0; the reference's: " +
                           values_text(ref.out.values["growth_trackers"]) + "): call scaler.update() at the end of every "
                           "step, after scaler.step(optimizer)");
    }
  }
  if (v["stepped"] != ref.out.values["stepped"]) {
    return Outcome::fail("optimizer.step() ran at steps " + values_text(v["stepped"]) + ", the reference's at " +
                         values_text(ref.out.values["stepped"]) + " (true: it ran): one step per call, through "
                         "scaler.step(optimizer)");
  }
  const double scale = in.values["init_scale"].get<double>();
  const double my_norm = grad_norm(mine, init), ref_norm = grad_norm(ref, init);
  if (ref_norm > 0 && near(my_norm * scale, ref_norm, 0.1)) {
    return Outcome::fail("the gradients handed to optimizer.step() are 1/" + number_text(scale) + " of the expected ones (norm " +
                         number_text(my_norm) + ", expected " + number_text(ref_norm) + "): you called backward on the unscaled "
                         "loss, then unscale_ divided them by the scale anyway. Call scaler.scale(loss).backward()");
  }
  if (ref_norm > 0 && !near(my_norm, ref_norm, 0.1) && near(my_norm * scale, kNoClip, 0.05)) {
    return Outcome::fail(clipped_scaled(my_norm, scale, kNoClip));
  }
  if (ref_norm > 0 && near(my_norm, ref_norm * scale, 0.1)) {
    return Outcome::fail("the gradients handed to optimizer.step() are still multiplied by the scale " + number_text(scale) +
                         " (norm " + number_text(my_norm) + ", expected " + number_text(ref_norm) + "): call scaler.unscale_(optimizer) "
                         "and step with scaler.step(optimizer), never optimizer.step() on scaled gradients");
  }
  const int k = first_loss_difference(v["losses"], ref.out.values["losses"], kHalfTol);
  if (k >= 0) {
    std::string why = "the loss of step " + std::to_string(k + 1) + " differs beyond float16 rounding (1e-2): your "
                      "losses " + values_text(v["losses"]) + ", expected " + values_text(ref.out.values["losses"]);
    if (k > 0) why += ": the steps before it match, so an update went wrong";
    return Outcome::fail(why);
  }
  if (auto why = grads_differ(mine, ref, init, "at step 3", kHalfTol)) return Outcome::fail(*why);
  if (auto why = updates_differ(mine, ref, init, "3 steps", kHalfTol)) return Outcome::fail(*why);
  return Outcome::pass("losses " + values_text(v["losses"]));
}

WORKBOOK_CHECK(amp_clip, "amp_train_step() clips the unscaled gradients to max_grad_norm") {
  const Bundle in = step_inputs(ctx, 6, 1, kInitScale, 2000, kClipNorm);
  const std::string function = "amp_train_step";
  const std::string call = "amp_train_step with max_grad_norm=0.05 (GradScaler init_scale=1024)";
  const Run mine = ctx.student("amp_steps", in, one_gpu(call));
  if (auto named = explain_error(mine, function)) return *named;
  if (auto early = ctx.unless_ok(mine)) return *early;
  const Run ref = ctx.reference("amp_steps", in, one_gpu(call));
  if (!ref.ok()) return Outcome::error("the reference solution failed on these inputs (a bug in the workbook): " + ref.message);
  if (auto why = probe_step(mine, ref, 1, function, "float16")) return *why;
  const tiny::StateDict init = in.state("init");
  if (mine.out.values["step_calls"].empty()) {
    return Outcome::fail(call + " never called optimizer.step() (through scaler.step(optimizer))");
  }
  const auto grads_wrong = grads_differ(mine, ref, init, "(max_grad_norm=0.05)", kHalfTol);
  if (!grads_wrong) return Outcome::pass("gradient norm " + number_text(grad_norm(mine, init), 4) + " (max_grad_norm 0.05)");
  const double my_norm = grad_norm(mine, init), scale = in.values["init_scale"].get<double>();
  Bundle unclipped = in;
  unclipped.values["max_grad_norm"] = 1e9;
  const Run full = ctx.reference("amp_steps", unclipped, one_gpu(call));
  if (near(my_norm * scale, kClipNorm, 0.05)) {
    // Clipped to max_grad_norm, then divided by the scale: clipping before unscale_, or update() before
    // step() (step() then unscales a second time). Only the second still divides twice without clipping.
    const Run again = ctx.student("amp_steps", unclipped, one_gpu(call + ", then again with max_grad_norm=1e9"));
    if (again.ok() && full.ok() && near(grad_norm(again, init) * scale, grad_norm(full, init), 0.02)) {
      return Outcome::fail("the gradients handed to optimizer.step() were divided by the scale twice (norm " +
                           number_text(grad_norm(again, init)) + " without clipping, expected " +
                           number_text(grad_norm(full, init)) + " = that times " + number_text(scale) +
                           "): scaler.update() ran before scaler.step(optimizer). update() ends the step's "
                           "bookkeeping, so step() found the gradients not unscaled and unscaled them again. Call "
                           "scaler.update() last, after scaler.step(optimizer)");
    }
    return Outcome::fail(clipped_scaled(my_norm, scale, kClipNorm));
  }
  if (full.ok() && near(my_norm, grad_norm(full, init), 0.02) && !near(my_norm, kClipNorm, 0.05)) {
    return Outcome::fail("the gradients were not clipped: their norm is " + number_text(my_norm) + " with max_grad_norm=0.05; "
                         "call tiny::nn::utils::clip_grad_norm_(model.parameters(), max_grad_norm) after "
                         "scaler.unscale_(optimizer) and before scaler.step(optimizer)");
  }
  return Outcome::fail(*grads_wrong + "\n(norm of your gradients " + number_text(my_norm) + ", expected " +
                       number_text(grad_norm(ref, init)) + ")");
}

WORKBOOK_CHECK(amp_skip_inf, "with an inf in a step, the step is skipped, the scale halves, and it grows again after 3 clean steps") {
  constexpr int steps = 6, bad = 1;
  constexpr int64_t growth_interval = 3;
  Bundle in = step_inputs(ctx, 7, steps, kInitScale, growth_interval, kNoClip);
  // One huge feature: float16 tops out at 65504, so its cast to float16 is inf, and so are the gradients.
  const tiny::Tensor clean = in.tensor("x." + std::to_string(bad));
  std::vector<float> values = clean.contiguous().to_vector<float>();
  values[0] = 1e6f;
  in.put("x." + std::to_string(bad), tiny::from_vector(values, clean.sizes()));
  const std::string function = "amp_train_step";
  const std::string call = "6 steps of amp_train_step, step 2 with an input of 1e6 (GradScaler init_scale=1024, "
                           "growth_interval=3)";
  const Run mine = ctx.student("amp_steps", in, one_gpu(call));
  if (auto named = explain_error(mine, function)) return *named;
  if (auto early = ctx.unless_ok(mine)) return *early;
  const Run ref = ctx.reference("amp_steps", in, one_gpu(call));
  if (!ref.ok()) return Outcome::error("the reference solution failed on these inputs (a bug in the workbook): " + ref.message);
  const nlohmann::json& v = mine.out.values;
  const nlohmann::json& want = ref.out.values;
  if (want["stepped"][bad].get<bool>() || want["scales"][bad].get<double>() >= kInitScale) {
    return Outcome::error("the injected inf did not make the reference skip step 2 (a bug in the workbook): scales " +
                          values_text(want["scales"]) + ", stepped " + values_text(want["stepped"]));
  }
  if (auto why = probe_step(mine, ref, steps, function, "float16")) return *why;
  // Every step after the overflow skipped where the reference's went on: the inf stayed in the gradients.
  bool none_after = true, ref_after = false;
  for (int k = bad + 1; k < steps && k < static_cast<int>(v["stepped"].size()); ++k) {
    none_after = none_after && !v["stepped"][k].get<bool>();
    ref_after = ref_after || want["stepped"][k].get<bool>();
  }
  if (none_after && ref_after) {
    return Outcome::fail("after the overflow at step 2 every step was skipped (optimizer.step() ran: " +
                         values_text(v["stepped"]) + "; the reference's: " + values_text(want["stepped"]) +
                         "): the inf stayed in the gradients, because gradients add up until they are cleared. "
                         "Call optimizer.zero_grad() at the start of every step");
  }
  const bool ran_on_inf = v["stepped"].size() > bad && v["stepped"][bad].get<bool>();
  const bool moved_on_inf = v["params_changed"].size() > bad && v["params_changed"][bad].get<bool>();
  if (!ran_on_inf && moved_on_inf) {
    // The probe: optimizer.step() did not run (scaler.step skipped it), so something else moved the weights.
    return Outcome::fail("at step 2 the gradients were inf and optimizer.step() did not run (scaler.step skipped it), "
                         "and yet the weights changed: a step that should have been skipped was applied, by code after "
                         "scaler.step(optimizer) that changes the weights itself (weight decay or an update by hand?). "
                         "Only the optimizer, through scaler.step(optimizer), may change them");
  }
  if (ran_on_inf) {
    std::string why = "at step 2 the gradients were inf, and yet optimizer.step() ran";
    const nlohmann::json& finite = v["params_finite"];
    if (std::any_of(finite.begin(), finite.end(), [](const nlohmann::json& f) { return !f.get<bool>(); })) {
      why += " and the weights became inf or NaN";
    }
    why += ": use scaler.step(optimizer), not optimizer.step(): the scaler checks the gradients for inf and NaN "
           "and skips the step when it finds any (the scale is lowered and the next step tries again)";
    return Outcome::fail(why);
  }
  const nlohmann::json& scales = v["scales"];
  ctx.details["curves"]["GradScaler's scale after each step (an inf at step " + std::to_string(bad + 1) + ")"] = {
      {"yours", scales}, {"reference", want["scales"]}};
  if (scales != want["scales"]) {
    if (std::all_of(scales.begin(), scales.end(),
                    [](const nlohmann::json& s) { return s.get<double>() == kInitScale; })) {
      return Outcome::fail("the scale stayed at " + number_text(kInitScale) + " through all 6 steps (expected " +
                           values_text(want["scales"]) + "): call scaler.update() at the end of every step; it halves the "
                           "scale after a skipped step and doubles it after growth_interval clean steps");
    }
    return Outcome::fail("the scale after each step was " + values_text(scales) + ", expected " + values_text(want["scales"]) +
                         ": halved after the skipped step 2, doubled after 3 clean steps (one scaler.update() per step)");
  }
  if (v["stepped"] != want["stepped"]) {
    return Outcome::fail("optimizer.step() ran at steps " + values_text(v["stepped"]) + ", expected " + values_text(want["stepped"]) +
                         " (true: it ran)");
  }
  // Probe: step by step, did the weights move where the reference's did? A
  // skipped step that still moved them was applied some other way.
  for (int k = 0; k < steps && k < static_cast<int>(v["params_changed"].size()); ++k) {
    const bool moved = v["params_changed"][k].get<bool>(), ref_moved = want["params_changed"][k].get<bool>();
    if (moved == ref_moved) continue;
    if (moved) {
      return Outcome::fail("at step " + std::to_string(k + 1) + " optimizer.step() did not run, as in the reference, "
                           "and yet the weights changed: a step that should have been skipped was applied, by code "
                           "that changes the weights itself. Only the optimizer, through scaler.step(optimizer), may "
                           "change them");
    }
    return Outcome::fail("at step " + std::to_string(k + 1) + " the reference's weights moved and yours did not, "
                         "although optimizer.step() ran: were the gradients cleared between backward() and "
                         "scaler.step(optimizer)?");
  }
  if (auto why = updates_differ(mine, ref, in.state("init"), "6 steps (one skipped)", kHalfTol)) {
    return Outcome::fail(*why);
  }
  return Outcome::pass("scales " + values_text(scales) + "; step 2 skipped");
}

WORKBOOK_CHECK(amp_cache, "amp_train_step() at a batch of 4096 lets the caching allocator keep its blocks from step to step (no empty_cache())") {
  // At a batch of 4096 (the 16-256-256-10 MLP) each activation is a block of
  // 2-4 MiB, in a segment of its own that the cache keeps from step to step:
  // a step that gives it back makes the next one ask the device again.
  constexpr int steps = 3;
  Bundle in;
  put_model(in, ctx, kMemIn, kMemHidden);
  for (int k = 0; k < steps; ++k) {
    in.put("x." + std::to_string(k), features(ctx, 1200 + 2 * k, kMemBatch, kMemIn));
    in.put("y." + std::to_string(k), labels(ctx, 1201 + 2 * k, kMemBatch));
  }
  in.values["steps"] = steps;
  in.values["init_scale"] = kInitScale;
  in.values["growth_interval"] = 2000;
  in.values["max_grad_norm"] = kNoClip;
  in.values["watch_cache"] = true;
  const std::string call = "3 steps of amp_train_step at a batch of 4096 (16-256-256-10 MLP, GradScaler "
                           "init_scale=1024)";
  const Run mine = ctx.student("amp_steps", in, one_gpu(call));
  if (auto named = explain_error(mine, "amp_train_step")) return *named;
  if (auto early = ctx.unless_ok(mine)) return *early;
  const Run ref = ctx.reference("amp_steps", in, one_gpu(call));
  if (!ref.ok()) return Outcome::error("the reference solution failed on these inputs (a bug in the workbook): " + ref.message);
  const nlohmann::json& v = mine.out.values;
  const nlohmann::json& w = ref.out.values;
  // Allocations the cache could not serve went to the device (cudaMalloc on a
  // real GPU: slow, and it synchronizes); segments given back show as drops of
  // memory_reserved.
  const int64_t mallocs = v["step_mallocs"].get<int64_t>(), ref_mallocs = w["step_mallocs"].get<int64_t>();
  const int64_t frees = v["segment_frees"].get<int64_t>();
  ctx.details["device mallocs (allocations the cache did not serve)"] = {{"yours", mallocs}, {"reference", ref_mallocs}};
  ctx.details["curves"]["memory_reserved after each step (bytes)"] = {{"yours", v["reserved_after_step"]},
                                                                       {"reference", w["reserved_after_step"]}};
  std::string reserved;
  for (const nlohmann::json* r : {&v["reserved_after_step"], &w["reserved_after_step"]}) {
    std::string mibs;
    for (const nlohmann::json& b : *r) mibs += (mibs.empty() ? "" : ", ") + number_text(b.get<double>() / (1 << 20), 3);
    reserved += std::string(reserved.empty() ? "yours " : ", the reference's ") + mibs + " MiB";
  }
  if (frees > 0 && mallocs > ref_mallocs) {
    return Outcome::fail(call + ": your steps gave " + std::to_string(frees) + " segments back to the GPU, and " +
                         std::to_string(mallocs) + " allocations went to the device instead of the cache (the "
                         "reference: " + std::to_string(ref_mallocs) + "; memory_reserved after each step: " + reserved +
                         "): that is empty_cache() every step. It lowers memory_reserved and nothing else: the next "
                         "step asks the device again for the same memory (cudaMalloc, which is slow and "
                         "synchronizes). Let the cache keep its blocks; float16 already halved the activations");
  }
  if (mallocs > ref_mallocs + 2) {
    return Outcome::fail(call + ": " + std::to_string(mallocs) + " allocations went to the device, not the cache (the "
                         "reference: " + std::to_string(ref_mallocs) + "): something in your step keeps asking for new "
                         "memory; memory_summary() shows which sizes");
  }
  return Outcome::pass(std::to_string(mallocs) + " device mallocs in 3 steps, none given back: the cache served the "
                       "steps after the first");
}

WORKBOOK_CHECK(checkpoint, "save_checkpoint() and load_checkpoint() carry the model, the optimizer and the scaler into a fresh run") {
  Bundle in = step_inputs(ctx, 11, 4, kInitScale, 3, 1e9);
  const tiny::Tensor clean = in.tensor("x.1");
  std::vector<float> values = clean.contiguous().to_vector<float>();
  values[0] = 1e6f;  // step 2 overflows: the scale moves from its start
  in.put("x.1", tiny::from_vector(values, clean.sizes()));
  in.values["path"] = (ctx.work_dir / "lesson7_checkpoint.safetensors").string();
  const std::string call = "save_checkpoint after 4 float16 steps (GradScaler init_scale 1024, growth_interval 3, an "
                           "overflow at step 2), then load_checkpoint into a fresh model, SGD and GradScaler()";
  Run mine, ref;
  if (auto early = ctx.both("checkpoint", in, mine, ref, one_gpu(call))) return *early;
  const nlohmann::json& v = mine.out.values;
  if (!v["file_written"].get<bool>()) return Outcome::fail(call + ": save_checkpoint wrote no file at the path it was given");
  const double saved = v["saved_scale"].get<double>(), loaded = v["loaded_scale"].get<double>();
  if (loaded != saved) {
    return Outcome::fail(call + ": the scaler's state was not restored: the scale after loading is " + number_text(loaded) +
                         (loaded == v["fresh_scale"].get<double>() ? " (a fresh scaler's)" : "") + ", the saved run's " +
                         number_text(saved) + ". Save scaler.state_dict() (its metadata: the scale, the count of clean "
                         "steps, the factors) with the rest and give it back to scaler.load_state_dict(), as PyTorch's "
                         "checkpoints do: a resumed run would otherwise start again from the initial scale");
  }
  if (v["loaded_growth_tracker"] != v["saved_growth_tracker"]) {
    return Outcome::fail(call + ": the scaler's count of clean steps after loading is " +
                         values_text(v["loaded_growth_tracker"]) + ", the saved run's " +
                         values_text(v["saved_growth_tracker"]) + ": restore the whole scaler.state_dict()");
  }
  for (const auto& [what, label] : {std::pair<const char*, const char*>{"model", "the model's"},
                                    {"optimizer", "the optimizer's (SGD's momentum buffers)"}}) {
    const tiny::StateDict want = mine.out.state(std::string("saved_") + what);
    const tiny::StateDict got = mine.out.state(std::string("loaded_") + what);
    for (const auto& [name, t] : want) {
      if (!got.contains(name)) {
        return Outcome::fail(call + ": " + label + " state after loading has no " + name + ": save " + what +
                             ".state_dict() whole and load it with load_state_dict()");
      }
      if (auto why = workbook::differ(std::string(label) + " " + name + " after loading", got.at(name), t, 0, 0)) {
        return Outcome::fail(call + ": " + *why + "\n(save " + what + ".state_dict() and restore it with " + what +
                             ".load_state_dict(); a checkpoint keeps the values exactly)");
      }
    }
  }
  return Outcome::pass("scale " + number_text(loaded) + ", weights and momentum restored exactly");
}

WORKBOOK_CHECK(bf16_step, "bf16_train_step() matches the reference over 3 bfloat16 steps, the weights staying float32 (within 3e-2)") {
  constexpr int steps = 3;
  Bundle in;
  put_model(in, ctx, kIn, kHidden);
  put_batches(in, ctx, 8, steps);
  in.values["stale_grad"] = kStaleGrad;
  const std::string function = "bf16_train_step";
  const std::string call = "3 steps of bf16_train_step (SGD)";
  const Run mine = ctx.student("bf16_steps", in, one_gpu(call));
  if (auto named = explain_error(mine, function)) return *named;
  if (auto early = ctx.unless_ok(mine)) return *early;
  const Run ref = ctx.reference("bf16_steps", in, one_gpu(call));
  if (!ref.ok()) return Outcome::error("the reference solution failed on these inputs (a bug in the workbook): " + ref.message);
  ctx.details["curves"]["bfloat16 training loss per step"] = {{"yours", mine.out.values["losses"]},
                                                              {"reference", ref.out.values["losses"]}};
  if (auto why = probe_step(mine, ref, steps, function, "bfloat16")) return *why;
  const nlohmann::json& v = mine.out.values;
  if (v["stepped"] != ref.out.values["stepped"]) {
    return Outcome::fail("optimizer.step() ran at steps " + values_text(v["stepped"]) + ", expected " +
                         values_text(ref.out.values["stepped"]) + " (true: it ran): once per step, after backward()");
  }
  const tiny::StateDict init = in.state("init");
  const int k = first_loss_difference(v["losses"], ref.out.values["losses"], kBFloat16Tol);
  if (k >= 0) {
    std::string why = "the loss of step " + std::to_string(k + 1) + " differs beyond bfloat16 rounding (3e-2): your "
                      "losses " + values_text(v["losses"]) + ", expected " + values_text(ref.out.values["losses"]);
    if (k > 0) why += ": the steps before it match, so an update went wrong";
    return Outcome::fail(why);
  }
  if (auto why = grads_differ(mine, ref, init, "at step 3", kBFloat16Tol)) return Outcome::fail(*why);
  if (auto why = updates_differ(mine, ref, init, "3 steps", kBFloat16Tol)) return Outcome::fail(*why);
  return Outcome::pass("losses " + values_text(v["losses"]));
}
