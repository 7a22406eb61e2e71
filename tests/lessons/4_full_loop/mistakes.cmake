# Lesson 4's classic mistakes: each is the reference with one change, and must
# fail its check with a message that names the mistake.

workbook_mistake(forgot_zero_grad CHECK train_step MESSAGE "the gradients were not cleared"
  FIND [=[optimizer.zero_grad();  // the gradients of the previous step are still there]=]
  REPLACE [=[// (no zero_grad: the gradients add up)]=])

workbook_mistake(unweighted_mean CHECK train_one_epoch MESSAGE "you averaged per batch"
  FIND [=[loss_sum.add_(train_step(model, batch, optimizer, device), static_cast<double>(n));
    examples += n;]=]
  REPLACE [=[loss_sum.add_(train_step(model, batch, optimizer, device));
    examples += n > 0 ? 1 : 0;  // one per batch]=])

workbook_mistake(labels_not_moved CHECK to_device MESSAGE "the labels are still on cpu: move them with .to(device) before the loss"
  FIND [=[batch.target.to(device, non_blocking)}]=]
  REPLACE [=[batch.target}]=])

workbook_mistake(blocking_copy CHECK to_device MESSAGE "made the host wait for the GPU"
  FIND [=[return {batch.data.to(device, non_blocking), batch.target.to(device, non_blocking)};]=]
  REPLACE [=[return {batch.data.to(device), batch.target.to(device)};]=])

workbook_mistake(no_pin_memory CHECK make_loader MESSAGE "not pinned memory"
  FIND [=[options.pin_memory = pin_memory;]=]
  REPLACE [=[]=])

workbook_mistake(no_shuffle CHECK make_loader MESSAGE "it did not shuffle"
  FIND [=[options.shuffle = shuffle;]=]
  REPLACE [=[]=])

workbook_mistake(ignored_generator CHECK make_loader MESSAGE "ignores the generator"
  FIND [=[options.generator = generator;]=]
  REPLACE [=[(void)generator;]=])

workbook_mistake(evaluate_in_train_mode CHECK evaluate MESSAGE "evaluate ran the model in training mode"
  FIND [=[model.eval();               // dropout keeps every unit]=]
  REPLACE [=[]=])

workbook_mistake(evaluate_leaves_eval_mode CHECK evaluate MESSAGE "evaluate left the model in eval mode"
  FIND [=[model.train();  // back to training mode for the next epoch]=]
  REPLACE [=[]=])

workbook_mistake(evaluate_without_no_grad CHECK evaluate MESSAGE "evaluate recorded an autograd graph"
  FIND [=[tiny::NoGradGuard no_grad;  // nothing here calls backward(): record no graph]=]
  REPLACE [=[]=])

workbook_mistake(evaluate_grad_mode_off CHECK evaluate MESSAGE "left gradient recording switched off"
  FIND [=[tiny::NoGradGuard no_grad;  // nothing here calls backward(): record no graph]=]
  REPLACE [=[tiny::set_grad_enabled(false);]=])

workbook_mistake(accuracy_in_percent CHECK evaluate MESSAGE "that is a percentage"
  FIND [=[static_cast<double>(correct.item<int64_t>()) / total}]=]
  REPLACE [=[100.0 * static_cast<double>(correct.item<int64_t>()) / total}]=])

workbook_mistake(features_not_moved CHECK to_device MESSAGE "the features (batch.data) are still on cpu"
  FIND [=[return {batch.data.to(device, non_blocking), batch.target.to(device, non_blocking)};]=]
  REPLACE [=[return {batch.data, batch.target.to(device, non_blocking)};]=])

workbook_mistake(always_pinned CHECK make_loader MESSAGE "in pinned memory although pin_memory is false"
  FIND [=[options.pin_memory = pin_memory;]=]
  REPLACE [=[options.pin_memory = true;]=])

workbook_mistake(drop_last CHECK make_loader MESSAGE "keep the short last batch"
  FIND [=[options.batch_size = batch_size;]=]
  REPLACE [=[options.batch_size = batch_size;
  options.drop_last = true;]=])

workbook_mistake(zero_grad_at_end CHECK train_step MESSAGE "clears the gradients after the step instead of before backward()"
  FIND [=[  optimizer.zero_grad();  // the gradients of the previous step are still there
]=]
  REPLACE [=[]=]
  FIND [=[optimizer.step();]=]
  REPLACE [=[optimizer.step();
  optimizer.zero_grad();]=])

# Right numbers, wrong speed. Each of these trains exactly as the reference
# does; only the emulator's counters, the trace and the modelled clock see them.

# The loop the PyTorch tutorials print: loss.item() every step, to add it up on
# the host. Every step then waits for the GPU (a copy back and a synchronize).
workbook_mistake(item_every_step CHECK epoch_copies_and_waits MESSAGE "a value read every step (.item(), .cpu())"
  FIND [=[tiny::Tensor loss_sum = tiny::zeros({}, device);  // on the device: adding to it queues work, never waits]=]
  REPLACE [=[double loss_sum = 0.0;]=]
  FIND [=[const int64_t n = batch.target.size(0);  // the last batch may be short
    loss_sum.add_(train_step(model, batch, optimizer, device), static_cast<double>(n));]=]
  REPLACE [=[const int64_t n = batch.target.size(0);
    loss_sum += train_step(model, batch, optimizer, device).item<double>() * static_cast<double>(n);]=]
  FIND [=[return loss_sum.item<double>() / static_cast<double>(examples);  // the epoch's one wait for the GPU]=]
  REPLACE [=[return loss_sum / static_cast<double>(examples);]=])

# A NaN check in every step: right losses, a wait for the GPU per step.
workbook_mistake(nan_check_every_step CHECK train_step MESSAGE "made the host wait for the GPU 4 time(s) in 4 steps"
  FIND [=[  return loss.detach();  // no graph kept alive, and no .item(): reading it would make the host wait for the GPU]=]
  REPLACE [=[  const double value = loss.item<double>();
  if (value != value) throw tiny::ValueError("the loss is NaN");
  return loss.detach();]=])

# The loss brought to the host in the step (the value is right, the wait is not).
workbook_mistake(loss_on_cpu CHECK train_step MESSAGE "makes the host wait for the GPU at every step"
  FIND [=[  return loss.detach();  // no graph kept alive, and no .item(): reading it would make the host wait for the GPU]=]
  REPLACE [=[  return loss.detach().cpu();]=])

# The loss returned with its graph: right values, every step's activations kept alive by the epoch's sum.
workbook_mistake(loss_with_graph CHECK train_step MESSAGE "with its autograd graph"
  FIND [=[  return loss.detach();  // no graph kept alive, and no .item(): reading it would make the host wait for the GPU]=]
  REPLACE [=[  return loss;]=])

# A loader without workers: the same batches, loaded by the training loop itself.
workbook_mistake(no_workers CHECK make_loader MESSAGE "with no workers the training loop prepares every batch itself"
  FIND [=[options.num_workers = num_workers;  // the next batches load while the GPU trains on this one]=]
  REPLACE [=[(void)num_workers;]=])
# ... and the epoch_speed check, timed on the modelled clock, names it too
# (workbook_mistake skips timed checks, so this entry runs it alone).
add_test(NAME dev.mistake.4.no_workers_epoch_speed
         COMMAND lesson_4_checks --student $<TARGET_FILE:lesson_4_mistake_no_workers>
                 --reference $<TARGET_FILE:lesson_4_reference>
                 --expect-fail "epoch_speed=no workers: your loop loaded every batch itself")
set_tests_properties(dev.mistake.4.no_workers_epoch_speed PROPERTIES LABELS dev TIMEOUT 600)

# A right answer written another way, which the checks (the timed one included)
# must pass: a running sum made out of place (one more kernel a step, well
# inside 1.1x). (An evaluation that reads its sums every batch is no longer one:
# the evaluate check counts its waits, see evaluate_item_per_batch below.)
workbook_alternative(out_of_place_sum CHECKS train_one_epoch epoch_copies_and_waits epoch_speed
  FIND [=[    loss_sum.add_(train_step(model, batch, optimizer, device), static_cast<double>(n));]=]
  REPLACE [=[    loss_sum = loss_sum + train_step(model, batch, optimizer, device) * static_cast<double>(n);]=])

# An epoch that adds up losses still attached to their graphs. The sum is legal
# (autograd records the in-place add, as PyTorch's does) and every number is
# right; only the glue's probe sees it: at each forward pass, the graphs of the
# earlier steps are still held, one more each step. train_one_epoch names it
# both when train_step returns the attached loss (loss_with_graph, above, run
# against the epoch check here) and when the loop inlines the step and adds its
# own loss (epoch_sum_keeps_graph).
add_test(NAME dev.mistake.4.loss_with_graph_epoch
         COMMAND lesson_4_checks --student $<TARGET_FILE:lesson_4_mistake_loss_with_graph>
                 --reference $<TARGET_FILE:lesson_4_reference> --no-timing
                 --expect-fail "train_one_epoch=your running loss keeps every step's graph alive")
set_tests_properties(dev.mistake.4.loss_with_graph_epoch PROPERTIES LABELS dev TIMEOUT 600)

workbook_mistake(epoch_sum_keeps_graph CHECK train_one_epoch MESSAGE "your running loss keeps every step's graph alive"
  FIND [=[loss_sum.add_(train_step(model, batch, optimizer, device), static_cast<double>(n));]=]
  REPLACE [=[const Batch on_device = to_device(batch, device, /*non_blocking=*/true);
    optimizer.zero_grad();
    const tiny::Tensor loss = F::cross_entropy(model(on_device.data), on_device.target);
    loss.backward();
    optimizer.step();
    loss_sum.add_(loss, static_cast<double>(n));  // the loss still has its graph]=])

# Right in every number: empty_cache() after every step, "to keep memory low".
# It waits for the GPU each time. The model is small enough that its cached
# segment also holds the weights, so no segment is freed and device_mallocs does
# not move: only the waits show. The epoch check names the loop, not to_device,
# once a probe has run the student's to_device alone and seen it wait 0 times.
workbook_mistake(empty_cache_every_step CHECK epoch_copies_and_waits MESSAGE "or tiny::cuda::empty_cache(), which waits for the GPU"
  FIND [=[    loss_sum.add_(train_step(model, batch, optimizer, device), static_cast<double>(n));]=]
  REPLACE [=[    loss_sum.add_(train_step(model, batch, optimizer, device), static_cast<double>(n));
    tiny::cuda::empty_cache();  // "keep memory low"]=])

# The batches copied without non_blocking inside the epoch: the same probe then
# sees to_device wait, and the epoch check names the copy.
add_test(NAME dev.mistake.4.blocking_copy_epoch
         COMMAND lesson_4_checks --student $<TARGET_FILE:lesson_4_mistake_blocking_copy>
                 --reference $<TARGET_FILE:lesson_4_reference> --no-timing
                 --expect-fail "epoch_copies_and_waits=a copy with non_blocking=false waits for the GPU")
set_tests_properties(dev.mistake.4.blocking_copy_epoch PROPERTIES LABELS dev TIMEOUT 600)

# Right numbers, read too often: the loss of every batch brought to the host.
workbook_mistake(evaluate_item_per_batch CHECK evaluate MESSAGE "a .item() or .cpu() inside the loop waits for every batch"
  FIND [=[loss_sum.add_(F::cross_entropy(logits, on_device.target), static_cast<double>(n));]=]
  REPLACE [=[loss_sum.add_(tiny::scalar_tensor(F::cross_entropy(logits, on_device.target).item<double>() * n, device));]=])

# The caller asked for a blocking copy and got a non-blocking one.
workbook_mistake(always_non_blocking CHECK to_device MESSAGE "Pass the non_blocking argument on instead of a fixed true"
  FIND [=[return {batch.data.to(device, non_blocking), batch.target.to(device, non_blocking)};]=]
  REPLACE [=[return {batch.data.to(device, true), batch.target.to(device, true)};]=])

# The epoch's sum copied back with non_blocking and read before the copy ran: right most of the
# time in threaded mode (the copy usually wins the race), stale every time in the check's
# deferred mode. Every step is right; only the probe (a copy into pinned memory, the stream
# still busy when the function returned) tells it from a wrong mean.
workbook_mistake(epoch_sum_not_waited CHECK train_one_epoch MESSAGE "you read the host copy before the copy finished"
  FIND [=[  return loss_sum.item<double>() / static_cast<double>(examples);  // the epoch's one wait for the GPU]=]
  REPLACE [=[  const tiny::Tensor host = loss_sum.to(tiny::Device("cpu"), /*non_blocking=*/true);  // "no wait"
  return host.item<double>() / static_cast<double>(examples);]=])

# train_step is given pinned batches, as a GPU loop's loader (pin_memory=true)
# makes them. A step that copies them blocking waits for the GPU twice a step,
# and the check says so; one that passes non_blocking only when the batch is
# pinned is right (a newcomer's trial wrote it so, from exercise.h's "without
# making the host wait when the loader pinned it", and the check, then fed
# pageable batches, failed it with a message about "the pinned batch").
workbook_mistake(blocking_copy_in_step CHECK train_step MESSAGE "so does a copy asked to be blocking"
  FIND [=[  const Batch on_device = to_device(batch, device, /*non_blocking=*/true);
  optimizer.zero_grad();  // the gradients of the previous step are still there]=]
  REPLACE [=[  const Batch on_device = to_device(batch, device, /*non_blocking=*/false);
  optimizer.zero_grad();  // the gradients of the previous step are still there]=])

workbook_alternative(non_blocking_when_pinned CHECKS train_step train_one_epoch epoch_copies_and_waits epoch_speed
  FIND [=[  const Batch on_device = to_device(batch, device, /*non_blocking=*/true);
  optimizer.zero_grad();  // the gradients of the previous step are still there]=]
  REPLACE [=[  const Batch on_device = to_device(batch, device, batch.data.is_pinned());
  optimizer.zero_grad();  // the gradients of the previous step are still there]=])
