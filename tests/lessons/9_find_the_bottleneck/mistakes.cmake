# Lesson 9's classic mistakes: each must fail its check with its message.
# Most are right in every number they compute and wrong only in speed.

# measure: the clock read before the GPU finished the steps.
workbook_mistake(no_final_sync CHECK measure MESSAGE "the clock stopped before the GPU finished"
  FIND [=[  tiny::cuda::synchronize(device);  // the host's clock now includes the GPU's work
]=]
  REPLACE [=[]=])

# measure: the clock started before the warm-up.
workbook_mistake(warmup_timed CHECK measure MESSAGE "The warm-up was timed too"
  FIND [=[  for (int i = 0; i < warmup; ++i) step();  // one-off costs: workers starting, first allocations
  tiny::cuda::synchronize(device);          // the warm-up's GPU work is not ours to time
  const double start_s = tiny::cuda::host_time();
  const double kernels_before_ms = tiny::cuda::device_counters(device).modelled_kernel_ms;]=]
  REPLACE [=[  const double start_s = tiny::cuda::host_time();
  const double kernels_before_ms = tiny::cuda::device_counters(device).modelled_kernel_ms;
  for (int i = 0; i < warmup; ++i) step();]=])

# measure: no wait after the warm-up, so its queued GPU work is timed.
workbook_mistake(no_start_sync CHECK measure MESSAGE "The warm-up was timed too"
  FIND [=[  tiny::cuda::synchronize(device);          // the warm-up's GPU work is not ours to time
]=]
  REPLACE [=[]=])

# measure: GPU-Util read from tiny::cuda::utilization(), whose window is the whole call.
workbook_mistake(utilization_of_whole_call CHECK measure MESSAGE "tiny::cuda::utilization()'s over the whole call"
  FIND [=[  m.utilization = kernels_ms / (elapsed_s * 1e3);  // GPU-Util: the share of the time any kernel ran]=]
  REPLACE [=[  m.utilization = tiny::cuda::utilization(device);]=])

# measure: milliseconds of kernels over seconds of clock.
workbook_mistake(utilization_units CHECK measure MESSAGE "GPU-Util cannot exceed 100%"
  FIND [=[  m.utilization = kernels_ms / (elapsed_s * 1e3);  // GPU-Util: the share of the time any kernel ran]=]
  REPLACE [=[  m.utilization = kernels_ms / elapsed_s;]=])

# train_step: .item() every step. Right numbers; the host waits for the GPU at every step.
workbook_mistake(item_every_step CHECK train_step MESSAGE "the host waited for the GPU"
  FIND [=[  loss_sum.add_(loss.detach());  // stays on the GPU: nobody waits for it now]=]
  REPLACE [=[  loss_sum.add_(loss.item<double>());  // "to watch the loss"]=])

# train_step: the loss added with its graph. Right numbers; every step's graph kept alive.
# The same .item() seen from train_epoch: the loop is right, so the message must blame train_step
# (a probe runs one train_step alone), not tell the student to move a read the loop never made.
workbook_mistake(item_every_step_blamed_on_step CHECK train_epoch MESSAGE "the waits are in train_step"
  FIND [=[  loss_sum.add_(loss.detach());  // stays on the GPU: nobody waits for it now]=]
  REPLACE [=[  loss_sum.add_(loss.item<double>());  // "to watch the loss"]=])

# And from the whole program: on the modelled L4 that .item() costs about 1% of the step, within
# the speed check's 10%, so only the synchronization counter can fail it.
workbook_mistake(item_every_step_in_fast_program CHECK fixed_program MESSAGE "a .item() or .cpu() in the step"
  FIND [=[  loss_sum.add_(loss.detach());  // stays on the GPU: nobody waits for it now]=]
  REPLACE [=[  loss_sum.add_(loss.item<double>());  // "to watch the loss"]=])

workbook_mistake(loss_with_graph CHECK train_step MESSAGE "holds the autograd graph"
  FIND [=[  loss_sum.add_(loss.detach());  // stays on the GPU: nobody waits for it now]=]
  REPLACE [=[  loss_sum = loss_sum + loss;]=])

# train_step: copies without non_blocking. Right numbers; the host waits for each copy.
workbook_mistake(blocking_copies CHECK train_step MESSAGE "copy without non_blocking"
  FIND [=[  const tiny::Tensor x = batch.data.to(device, /*non_blocking=*/true);  // pinned: the host does not wait
  const tiny::Tensor y = batch.target.to(device, /*non_blocking=*/true);]=]
  REPLACE [=[  const tiny::Tensor x = batch.data.to(device);
  const tiny::Tensor y = batch.target.to(device);]=])

# train_step: float32 where bfloat16 fits. The numbers agree to bfloat16's precision; the products are slow.
workbook_mistake(no_autocast CHECK train_step MESSAGE "the products ran in float32"
  FIND [=[    tiny::amp::autocast guard("cuda", tiny::kBFloat16);  // the products on the tensor cores
]=]
  REPLACE [=[]=])

# train_epoch: reads the running loss every batch "to watch it". Right numbers; a wait per batch.
workbook_mistake(item_every_batch CHECK train_epoch MESSAGE "once a batch or more"
  FIND [=[++batches;]=]
  REPLACE [=[++batches;
    const double running = loss_sum.item<double>() / static_cast<double>(batches);  // "to watch it"
    (void)running;]=])

# make_loader: no workers. Right numbers; the loop transforms every batch itself while the GPU waits.
workbook_mistake(no_workers CHECK fixed_program MESSAGE "The loop waited for the DataLoader"
  FIND [=[  options.num_workers = 12;  // 1024 images x 8 us = 8.2 ms a batch; 12 workers deliver one every 0.68 ms]=]
  REPLACE [=[  options.num_workers = 0;]=])

# make_loader: too few workers for a batch of 1024.
workbook_mistake(two_workers CHECK fixed_program MESSAGE "their batches arrive in bursts of 2 every"
  FIND [=[  options.num_workers = 12;  // 1024 images x 8 us = 8.2 ms a batch; 12 workers deliver one every 0.68 ms]=]
  REPLACE [=[  options.num_workers = 2;]=])

# make_loader: pageable batches. Right numbers; each copy holds the host.
workbook_mistake(not_pinned CHECK fixed_program MESSAGE "a copy from pinned (page-locked) memory lets the host run ahead"
  FIND [=[  options.pin_memory = true; // pinned batches: the copies can be non_blocking]=]
  REPLACE [=[  options.pin_memory = false;]=])

# make_loader: the tiny batch of the program as given. Right numbers; a fixed price per step paid for 32 images.
workbook_mistake(tiny_batch CHECK fixed_program MESSAGE "raise batch_size"
  FIND [=[  options.batch_size = 1024;  // enough work per launch that the GPU, not the host, sets the pace]=]
  REPLACE [=[  options.batch_size = 32;]=])

# A right answer written another way, which must pass (dev.alternative.9.*):
# the GPU's own clock, events on the device's stream after the wait for the
# warm-up, instead of host_time() around two synchronizes (lesson 2 teaches both).
workbook_alternative(events CHECKS measure
  FIND [=[const double start_s = tiny::cuda::host_time();]=]
  REPLACE [=[const tiny::cuda::Stream stream = tiny::cuda::current_stream(device);
  tiny::cuda::Event start(true), stop(true);
  start.record(stream);  // stamped once the warm-up's work has run]=]
  FIND [=[tiny::cuda::synchronize(device);  // the host's clock now includes the GPU's work
  const double elapsed_s = tiny::cuda::host_time() - start_s;]=]
  REPLACE [=[stop.record(stream);
  stop.synchronize();
  const double elapsed_s = start.elapsed_time(stop) / 1e3;]=])

# Right numbers, no value read back: empty_cache() every step, "to keep memory
# low". It waits for the GPU each time; with no copy to the host in the counters,
# train_step's check does not blame an .item() and names empty_cache among the waits left.
workbook_mistake(empty_cache_every_step CHECK train_step MESSAGE "or a tiny::cuda::empty_cache(), which waits for the"
  FIND [=[  loss_sum.add_(loss.detach());  // stays on the GPU: nobody waits for it now]=]
  REPLACE [=[  loss_sum.add_(loss.detach());
  tiny::cuda::empty_cache();  // "keep memory low"]=])

# The autocast guard opened for the whole step: right numbers, but backward() and optimizer.step() inside it.
workbook_mistake(autocast_whole_step CHECK train_step MESSAGE "your autocast guard was still open during backward() and optimizer.step()"
  FIND [=[    loss = F::cross_entropy(model(x), y);
  }
  loss.backward();
  optimizer.step();]=]
  REPLACE [=[    loss = F::cross_entropy(model(x), y);
    loss.backward();
    optimizer.step();
  }]=])

# The epoch's sum copied back with non_blocking and read before the copy ran:
# right now and then on a real GPU, wrong every time in the check's deferred
# mode, named from the probe (a copy into pinned memory, the GPU still busy
# when the answer came back), not by a values-only message.
workbook_mistake(epoch_sum_not_waited CHECK train_epoch MESSAGE "you read the host copy before the copy finished"
  FIND [=[  return batches == 0 ? 0.0 : loss_sum.item<double>() / static_cast<double>(batches);  // the epoch's one wait]=]
  REPLACE [=[  const tiny::Tensor host = tiny::empty({}, tiny::Device("cpu")).pin_memory();
  host.copy_(loss_sum, /*non_blocking=*/true);  // "no wait"
  return batches == 0 ? 0.0 : host.item<double>() / static_cast<double>(batches);]=])
