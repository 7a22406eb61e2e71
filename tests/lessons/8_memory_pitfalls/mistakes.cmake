# Committed wrong solutions of lesson 8: each must fail its check with its message.

workbook_mistake(history_of_tensors CHECK memory_flat MESSAGE "or a history of tensors, `history.push_back(loss)`"
  FIND [=[for (const Batch& batch : batches) {
    optimizer.zero_grad();]=]
  REPLACE [=[std::vector<tiny::Tensor> history;
  for (const Batch& batch : batches) {
    optimizer.zero_grad();]=]
  FIND [=[log.losses.push_back(value);
  }]=]
  REPLACE [=[history.push_back(loss);  // the tensor, and with it the step's graph
  }
  for (const tiny::Tensor& l : history) log.losses.push_back(l.item<double>());]=])

workbook_mistake(total_as_tensor CHECK memory_flat MESSAGE "That is a running total kept as a tensor, `total = total + loss`"
  FIND [=[double loss_sum = 0.0;  // a number, not a tensor: a tensor total would chain every step's graph]=]
  REPLACE [=[tiny::Tensor loss_sum;]=]
  FIND [=[const double value = loss.item<double>();  // the number; the tensor (and its graph) goes at the end of the step
    const int64_t n = batch.target.size(0);
    loss_sum += value * static_cast<double>(n);]=]
  REPLACE [=[const double value = loss.item<double>();
    const int64_t n = batch.target.size(0);
    const tiny::Tensor term = loss * static_cast<double>(n);
    loss_sum = loss_sum.defined() ? loss_sum + term : term;  // a tensor: its graph reaches back to every step]=]
  FIND [=[log.mean_loss = examples == 0 ? 0.0 : loss_sum / static_cast<double>(examples);]=]
  REPLACE [=[log.mean_loss = examples == 0 ? 0.0 : loss_sum.item<double>() / static_cast<double>(examples);]=])

workbook_mistake(evaluate_without_no_grad CHECK evaluate MESSAGE "evaluate recorded an autograd graph"
  FIND [=[  tiny::NoGradGuard no_grad;  // no backward() will come: keep no activations for it]=]
  REPLACE [=[]=])

workbook_mistake(evaluate_grad_mode_off CHECK evaluate MESSAGE "left gradient recording switched off"
  FIND [=[  tiny::NoGradGuard no_grad;  // no backward() will come: keep no activations for it]=]
  REPLACE [=[  tiny::set_grad_enabled(false);]=])

workbook_mistake(accumulate_not_scaled CHECK accumulate_matches_big_batch MESSAGE "times too large"
  FIND [=[    (loss * weight).backward();  // adds this slice's share to .grad and frees its graph now]=]
  REPLACE [=[    loss.backward();]=])

workbook_mistake(accumulate_zero_grad_inside CHECK accumulate_matches_big_batch MESSAGE "only the last micro-batch's gradient"
  FIND [=[    const int64_t rows = std::min(micro_batch, total - start);  // the last slice may be shorter]=]
  REPLACE [=[    optimizer.zero_grad();
    const int64_t rows = std::min(micro_batch, total - start);  // the last slice may be shorter]=])

workbook_mistake(accumulate_drops_partial CHECK accumulate_matches_big_batch MESSAGE "is missing from the update"
  FIND [=[  for (int64_t start = 0; start < total; start += micro_batch) {]=]
  REPLACE [=[  for (int64_t start = 0; start + micro_batch <= total; start += micro_batch) {]=])

workbook_mistake(accumulate_divided_by_count CHECK accumulate_matches_big_batch MESSAGE "divided by the number of micro-batches"
  FIND [=[    const double weight = static_cast<double>(rows) / static_cast<double>(total);]=]
  REPLACE [=[    const double weight = 1.0 / static_cast<double>((total + micro_batch - 1) / micro_batch);]=])

workbook_mistake(accumulate_backward_at_end CHECK accumulate_fits MESSAGE "keeps every micro-batch's graph"
  FIND [=[  double loss_sum = 0.0;
  for (int64_t start = 0; start < total; start += micro_batch) {
    const int64_t rows = std::min(micro_batch, total - start);  // the last slice may be shorter
    const tiny::Tensor loss = F::cross_entropy(model(inputs.narrow(0, start, rows)), targets.narrow(0, start, rows));
    const double weight = static_cast<double>(rows) / static_cast<double>(total);
    (loss * weight).backward();  // adds this slice's share to .grad and frees its graph now
    loss_sum += loss.item<double>() * weight;
  }]=]
  REPLACE [=[  tiny::Tensor sum = tiny::zeros({}, tiny::TensorOptions().device(inputs.device()));
  for (int64_t start = 0; start < total; start += micro_batch) {
    const int64_t rows = std::min(micro_batch, total - start);
    const tiny::Tensor loss = F::cross_entropy(model(inputs.narrow(0, start, rows)), targets.narrow(0, start, rows));
    sum = sum + loss * (static_cast<double>(rows) / static_cast<double>(total));  // every slice's graph stays alive
  }
  sum.backward();
  const double loss_sum = sum.item<double>();]=])

workbook_mistake(accumulate_whole_batch CHECK accumulate_fits MESSAGE "the model got all 450 rows at once"
  FIND [=[  for (int64_t start = 0; start < total; start += micro_batch) {]=]
  REPLACE [=[  micro_batch = total;  // no slicing: the whole batch at once
  for (int64_t start = 0; start < total; start += micro_batch) {]=])

workbook_mistake(reserved_for_allocated CHECK free_and_measure MESSAGE "allocated and reserved are swapped"
  FIND [=[    return MemoryReading{tiny::cuda::memory_allocated(device), tiny::cuda::memory_reserved(device)};]=]
  REPLACE [=[    return MemoryReading{tiny::cuda::memory_reserved(device), tiny::cuda::memory_allocated(device)};]=])

workbook_mistake(tensor_not_freed CHECK free_and_measure MESSAGE "the tensor is still alive"
  FIND [=[  tensor = tiny::Tensor();  // the last handle: its block goes back to the allocator's cache]=]
  REPLACE [=[]=])

workbook_mistake(current_device_read CHECK free_and_measure MESSAGE "these are the figures of the other GPU"
  FIND [=[  const int device = tensor.device().index();]=]
  REPLACE [=[  const int device = tiny::cuda::current_device();]=])

# Right in every number (losses, weights, flat memory_allocated), wrong only in
# what the allocator's counters and the reserved-memory timeline show.
workbook_mistake(empty_cache_every_step CHECK cache_reused MESSAGE "that is empty_cache() every step"
  FIND [=[const double value = loss.item<double>();  // the number; the tensor (and its graph) goes at the end of the step]=]
  REPLACE [=[tiny::cuda::empty_cache();  // "free the GPU memory" after every step
    const double value = loss.item<double>();  // the number; the tensor (and its graph) goes at the end of the step]=])

workbook_mistake(predict_without_adam_states CHECK predict_step_memory MESSAGE "you left out Adam's two states: 2 x 9.05 MiB"
  FIND [=[  m.optimizer_states = 2 * m.parameters;  // Adam: exp_avg and exp_avg_sq per parameter]=]
  REPLACE [=[]=])

workbook_mistake(predict_one_adam_state CHECK predict_step_memory MESSAGE "Adam keeps two per parameter"
  FIND [=[  m.optimizer_states = 2 * m.parameters;  // Adam: exp_avg and exp_avg_sq per parameter]=]
  REPLACE [=[  m.optimizer_states = m.parameters;]=])

workbook_mistake(predict_without_gradients CHECK predict_step_memory MESSAGE "you left out the gradients"
  FIND [=[  m.gradients = m.parameters;             // one .grad() the size of each parameter]=]
  REPLACE [=[]=])

workbook_mistake(predict_without_activations CHECK predict_step_memory MESSAGE "you left out the activations kept for backward"
  FIND [=[      m.activations += static_cast<size_t>(batch_size * linear->out_features) * sizeof(float);]=]
  REPLACE [=[]=])

workbook_mistake(predict_activations_twice CHECK predict_step_memory MESSAGE "you counted each hidden layer twice"
  FIND [=[      m.activations += static_cast<size_t>(batch_size * linear->out_features) * sizeof(float);]=]
  REPLACE [=[      m.activations += 2 * static_cast<size_t>(batch_size * linear->out_features) * sizeof(float);]=])

workbook_mistake(checkpoint_nothing CHECK checkpoint_fits MESSAGE "your forward keeps every block's activations"
  FIND [=[    h = tiny::utils::checkpoint([block](const tiny::Tensor& input) { return (*block)(input); }, h);]=]
  REPLACE [=[    h = (*block)(h);]=])

workbook_mistake(checkpoint_detached_input CHECK checkpoint_gradients MESSAGE "got no gradient from backward()"
  FIND [=[    h = tiny::utils::checkpoint([block](const tiny::Tensor& input) { return (*block)(input); }, h);]=]
  REPLACE [=[    h = tiny::utils::checkpoint([block](const tiny::Tensor& input) { return (*block)(input); }, h.detach().requires_grad_(true));]=])

# Right answers written another way, which must pass.
workbook_alternative(checkpoint_sequential CHECKS checkpoint_gradients checkpoint_fits
  FIND [=[  const int64_t last = static_cast<int64_t>(model.size()) - 1;
  tiny::Tensor h = (*model[0])(x);  // x requires no grad: checkpoint could not reach this block's parameters
  for (int64_t i = 1; i < last; ++i) {
    const std::shared_ptr<tiny::nn::Module> block = model[i];
    // Keeps only h; backward runs the block again, recording, and back-propagates through it.
    h = tiny::utils::checkpoint([block](const tiny::Tensor& input) { return (*block)(input); }, h);
  }
  return (*model[last])(h);  // the logits are needed right away: nothing to save]=]
  REPLACE [=[  return tiny::utils::checkpoint_sequential(model, static_cast<int>(model.size()), x);]=])

# The mean of the batches' mean losses: right while every batch has the same
# size, wrong with the check's short last batch (a newcomer's version passed
# before the check had one).
workbook_mistake(evaluate_mean_of_batches CHECK evaluate MESSAGE "the mean of the 3 batches' mean losses"
  FIND [=[loss_sum += F::cross_entropy(logits, batch.target).item<double>() * static_cast<double>(n);]=]
  REPLACE [=[loss_sum += F::cross_entropy(logits, batch.target).item<double>();  // this batch's mean]=]
  FIND [=[return {loss_sum / static_cast<double>(examples), static_cast<double>(correct) / static_cast<double>(examples)};]=]
  REPLACE [=[return {loss_sum / static_cast<double>(batches.size()), static_cast<double>(correct) / static_cast<double>(examples)};]=])

# Each step's loss copied back with non_blocking and read before the copy ran: right most of the
# time in threaded mode (the copy usually wins the race), stale every time in the check's deferred
# mode. The weights are right; only the probe (a copy into pinned memory, the stream still busy
# when the function returned) tells it from a wrong step.
workbook_mistake(loss_copy_not_waited CHECK train_epoch MESSAGE "you read the host copy before the copy finished"
  FIND [=[    const double value = loss.item<double>();  // the number; the tensor (and its graph) goes at the end of the step]=]
  REPLACE [=[    const double value = loss.to(tiny::Device("cpu"), /*non_blocking=*/true).item<double>();  // "no wait"]=])

# The count of right answers copied back with non_blocking and read before the copy ran (the
# loss read with .item(), whose wait comes before the copy of the same batch): stale every time
# in the check's deferred mode.
workbook_mistake(evaluate_count_not_waited CHECK evaluate MESSAGE "you read the host copy before the copy finished"
  FIND [=[    correct += (logits.argmax(1) == batch.target).sum().item<int64_t>();]=]
  REPLACE [=[    correct += (logits.argmax(1) == batch.target).sum().to(tiny::Device("cpu"), /*non_blocking=*/true).item<int64_t>();]=])

# The activations as a constant that fits the lesson's own case (a student's
# trial passed so): the second, unannounced model and batch shows it.
workbook_mistake(activations_a_constant CHECK predict_step_memory MESSAGE "(a second case): you predicted 12.0 MiB of activations"
  FIND [=[      m.activations += static_cast<size_t>(batch_size * linear->out_features) * sizeof(float);]=]
  REPLACE [=[      m.activations = size_t{12} << 20;  // what the check's 256-1024-1024-1024-10 MLP at 1024 needs
      (void)linear;
      (void)batch_size;]=])
