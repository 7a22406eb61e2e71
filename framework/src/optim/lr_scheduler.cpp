// Learning-rate schedulers, following torch/optim/lr_scheduler.py (1.13) step by step.
#include "tiny/optim/lr_scheduler.h"

#include <cmath>

#include "tiny/error.h"

namespace tiny::optim {

namespace {
constexpr double kPi = 3.14159265358979323846;  // Python's math.pi
}

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (const ParamGroup& group : optimizer_.param_groups()) base_lrs_.push_back(group.lr());
}

void LRScheduler::initial_step() { step(); }

void LRScheduler::step() {
  auto& groups = optimizer_.param_groups();
  TINY_CHECK(groups.size() == base_lrs_.size(), ValueError, "lr scheduler: the optimizer has ", groups.size(),
             " param groups but had ", base_lrs_.size(), " when the scheduler was built; build the scheduler after "
             "the last add_param_group");
  ++last_epoch_;
  std::vector<double> lrs = get_lr();
  for (size_t g = 0; g < groups.size(); ++g) groups[g].set_lr(lrs[g]);
  last_lr_ = std::move(lrs);
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  TINY_CHECK(step_size >= 1, ValueError, "StepLR: step_size must be at least 1, got ", step_size);
  initial_step();
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

}  // namespace tiny::optim
