// Learning-rate schedulers, following torch/optim/lr_scheduler.py (1.13) step by step.
#include "tiny/optim/lr_scheduler.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>

#include "optim/optim_helpers.h"
#include "tiny/error.h"

namespace tiny::optim {

namespace {
constexpr double kPi = 3.14159265358979323846;  // Python's math.pi

using detail::format_option;

std::string join_doubles(const std::vector<double>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + format_option(values[i]);
  return out;
}

const std::string& metadata_at(const StateDict& sd, const std::string& key, const std::string& who) {
  auto it = sd.metadata.find(key);
  TINY_CHECK(it != sd.metadata.end(), ValueError, who, ".load_state_dict: the state dict has no entry '", key,
             "' (was it written by ", who, ".state_dict()?)");
  return it->second;
}

double parse_double(const std::string& key, const std::string& text) {
  if (text == "inf") return std::numeric_limits<double>::infinity();
  if (text == "-inf") return -std::numeric_limits<double>::infinity();
  if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  TINY_CHECK(!text.empty() && end == text.c_str() + text.size(), ValueError, "load_state_dict: '", key, "' = '",
             text, "' is not a number");
  return value;
}

int64_t parse_int(const std::string& key, const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  TINY_CHECK(ec == std::errc() && ptr == end, ValueError, "load_state_dict: '", key, "' = '", text,
             "' is not an integer");
  return value;
}

std::vector<double> parse_doubles(const std::string& key, const std::string& text) {
  std::vector<double> out;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    const size_t comma = text.find(',', start);
    out.push_back(parse_double(key, text.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  // PyTorch: group.setdefault('initial_lr', group['lr']); base_lrs = initial_lrs.
  for (ParamGroup& group : optimizer_.param_groups()) {
    if (!group.initial_lr) group.initial_lr = group.lr();
    base_lrs_.push_back(*group.initial_lr);
  }
}

void LRScheduler::initial_step() { step(); }

void LRScheduler::apply(std::vector<double> lrs) {
  auto& groups = optimizer_.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) groups[g].set_lr(lrs[g]);
  last_lr_ = std::move(lrs);
}

void LRScheduler::step() {
  const size_t groups = optimizer_.param_groups().size();
  TINY_CHECK(groups == base_lrs_.size(), ValueError, "lr scheduler: the optimizer has ", groups,
             " param groups but had ", base_lrs_.size(), " when the scheduler was built; build the scheduler after "
             "the last add_param_group");
  ++last_epoch_;
  apply(get_lr());
}

void LRScheduler::step_to(int64_t epoch) {
  last_epoch_ = epoch;
  std::optional<std::vector<double>> closed = closed_form_lr();
  apply(closed ? std::move(*closed) : get_lr());
}

void LRScheduler::save_to(StateDict& sd, const std::string& prefix) const {
  sd.metadata[prefix + "scheduler"] = name();
  sd.metadata[prefix + "last_epoch"] = std::to_string(last_epoch_);
  sd.metadata[prefix + "base_lrs"] = join_doubles(base_lrs_);
  sd.metadata[prefix + "last_lr"] = join_doubles(last_lr_);
  save_extra(sd, prefix);
}

void LRScheduler::load_from(const StateDict& sd, const std::string& prefix, bool check_only) {
  const std::string& saved = metadata_at(sd, prefix + "scheduler", name());
  TINY_CHECK(saved == name(), ValueError, "load_state_dict: the state dict was saved by a ", saved,
             " but this scheduler is a ", name(), "; load it into the same kind of scheduler");
  const int64_t epoch = parse_int(prefix + "last_epoch", metadata_at(sd, prefix + "last_epoch", name()));
  std::vector<double> base = parse_doubles(prefix + "base_lrs", metadata_at(sd, prefix + "base_lrs", name()));
  std::vector<double> last = parse_doubles(prefix + "last_lr", metadata_at(sd, prefix + "last_lr", name()));
  TINY_CHECK(base.size() == base_lrs_.size() && last.size() == base_lrs_.size(), ValueError,
             "load_state_dict: the state dict's ", name(), " drove ", base.size(), " param groups but this one drives ",
             base_lrs_.size(), "; build the optimizer with the same param groups");
  TINY_CHECK(epoch >= -1, ValueError, "load_state_dict: last_epoch = ", epoch, " is below -1");
  load_extra(sd, prefix, true);
  if (check_only) return;
  load_extra(sd, prefix, false);
  last_epoch_ = epoch;
  base_lrs_ = std::move(base);
  last_lr_ = std::move(last);
}

StateDict LRScheduler::state_dict() const {
  StateDict sd;
  save_to(sd, "");
  return sd;
}

void LRScheduler::load_state_dict(const StateDict& sd) {
  load_from(sd, "", true);
  load_from(sd, "", false);
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  TINY_CHECK(step_size >= 1, ValueError, "StepLR: step_size must be at least 1, got ", step_size);
  initial_step();
}

std::optional<std::vector<double>> StepLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double base : base_lrs()) {
    lrs.push_back(base * std::pow(gamma_, static_cast<double>(last_epoch() / step_size_)));
  }
  return lrs;
}

std::vector<double> StepLR::get_lr() const {
  std::vector<double> lrs;
  const bool boundary = last_epoch() != 0 && last_epoch() % step_size_ == 0;
  for (const ParamGroup& group : optimizer_.param_groups()) lrs.push_back(boundary ? group.lr() * gamma_ : group.lr());
  return lrs;
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
  TINY_CHECK(T_max >= 1, ValueError, "CosineAnnealingLR: T_max must be at least 1, got ", T_max);
  initial_step();
}

std::optional<std::vector<double>> CosineAnnealingLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double base : base_lrs()) {
    lrs.push_back(eta_min_ + (base - eta_min_) *
                                 (1 + std::cos(kPi * static_cast<double>(last_epoch()) / static_cast<double>(T_max_))) /
                                 2);
  }
  return lrs;
}

std::vector<double> CosineAnnealingLR::get_lr() const {
  // PyTorch's recursive ("chainable") form. (Its branch for a scheduler built
  // with last_epoch > 0 does not apply: tiny's always start at epoch 0.)
  const auto& groups = optimizer_.param_groups();
  const int64_t epoch = last_epoch();
  const double T = static_cast<double>(T_max_);
  std::vector<double> lrs;
  for (size_t g = 0; g < groups.size(); ++g) {
    const double lr = groups[g].lr();
    if (epoch == 0) {
      lrs.push_back(lr);
    } else if ((epoch - 1 - T_max_) % (2 * T_max_) == 0) {
      lrs.push_back(lr + (base_lrs()[g] - eta_min_) * (1 - std::cos(kPi / T)) / 2);
    } else {
      lrs.push_back((1 + std::cos(kPi * static_cast<double>(epoch) / T)) /
                        (1 + std::cos(kPi * static_cast<double>(epoch - 1) / T)) * (lr - eta_min_) +
                    eta_min_);
    }
  }
  return lrs;
}

// ------------------------------------------------------------------ MultiStepLR

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

std::vector<double> MultiStepLR::get_lr() const {
  // PyTorch: lr * gamma ** milestones[last_epoch] (a Counter: repeated milestones decay repeatedly).
  const auto count = std::count(milestones_.begin(), milestones_.end(), last_epoch());
  std::vector<double> lrs;
  for (const ParamGroup& group : optimizer_.param_groups()) {
    lrs.push_back(count == 0 ? group.lr() : group.lr() * std::pow(gamma_, static_cast<double>(count)));
  }
  return lrs;
}

std::optional<std::vector<double>> MultiStepLR::closed_form_lr() const {
  // bisect_right(sorted milestones, last_epoch)
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch()) - milestones_.begin();
  std::vector<double> lrs;
  for (double base : base_lrs()) lrs.push_back(base * std::pow(gamma_, static_cast<double>(passed)));
  return lrs;
}

// ------------------------------------------------------------------ LambdaLR

LambdaLR::LambdaLR(Optimizer& optimizer, LrLambda lr_lambda)
    : LambdaLR(optimizer, std::vector<LrLambda>(optimizer.param_groups().size(), lr_lambda)) {}

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<LrLambda> lr_lambdas)
    : LRScheduler(optimizer), lr_lambdas_(std::move(lr_lambdas)) {
  TINY_CHECK(lr_lambdas_.size() == optimizer.param_groups().size(), ValueError, "Expected ",
             optimizer.param_groups().size(), " lr_lambdas, but got ", lr_lambdas_.size(),
             " (pass one function for all groups, or one per param group)");
  for (size_t g = 0; g < lr_lambdas_.size(); ++g) {
    TINY_CHECK(static_cast<bool>(lr_lambdas_[g]), ValueError, "LambdaLR: lr_lambda ", g,
               " is empty; pass a function of the epoch, e.g. [](int64_t epoch) { return 0.95 ^ epoch; }");
  }
  initial_step();
}

std::vector<double> LambdaLR::get_lr() const {
  std::vector<double> lrs;
  for (size_t g = 0; g < lr_lambdas_.size(); ++g) lrs.push_back(base_lrs()[g] * lr_lambdas_[g](last_epoch()));
  return lrs;
}

// ------------------------------------------------------------------ LinearLR

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  // PyTorch 1.13 accepts start_factor 0 and total_iters 0 and then divides by zero
  // at the first step (ZeroDivisionError); later versions refuse start_factor 0.
  TINY_CHECK(start_factor > 0.0 && start_factor <= 1.0, ValueError,
             "Starting multiplicative factor expected to be greater than 0 and less or equal to 1, got start_factor=",
             format_option(start_factor));
  TINY_CHECK(end_factor >= 0.0 && end_factor <= 1.0, ValueError,
             "Ending multiplicative factor expected to be between 0 and 1, got end_factor=", format_option(end_factor));
  TINY_CHECK(total_iters >= 1, ValueError, "LinearLR: total_iters must be at least 1, got ", total_iters,
             " (the number of epochs the factor takes to go from start_factor to end_factor)");
  initial_step();
}

std::vector<double> LinearLR::get_lr() const {
  const int64_t epoch = last_epoch();
  std::vector<double> lrs;
  for (const ParamGroup& group : optimizer_.param_groups()) {
    if (epoch == 0) {
      lrs.push_back(group.lr() * start_factor_);
    } else if (epoch > total_iters_) {
      lrs.push_back(group.lr());
    } else {
      const double delta = end_factor_ - start_factor_;
      lrs.push_back(group.lr() * (1. + delta / (static_cast<double>(total_iters_) * start_factor_ +
                                               static_cast<double>(epoch - 1) * delta)));
    }
  }
  return lrs;
}

std::optional<std::vector<double>> LinearLR::closed_form_lr() const {
  std::vector<double> lrs;
  const double progress = static_cast<double>(std::min(total_iters_, last_epoch()));
  for (double base : base_lrs()) {
    lrs.push_back(base * (start_factor_ + (end_factor_ - start_factor_) * progress / static_cast<double>(total_iters_)));
  }
  return lrs;
}

// ------------------------------------------------------------------ OneCycleLR

namespace {
enum LrKey { kInitialLr = 0, kMaxLr = 1, kMinLr = 2 };
enum MomentumKey { kMaxMomentum = 0, kBaseMomentum = 1 };

int64_t one_cycle_total_steps(const OneCycleLROptions& o) {
  if (o.total_steps != 0) {
    TINY_CHECK(o.total_steps > 0, ValueError, "Expected positive integer total_steps, but got ", o.total_steps);
    return o.total_steps;
  }
  TINY_CHECK(o.epochs != 0 || o.steps_per_epoch != 0, ValueError,
             "You must define either total_steps OR (epochs AND steps_per_epoch)");
  TINY_CHECK(o.epochs > 0, ValueError, "Expected positive integer epochs, but got ", o.epochs);
  TINY_CHECK(o.steps_per_epoch > 0, ValueError, "Expected positive integer steps_per_epoch, but got ",
             o.steps_per_epoch);
  return o.epochs * o.steps_per_epoch;
}
}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, const OneCycleLROptions& options)
    : OneCycleLR(optimizer, std::vector<double>(optimizer.param_groups().size(), max_lr), options) {}

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, const OneCycleLROptions& options)
    : LRScheduler(optimizer), options_(options), total_steps_(one_cycle_total_steps(options)) {
  const OneCycleLROptions& o = options_;
  TINY_CHECK(o.pct_start >= 0.0 && o.pct_start <= 1.0, ValueError,
             "Expected float between 0 and 1 pct_start, but got ", format_option(o.pct_start));
  TINY_CHECK(o.anneal_strategy == "cos" || o.anneal_strategy == "linear", ValueError,
             "anneal_strategy must by one of 'cos' or 'linear', instead got ", o.anneal_strategy);
  auto& groups = optimizer.param_groups();
  TINY_CHECK(max_lrs.size() == groups.size(), ValueError, "expected ", groups.size(), " values for max_lr, got ",
             max_lrs.size());
  TINY_CHECK(o.div_factor > 0.0 && o.final_div_factor > 0.0, ValueError,
             "OneCycleLR: div_factor and final_div_factor must be > 0, got ", format_option(o.div_factor), " and ",
             format_option(o.final_div_factor), " (initial_lr = max_lr / div_factor, min_lr = initial_lr / "
             "final_div_factor)");
  const double total = static_cast<double>(total_steps_);
  if (o.three_phase) {
    phases_ = {{o.pct_start * total - 1, kInitialLr, kMaxLr, kMaxMomentum, kBaseMomentum},
               {2 * o.pct_start * total - 2, kMaxLr, kInitialLr, kBaseMomentum, kMaxMomentum},
               {total - 1, kInitialLr, kMinLr, kMaxMomentum, kMaxMomentum}};
  } else {
    phases_ = {{o.pct_start * total - 1, kInitialLr, kMaxLr, kMaxMomentum, kBaseMomentum},
               {total - 1, kMaxLr, kMinLr, kBaseMomentum, kMaxMomentum}};
  }
  if (o.cycle_momentum) {
    const OptionMap& defaults = optimizer.defaults();
    momentum_key_ = defaults.count("beta1") ? "beta1" : defaults.count("momentum") ? "momentum" : "";
    TINY_CHECK(!momentum_key_.empty(), ValueError, "optimizer must support momentum with `cycle_momentum` option "
               "enabled (", optimizer.name(), " has neither momentum nor betas): pass cycle_momentum=false");
  }
  // Everything checked: PyTorch overwrites initial_lr (and the momentum) here.
  for (size_t g = 0; g < groups.size(); ++g) {
    initial_lrs_.push_back(max_lrs[g] / o.div_factor);
    max_lrs_.push_back(max_lrs[g]);
    min_lrs_.push_back(initial_lrs_[g] / o.final_div_factor);
    groups[g].initial_lr = initial_lrs_[g];
    if (!momentum_key_.empty()) groups[g].options[momentum_key_] = o.max_momentum;
  }
  // The base constructor read the old initial_lr; PyTorch's reads the new one.
  base_lrs_ = initial_lrs_;
  initial_step();
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (options_.anneal_strategy == "cos") {
    const double cos_out = std::cos(kPi * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
  }
  return (end - start) * pct + start;
}

void OneCycleLR::step() {
  TINY_CHECK(last_epoch() + 1 <= total_steps_, ValueError, "Tried to step ", last_epoch() + 2,
             " times. The specified number of total steps is ", total_steps_,
             " (OneCycleLR steps once per batch: build it with total_steps = epochs * steps_per_epoch, or "
             "epochs and steps_per_epoch)");
  LRScheduler::step();
}

std::vector<double> OneCycleLR::get_lr() const {
  const double step_num = static_cast<double>(last_epoch());
  auto& groups = optimizer_.param_groups();
  std::vector<double> lrs;
  for (size_t g = 0; g < groups.size(); ++g) {
    const double lr_at[3] = {initial_lrs_[g], max_lrs_[g], min_lrs_[g]};
    const double momentum_at[2] = {options_.max_momentum, options_.base_momentum};
    double start_step = 0, lr = 0, momentum = 0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& phase = phases_[i];
      if (step_num <= phase.end_step || i == phases_.size() - 1) {
        const double pct = (step_num - start_step) / (phase.end_step - start_step);
        lr = anneal(lr_at[phase.start_lr], lr_at[phase.end_lr], pct);
        momentum = anneal(momentum_at[phase.start_momentum], momentum_at[phase.end_momentum], pct);
        break;
      }
      start_step = phase.end_step;
    }
    lrs.push_back(lr);
    if (!momentum_key_.empty()) groups[g].options[momentum_key_] = momentum;
  }
  return lrs;
}

// ------------------------------------------------------------------ SequentialLR

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(optimizer), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  TINY_CHECK(!schedulers_.empty(), ValueError, "SequentialLR: the list of schedulers is empty");
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    TINY_CHECK(schedulers_[i] != nullptr, ValueError, "SequentialLR: scheduler ", i, " is null");
    TINY_CHECK(&schedulers_[i]->optimizer_ == &optimizer, ValueError,
               "Sequential Schedulers expects all schedulers to belong to the same optimizer, but got schedulers at "
               "index ", i, " to be different than the optimizer passed in (build every scheduler on the optimizer "
               "given to SequentialLR)");
  }
  TINY_CHECK(milestones_.size() + 1 == schedulers_.size(), ValueError,
             "Sequential Schedulers expects number of schedulers provided to be one more than the number of "
             "milestone points, but got number of schedulers ", schedulers_.size(),
             " and the number of milestones to be equal to ", milestones_.size());
  // PyTorch: reset the lrs to initial_lr, undo the schedulers' initial steps, then
  // redo only the first scheduler's.
  for (ParamGroup& group : optimizer.param_groups()) group.set_lr(*group.initial_lr);
  for (auto& s : schedulers_) s->last_epoch_ -= 1;
  schedulers_[0]->initial_step();
  last_epoch_ = 0;
  last_lr_ = schedulers_[0]->get_last_lr();
}

void SequentialLR::step() {
  ++last_epoch_;
  const size_t idx = static_cast<size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) -
                                         milestones_.begin());
  LRScheduler& scheduler = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == last_epoch_) {
    scheduler.step_to(0);
  } else {
    scheduler.step();
  }
  last_lr_ = scheduler.get_last_lr();
}

std::vector<double> SequentialLR::get_lr() const { return get_last_lr(); }

StateDict SequentialLR::state_dict() const {
  StateDict sd;
  save_to(sd, "");
  for (size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->save_to(sd, "schedulers." + std::to_string(i) + ".");
  return sd;
}

void SequentialLR::load_state_dict(const StateDict& sd) {
  load_from(sd, "", true);
  for (size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_from(sd, "schedulers." + std::to_string(i) + ".", true);
  load_from(sd, "", false);
  for (size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_from(sd, "schedulers." + std::to_string(i) + ".", false);
}

// ------------------------------------------------------------------ ReduceLROnPlateau

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, const ReduceLROnPlateauOptions& options)
    : optimizer_(optimizer), options_(options) {
  const ReduceLROnPlateauOptions& o = options_;
  const size_t groups = optimizer.param_groups().size();
  TINY_CHECK(o.factor < 1.0, ValueError, "Factor should be < 1.0. (got factor=", format_option(o.factor),
             "; new_lr = lr * factor)");
  TINY_CHECK(o.factor >= 0.0, ValueError, "ReduceLROnPlateau: factor must be >= 0, got ", format_option(o.factor));
  TINY_CHECK(o.min_lr.size() == 1 || o.min_lr.size() == groups, ValueError, "expected ", groups, " min_lrs, got ",
             o.min_lr.size());
  TINY_CHECK(o.mode == "min" || o.mode == "max", ValueError, "mode ", o.mode, " is unknown! (use \"min\" or \"max\")");
  TINY_CHECK(o.threshold_mode == "rel" || o.threshold_mode == "abs", ValueError, "threshold mode ", o.threshold_mode,
             " is unknown! (use \"rel\" or \"abs\")");
  TINY_CHECK(o.patience >= 0, ValueError, "ReduceLROnPlateau: patience must be >= 0, got ", o.patience);
  TINY_CHECK(o.cooldown >= 0, ValueError, "ReduceLROnPlateau: cooldown must be >= 0, got ", o.cooldown);
  min_lrs_ = o.min_lr.size() == 1 ? std::vector<double>(groups, o.min_lr[0]) : o.min_lr;
  best_ = o.mode == "min" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  for (const ParamGroup& group : optimizer.param_groups()) last_lr_.push_back(group.lr());
}

bool ReduceLROnPlateau::is_better(double a, double best) const {
  const bool rel = options_.threshold_mode == "rel";
  if (options_.mode == "min") return rel ? a < best * (1. - options_.threshold) : a < best - options_.threshold;
  return rel ? a > best * (options_.threshold + 1.) : a > best + options_.threshold;
}

void ReduceLROnPlateau::step() {
  TINY_THROW(ValueError, "ReduceLROnPlateau.step() missing 1 required positional argument: 'metrics': pass the "
             "metric it watches, e.g. scheduler.step(val_loss)");
}

void ReduceLROnPlateau::step(double metric) {
  auto& groups = optimizer_.param_groups();
  TINY_CHECK(groups.size() == min_lrs_.size(), ValueError, "ReduceLROnPlateau: the optimizer has ", groups.size(),
             " param groups but had ", min_lrs_.size(), " when the scheduler was built; build the scheduler after "
             "the last add_param_group");
  last_epoch_ += 1;
  if (is_better(metric, best_)) {  // a NaN metric is never better: it counts as a bad epoch, as in PyTorch
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    num_bad_epochs_ += 1;
  }
  if (cooldown_counter_ > 0) {
    cooldown_counter_ -= 1;
    num_bad_epochs_ = 0;  // ignore any bad epochs in cooldown
  }
  if (num_bad_epochs_ > options_.patience) {
    for (size_t g = 0; g < groups.size(); ++g) {
      const double old_lr = groups[g].lr();
      const double new_lr = std::max(old_lr * options_.factor, min_lrs_[g]);
      if (old_lr - new_lr > options_.eps) groups[g].set_lr(new_lr);
    }
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
  }
  last_lr_.clear();
  for (const ParamGroup& group : groups) last_lr_.push_back(group.lr());
}

StateDict ReduceLROnPlateau::state_dict() const {
  StateDict sd;
  sd.metadata["scheduler"] = name();
  sd.metadata["last_epoch"] = std::to_string(last_epoch_);
  sd.metadata["best"] = format_option(best_);
  sd.metadata["num_bad_epochs"] = std::to_string(num_bad_epochs_);
  sd.metadata["cooldown_counter"] = std::to_string(cooldown_counter_);
  sd.metadata["last_lr"] = join_doubles(last_lr_);
  return sd;
}

void ReduceLROnPlateau::load_state_dict(const StateDict& sd) {
  const std::string& saved = metadata_at(sd, "scheduler", name());
  TINY_CHECK(saved == name(), ValueError, "load_state_dict: the state dict was saved by a ", saved,
             " but this scheduler is a ", name(), "; load it into the same kind of scheduler");
  const int64_t epoch = parse_int("last_epoch", metadata_at(sd, "last_epoch", name()));
  const double best = parse_double("best", metadata_at(sd, "best", name()));
  const int64_t bad = parse_int("num_bad_epochs", metadata_at(sd, "num_bad_epochs", name()));
  const int64_t cooldown = parse_int("cooldown_counter", metadata_at(sd, "cooldown_counter", name()));
  std::vector<double> last = parse_doubles("last_lr", metadata_at(sd, "last_lr", name()));
  TINY_CHECK(last.size() == min_lrs_.size(), ValueError, "load_state_dict: the state dict's ReduceLROnPlateau "
             "drove ", last.size(), " param groups but this one drives ", min_lrs_.size());
  TINY_CHECK(epoch >= 0 && bad >= 0 && cooldown >= 0, ValueError, "load_state_dict: negative counters (last_epoch ",
             epoch, ", num_bad_epochs ", bad, ", cooldown_counter ", cooldown, ")");
  last_epoch_ = epoch;
  best_ = best;
  num_bad_epochs_ = bad;
  cooldown_counter_ = cooldown;
  last_lr_ = std::move(last);
}

}  // namespace tiny::optim
