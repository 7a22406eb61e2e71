# Lesson 7's classic mistakes: each is the reference with one change, and must
# fail its check with a message that names the mistake.

workbook_mistake(forward_without_autocast CHECK amp_forward MESSAGE "the forward pass did not run under autocast"
  FIND [=[  tiny::amp::autocast guard("cuda", tiny::kFloat16);  // until the end of this scope]=]
  REPLACE [=[]=])

workbook_mistake(whole_model_half CHECK amp_step MESSAGE "the model's weights are float16"
  FIND [=[  const Tensor loss = amp_forward(model, x, y);    // autocast covers the forward pass and the loss only]=]
  REPLACE [=[  model.to(tiny::kFloat16);  // "mixed precision": the whole model in half
  const Tensor loss = amp_forward(model, x, y);]=])

workbook_mistake(unscaled_backward CHECK amp_step MESSAGE "you called backward on the unscaled loss"
  FIND [=[  scaler.scale(loss).backward();                   // gradients of loss * scale: no float16 underflow]=]
  REPLACE [=[  loss.backward();]=])

workbook_mistake(autocast_around_step CHECK amp_step MESSAGE "autocast should cover only the forward pass and the loss"
  FIND [=[  optimizer.zero_grad();                           // set_to_none: the previous step's gradients go]=]
  REPLACE [=[  tiny::amp::autocast guard("cuda", tiny::kFloat16);  // the whole step under autocast
  optimizer.zero_grad();]=])

workbook_mistake(clip_before_unscale CHECK amp_clip MESSAGE "you clipped the scaled gradients"
  FIND [=[  scaler.unscale_(optimizer);                      // the true gradients again, before anything reads them
  tiny::nn::utils::clip_grad_norm_(model.parameters(), max_grad_norm);]=]
  REPLACE [=[  tiny::nn::utils::clip_grad_norm_(model.parameters(), max_grad_norm);
  scaler.unscale_(optimizer);]=])

workbook_mistake(no_clipping CHECK amp_clip MESSAGE "the gradients were not clipped"
  FIND [=[  tiny::nn::utils::clip_grad_norm_(model.parameters(), max_grad_norm);]=]
  REPLACE [=[  (void)max_grad_norm;  // no clipping]=])

workbook_mistake(optimizer_step_not_scaler_step CHECK amp_skip_inf MESSAGE "use scaler.step(optimizer), not optimizer.step()"
  FIND [=[  scaler.step(optimizer);                          // skipped when a gradient is inf or NaN]=]
  REPLACE [=[  optimizer.step();]=])

workbook_mistake(no_scaler_update CHECK amp_skip_inf MESSAGE "call scaler.update() at the end of every step"
  FIND [=[  scaler.update();                                 // back off after a skip, grow after a run of clean steps]=]
  REPLACE [=[]=])

workbook_mistake(bf16_default_dtype CHECK bf16_step MESSAGE "autocast ran in float16, not bfloat16"
  FIND [=[    tiny::amp::autocast guard("cuda", tiny::kBFloat16);  // bfloat16: float32's exponent range]=]
  REPLACE [=[    tiny::amp::autocast guard("cuda");]=])

workbook_mistake(bf16_whole_model CHECK bf16_step MESSAGE "the model's weights are bfloat16"
  FIND [=[    loss = F::cross_entropy(model(x), y);]=]
  REPLACE [=[    model.to(tiny::kBFloat16);
    loss = F::cross_entropy(model(x), y);]=])

# Right in its numbers, wrong in its products: the model runs in float32 and only
# its output is cast to float16. Only the GEMM counters see it.
workbook_mistake(float32_products CHECK amp_forward MESSAGE "products did not run in float16"
  FIND [=[  tiny::amp::autocast guard("cuda", tiny::kFloat16);  // until the end of this scope
  const Tensor logits = model(x);                      // float16: the matmuls ran in half precision]=]
  REPLACE [=[  const Tensor logits = model(x).to(tiny::kFloat16);  // float32 products, float16 numbers
  tiny::amp::autocast guard("cuda", tiny::kFloat16);]=])

# "TF32 is fast enough": float32 products on tensor cores, numbers within bfloat16's tolerance.
workbook_mistake(tf32_for_bf16 CHECK bf16_step MESSAGE "products did not run in bfloat16"
  FIND [=[    tiny::amp::autocast guard("cuda", tiny::kBFloat16);  // bfloat16: float32's exponent range]=]
  REPLACE [=[    tiny::set_float32_matmul_precision("high");  // TF32 instead of autocast]=])

# Weight decay by hand after scaler.step(): it also runs at the step the scaler skipped, so a
# skipped step changes the weights (a step that should have been skipped was applied).
workbook_mistake(decay_after_skipped_step CHECK amp_skip_inf MESSAGE "a step that should have been skipped was applied"
  FIND [=[  scaler.step(optimizer);                          // skipped when a gradient is inf or NaN]=]
  REPLACE [=[  scaler.step(optimizer);
  {
    tiny::NoGradGuard no_grad;
    for (const Tensor& p : model.parameters()) p.mul_(1.0 - 1e-3);  // weight decay, "after every step"
  }]=])

# Issue 21: a missing zero_grad() was blamed on scaler.update().
workbook_mistake(no_zero_grad CHECK amp_skip_inf MESSAGE "did not clear the gradients"
  FIND [=[  optimizer.zero_grad();                           // set_to_none: the previous step's gradients go]=]
  REPLACE [=[]=])

# Issue 21: update() before step() was named "you clipped the scaled gradients".
workbook_mistake(update_before_step CHECK amp_clip MESSAGE "scaler.update() ran before scaler.step(optimizer)"
  FIND [=[  scaler.step(optimizer);                          // skipped when a gradient is inf or NaN
  scaler.update();                                 // back off after a skip, grow after a run of clean steps]=]
  REPLACE [=[  scaler.update();
  scaler.step(optimizer);]=])

# The scaler by hand: right values, one wait for the GPU per gradient.
workbook_mistake(unscale_item_per_gradient CHECK unscale_grads MESSAGE "waited for the GPU"
  FIND [=[    const Tensor largest = g.abs().max();
    worst = worst.defined() ? tiny::maximum(worst, largest) : largest;  // maximum keeps a NaN]=]
  REPLACE [=[    const Tensor largest = g.abs().max();
    if (!worst.defined() || !std::isfinite(largest.item<double>())) worst = largest;  // a wait per gradient]=])

# The exercise in one call: GradScaler's own fused helper, right in its values and its one wait.
workbook_mistake(unscale_with_amp_helper CHECK unscale_grads MESSAGE "called amp's own helpers"
  FIND [=[  Tensor worst;  // the largest |gradient| of all, kept on the GPU: inf or NaN when any element is
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    const Tensor largest = g.abs().max();
    worst = worst.defined() ? tiny::maximum(worst, largest) : largest;  // maximum keeps a NaN
    g.mul_(1.0 / scale);  // in place: the optimizer reads p.grad()
  }
  return worst.defined() && !std::isfinite(worst.item<double>());  // the one wait for the GPU]=]
  REPLACE [=[  const tiny::Device gpu("cuda:0");
  const Tensor found_inf = tiny::zeros({1}, tiny::TensorOptions(gpu));
  tiny::amp::foreach_non_finite_check_and_unscale_(grads, found_inf, tiny::full({1}, 1.0 / scale).to(gpu));
  return found_inf.item<double>() > 0;]=])

# The same helper in the step instead of your unscale_grads_: right in its values.
workbook_mistake(scaled_step_with_amp_helper CHECK scaled_step MESSAGE "with your unscale_grads_ and update_scale"
  FIND [=[  const bool found_inf = unscale_grads_(grads, state.scale);]=]
  REPLACE [=[  const Tensor inf_flag = tiny::zeros({1}, tiny::TensorOptions(loss.device()));
  tiny::amp::foreach_non_finite_check_and_unscale_(grads, inf_flag, tiny::full({1}, 1.0 / state.scale).to(loss.device()));
  const bool found_inf = inf_flag.item<double>() > 0;]=])

# The flag copied to the host with non_blocking and read unwaited: a race on a real GPU (right
# whenever the copy wins it), stale every time in the check's deferred mode (an inf missed, the
# step not skipped; in threaded mode the host read first in 8 runs of 8 too, which is timing).
workbook_mistake(found_inf_not_waited CHECK unscale_grads MESSAGE "you read the host copy before the copy finished"
  FIND [=[  return worst.defined() && !std::isfinite(worst.item<double>());  // the one wait for the GPU]=]
  REPLACE [=[  if (!worst.defined()) return false;
  const Tensor flag = worst.to(tiny::Device("cpu"), /*non_blocking=*/true);  // "no wait: faster"
  return !std::isfinite(flag.item<double>());]=])

workbook_mistake(update_no_tracker_reset CHECK update_scale MESSAGE "start counting clean steps again"
  FIND [=[    state.scale *= state.backoff_factor;  // too large: some gradient overflowed
    state.growth_tracker = 0;]=]
  REPLACE [=[    state.scale *= state.backoff_factor;]=])

workbook_mistake(scaled_step_ignores_inf CHECK scaled_step MESSAGE "the gradients were inf"
  FIND [=[  if (!found_inf) optimizer.step();  // an inf or NaN gradient would ruin the weights: skip the step]=]
  REPLACE [=[  (void)found_inf;
  optimizer.step();]=])

# Right answers written another way, which must pass (dev.alternative.7.*): the
# exact comparisons of unscale_grads must not reject a division or another
# inf/NaN test, nor the stale-gradient probe a zero_grad that writes zeros.
workbook_alternative(unscale_by_sum CHECKS unscale_grads scaled_step
  FIND [=[    const Tensor largest = g.abs().max();
    worst = worst.defined() ? tiny::maximum(worst, largest) : largest;  // maximum keeps a NaN
    g.mul_(1.0 / scale);  // in place: the optimizer reads p.grad()]=]
  REPLACE [=[    const Tensor total = g.sum();  // inf or NaN when any element is (inf - inf is NaN)
    worst = worst.defined() ? worst + total : total;
    g.div_(scale);]=])

workbook_alternative(zeros_not_none CHECKS scaled_step
  FIND [=[  optimizer.zero_grad();
  const Tensor loss = amp_forward(model, x, y);
  (loss * state.scale).backward();]=]
  REPLACE [=[  model.zero_grad(/*set_to_none=*/false);
  const Tensor loss = amp_forward(model, x, y);
  (loss * state.scale).backward();]=])

# A checkpoint without the scaler: the resumed run starts again from the initial scale.
workbook_mistake(checkpoint_without_scaler CHECK checkpoint MESSAGE "the scaler's state was not restored"
  FIND [=[  for (const auto& [key, value] : scaler.state_dict().metadata) all.metadata["scaler." + key] = value;  // numbers only
  tiny::save(all, path);
  // END SOLUTION
}

void load_checkpoint(const std::string& path, tiny::nn::Module& model, tiny::optim::Optimizer& optimizer,
                     tiny::amp::GradScaler& scaler) {
  // BEGIN SOLUTION: the model, the optimizer and the scaler as save_checkpoint saved them
  const tiny::StateDict all = tiny::load(path);
  tiny::StateDict parts[3];  // model, optimizer, scaler
  const std::string prefixes[3] = {"model.", "optimizer.", "scaler."};
  for (int i = 0; i < 3; ++i) {
    for (const auto& [name, t] : all) {
      if (name.rfind(prefixes[i], 0) == 0) parts[i].insert(name.substr(prefixes[i].size()), t);
    }
    for (const auto& [key, value] : all.metadata) {
      if (key.rfind(prefixes[i], 0) == 0) parts[i].metadata[key.substr(prefixes[i].size())] = value;
    }
  }
  model.load_state_dict(parts[0]);      // copied into the weights where they are (cuda:0)
  optimizer.load_state_dict(parts[1]);  // the momentum buffers, moved to their parameters' device
  scaler.load_state_dict(parts[2]);     // the scale and the count of clean steps]=]
  REPLACE [=[  (void)scaler;  // "the scaler is rebuilt at start"
  tiny::save(all, path);
  // END SOLUTION
}

void load_checkpoint(const std::string& path, tiny::nn::Module& model, tiny::optim::Optimizer& optimizer,
                     tiny::amp::GradScaler& scaler) {
  // BEGIN SOLUTION: the model, the optimizer and the scaler as save_checkpoint saved them
  const tiny::StateDict all = tiny::load(path);
  tiny::StateDict parts[3];  // model, optimizer, scaler
  const std::string prefixes[3] = {"model.", "optimizer.", "scaler."};
  for (int i = 0; i < 3; ++i) {
    for (const auto& [name, t] : all) {
      if (name.rfind(prefixes[i], 0) == 0) parts[i].insert(name.substr(prefixes[i].size()), t);
    }
    for (const auto& [key, value] : all.metadata) {
      if (key.rfind(prefixes[i], 0) == 0) parts[i].metadata[key.substr(prefixes[i].size())] = value;
    }
  }
  model.load_state_dict(parts[0]);      // copied into the weights where they are (cuda:0)
  optimizer.load_state_dict(parts[1]);  // the momentum buffers, moved to their parameters' device
  (void)scaler;]=])

# Right in every number: empty_cache() after every step, "to keep memory low". The allocator
# counters see it: segments given back, the next step's allocations going to the device again.
workbook_mistake(empty_cache_every_step CHECK amp_cache MESSAGE "that is empty_cache() every step"
  FIND [=[  scaler.update();                                 // back off after a skip, grow after a run of clean steps]=]
  REPLACE [=[  scaler.update();
  tiny::cuda::empty_cache();  // "keep memory low"]=])

# Right in every value (the scale is a power of two: the host divides exactly): each gradient
# divided on the host and copied back. Only the copy counters see the round trip.
workbook_mistake(unscale_through_host CHECK unscale_grads MESSAGE "they went from the GPU to the host and back"
  FIND [=[    g.mul_(1.0 / scale);  // in place: the optimizer reads p.grad()]=]
  REPLACE [=[    g.copy_(g.cpu().mul(1.0 / scale));  // "the host divides exactly"]=])

# The largest value, not the largest magnitude: +inf and NaN are found, a -inf is not.
workbook_mistake(max_without_abs CHECK unscale_grads MESSAGE "a test of the largest value (g.max()) never sees a -inf"
  FIND [=[const Tensor largest = g.abs().max();]=]
  REPLACE [=[const Tensor largest = g.max();]=])

# Overflow judged from the loss: finite from a scale of 2^24 while the scaled
# gradients are inf (a student's trial passed so while the only overflow
# tested came from an input that made the loss inf too).
workbook_mistake(overflow_judged_from_the_loss CHECK scaled_step MESSAGE "From 2^24 the first loss is finite"
  FIND [=[  const bool found_inf = unscale_grads_(grads, state.scale);]=]
  REPLACE [=[  unscale_grads_(grads, state.scale);
  const double seen = loss.item<double>();
  const bool found_inf = !(seen > -1e300 && seen < 1e300);  // the loss as the judge]=])
