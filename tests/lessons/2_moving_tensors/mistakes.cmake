# Lesson 2's classic mistakes: each must fail its check with its message.

# Made on the CPU, then copied: the right numbers, on the right device, plus a copy.
workbook_mistake(made_on_cpu CHECK make_on_device MESSAGE "made the tensor on the CPU and then copied"
  FIND [=[return tiny::randn(shape, device, generator);]=]
  REPLACE [=[return tiny::randn(shape, {}, generator).to(device);]=])

# The loop variable is a copy of the handle: assigning .to()'s result to it changes nothing.
workbook_mistake(to_result_lost CHECK to_device MESSAGE "is still on cpu"
  FIND [=[  std::vector<tiny::Tensor> moved;
  for (const tiny::Tensor& t : tensors) moved.push_back(t.to(device));]=]
  REPLACE [=[  std::vector<tiny::Tensor> moved = tensors;
  for (tiny::Tensor t : moved) t = t.to(device);]=])

# The answer is left on the GPU, where the caller cannot read it.
workbook_mistake(result_left_on_gpu CHECK gpu_compute_then_cpu MESSAGE "bring it back with .cpu()"
  FIND [=[  return y.cpu();]=]
  REPLACE [=[  return y;]=])

# The answer copied back with non_blocking and returned unwaited: the caller reads memory the GPU
# has not written yet (in the check's deferred mode every time).
workbook_mistake(copy_back_not_waited CHECK gpu_compute_then_cpu MESSAGE "the answer's copy back to the CPU had not run"
  FIND [=[  return y.cpu();]=]
  REPLACE [=[  return y.to(tiny::Device("cpu"), /*non_blocking=*/true);  // "faster"]=])

# Computed on the CPU: the right numbers, but the GPU did nothing.
workbook_mistake(computed_on_cpu CHECK gpu_compute_then_cpu MESSAGE "nothing ran on"
  FIND [=[  const tiny::Tensor x_dev = x.to(device);
  const tiny::Tensor w_dev = w.to(device);]=]
  REPLACE [=[  const tiny::Tensor x_dev = x;
  const tiny::Tensor w_dev = w;]=])

# x.to(device); alone: the copies happen, their results are dropped, the product runs on the CPU.
workbook_mistake(to_results_dropped CHECK gpu_compute_then_cpu MESSAGE ".to() returns a new tensor on the device"
  FIND [=[  const tiny::Tensor x_dev = x.to(device);
  const tiny::Tensor w_dev = w.to(device);]=]
  REPLACE [=[  (void)x.to(device);
  (void)w.to(device);
  const tiny::Tensor x_dev = x;
  const tiny::Tensor w_dev = w;]=])

# "Fixed" by moving the activation to the CPU instead of the parameters to the GPU.
workbook_mistake(moved_x_to_cpu CHECK linear_relu MESSAGE "move the parameters to x.device(), not x to the CPU"
  FIND [=[  return tiny::relu(x.matmul(w.to(device)) + b.to(device));]=]
  REPLACE [=[  return tiny::relu(x.cpu().matmul(w.cpu()) + b.cpu());]=])

# "Fixed" for cuda:0 only: breaks the day x is on cuda:1.
workbook_mistake(fixed_device CHECK linear_relu MESSAGE "not to a fixed device"
  FIND [=[  const tiny::Device device = x.device();]=]
  REPLACE [=[  const tiny::Device device("cuda");]=])

# The stop event is read before it completed (no stop.synchronize()).
workbook_mistake(no_final_sync CHECK time_matmul_waits MESSAGE "the clock stopped before the GPU finished"
  FIND [=[    stop.synchronize();  // the GPU has passed `stop`: only now are both times known
]=]
  REPLACE [=[]=])

# Synchronized, but only after reading the times.
workbook_mistake(sync_after_clock CHECK time_matmul_waits MESSAGE "the clock stopped before the GPU finished"
  FIND [=[    stop.synchronize();  // the GPU has passed `stop`: only now are both times known
    total_ms = start.elapsed_time(stop);]=]
  REPLACE [=[    total_ms = start.elapsed_time(stop);
    stop.synchronize();]=])

# Events recorded with record(): the current device's stream (cuda:0), while the matrices are on cuda:1.
workbook_mistake(events_on_current_device CHECK time_matmul_waits MESSAGE "you waited on cuda:0"
  FIND [=[    const tiny::cuda::Stream stream = tiny::cuda::current_stream(a.get_device());]=]
  REPLACE [=[    const tiny::cuda::Stream stream = tiny::cuda::current_stream();  // as record() with no stream]=])

# Right in every number it computes, wrong in its speed: the host's modelled
# clock read before the GPU finished reads only how long queuing took.
workbook_mistake(host_clock_no_sync CHECK time_matmul_waits MESSAGE "the clock stopped before the GPU finished"
  FIND [=[    const tiny::cuda::Stream stream = tiny::cuda::current_stream(a.get_device());
    tiny::cuda::Event start(true), stop(true);
    start.record(stream);  // after the warm-up in the stream's order
    for (int i = 0; i < reps; ++i) a.matmul(b);
    stop.record(stream);
    stop.synchronize();  // the GPU has passed `stop`: only now are both times known
    total_ms = start.elapsed_time(stop);]=]
  REPLACE [=[    tiny::cuda::synchronize(a.get_device());
    const double start = tiny::cuda::host_time();
    for (int i = 0; i < reps; ++i) a.matmul(b);
    total_ms = (tiny::cuda::host_time() - start) * 1e3;]=])

# The old recipe: std::chrono with synchronizes, right on a real GPU, but it
# times this CPU's emulation of the GPU, not the GPU.
workbook_mistake(chrono_on_gpu CHECK time_matmul_waits MESSAGE "std::chrono reads the host's real clock"
  FIND [=[    const tiny::cuda::Stream stream = tiny::cuda::current_stream(a.get_device());
    tiny::cuda::Event start(true), stop(true);
    start.record(stream);  // after the warm-up in the stream's order
    for (int i = 0; i < reps; ++i) a.matmul(b);
    stop.record(stream);
    stop.synchronize();  // the GPU has passed `stop`: only now are both times known
    total_ms = start.elapsed_time(stop);]=]
  REPLACE [=[    tiny::cuda::synchronize(a.get_device());
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) a.matmul(b);
    tiny::cuda::synchronize(a.get_device());
    total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();]=])

# Right numbers, wrong speed: waits by reading the last result back, so the
# time includes a device-to-host copy of n x n floats.
workbook_mistake(copy_back_as_wait CHECK time_matmul_waits MESSAGE "Your timing includes copying"
  FIND [=[    for (int i = 0; i < reps; ++i) a.matmul(b);
    stop.record(stream);]=]
  REPLACE [=[    tiny::Tensor c;
    for (int i = 0; i < reps; ++i) c = a.matmul(b);
    (void)c.cpu();  // "wait" for the GPU by reading the result
    stop.record(stream);]=])

# Right numbers, wrong speed: the start event is recorded before the warm-up, which is timed too.
workbook_mistake(warmup_timed CHECK time_matmul_waits MESSAGE "the warm-up was timed too"
  FIND [=[  a.matmul(b);  // warm-up, not timed: the first product pays one-off setup
]=]
  REPLACE [=[]=]
  FIND [=[start.record(stream);  // after the warm-up in the stream's order]=]
  REPLACE [=[start.record(stream);
    a.matmul(b);  // the warm-up, after the clock started]=])

# No warm-up: the first product's setup is timed.
workbook_mistake(no_warmup CHECK time_matmul_waits MESSAGE "there was no warm-up"
  FIND [=[  a.matmul(b);  // warm-up, not timed: the first product pays one-off setup
]=]
  REPLACE [=[]=])

# The total time of all reps, not the time per product.
workbook_mistake(total_not_mean CHECK time_matmul_waits MESSAGE "divided by reps"
  FIND [=[  return total_ms / reps;]=]
  REPLACE [=[  return total_ms;]=])

# The host's modelled clock started while the warm-up and earlier work are still queued.
workbook_mistake(no_start_sync CHECK time_matmul_clock_start MESSAGE "The clock started while earlier GPU work was still queued"
  FIND [=[    const tiny::cuda::Stream stream = tiny::cuda::current_stream(a.get_device());
    tiny::cuda::Event start(true), stop(true);
    start.record(stream);  // after the warm-up in the stream's order
    for (int i = 0; i < reps; ++i) a.matmul(b);
    stop.record(stream);
    stop.synchronize();  // the GPU has passed `stop`: only now are both times known
    total_ms = start.elapsed_time(stop);]=]
  REPLACE [=[    const double start = tiny::cuda::host_time();
    for (int i = 0; i < reps; ++i) a.matmul(b);
    tiny::cuda::synchronize(a.get_device());
    total_ms = (tiny::cuda::host_time() - start) * 1e3;]=])

# The modelled host clock on the CPU: with a GPU on the machine it counts only
# what tiny launches there, so the CPU's products take no time at all.
workbook_mistake(host_clock_on_cpu CHECK time_matmul_waits MESSAGE "where work on the CPU costs nothing"
  FIND [=[    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < reps; ++i) a.matmul(b);
    total_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();]=]
  REPLACE [=[    const double start = tiny::cuda::host_time();
    for (int i = 0; i < reps; ++i) a.matmul(b);
    total_ms = (tiny::cuda::host_time() - start) * 1e3;]=])

# Right numbers, wrong speed: a synchronize after every product, so each one
# pays a launch and a wait that products queued back to back do not.
workbook_mistake(sync_every_product CHECK time_matmul_waits MESSAGE "after every product"
  FIND [=[    const tiny::cuda::Stream stream = tiny::cuda::current_stream(a.get_device());
    tiny::cuda::Event start(true), stop(true);
    start.record(stream);  // after the warm-up in the stream's order
    for (int i = 0; i < reps; ++i) a.matmul(b);
    stop.record(stream);
    stop.synchronize();  // the GPU has passed `stop`: only now are both times known
    total_ms = start.elapsed_time(stop);]=]
  REPLACE [=[    const int gpu = a.get_device();
    tiny::cuda::synchronize(gpu);
    const double start = tiny::cuda::host_time();
    for (int i = 0; i < reps; ++i) {
      a.matmul(b);
      tiny::cuda::synchronize(gpu);  // "to be sure it is done"
    }
    total_ms = (tiny::cuda::host_time() - start) * 1e3;]=])

# Right answers written another way, which every check must pass (dev.alternative.2.*):
# the README teaches both of the GPU's clocks, so both must stay accepted.

# The host's clock, modelled on the emulated GPU: synchronize, read, queue, synchronize, read.
workbook_alternative(host_time_with_sync CHECKS time_matmul_waits time_matmul_clock_start
  FIND [=[    const tiny::cuda::Stream stream = tiny::cuda::current_stream(a.get_device());
    tiny::cuda::Event start(true), stop(true);
    start.record(stream);  // after the warm-up in the stream's order
    for (int i = 0; i < reps; ++i) a.matmul(b);
    stop.record(stream);
    stop.synchronize();  // the GPU has passed `stop`: only now are both times known
    total_ms = start.elapsed_time(stop);]=]
  REPLACE [=[    const int gpu = a.get_device();
    tiny::cuda::synchronize(gpu);
    const double start = tiny::cuda::host_time();
    for (int i = 0; i < reps; ++i) a.matmul(b);
    tiny::cuda::synchronize(gpu);
    total_ms = (tiny::cuda::host_time() - start) * 1e3;]=])

# Events on the current stream with a's device made current, and a synchronize of the device to wait.
workbook_alternative(events_under_device_guard CHECKS time_matmul_waits time_matmul_clock_start
  FIND [=[const tiny::cuda::Stream stream = tiny::cuda::current_stream(a.get_device());
    tiny::cuda::Event start(true), stop(true);
    start.record(stream);  // after the warm-up in the stream's order
    for (int i = 0; i < reps; ++i) a.matmul(b);
    stop.record(stream);
    stop.synchronize();  // the GPU has passed `stop`: only now are both times known]=]
  REPLACE [=[const tiny::cuda::DeviceGuard guard(a.get_device());
    tiny::cuda::synchronize(a.get_device());
    tiny::cuda::Event start(true), stop(true);
    start.record();
    for (int i = 0; i < reps; ++i) a.matmul(b);
    stop.record();
    tiny::cuda::synchronize(a.get_device());]=])

# The parameters taken through the host on their way to x's GPU: right values,
# right device; only the copy counters (bytes out of a GPU and back in) see it.
workbook_mistake(params_through_host CHECK linear_relu MESSAGE "the parameters went from a GPU through the CPU"
  FIND [=[  return tiny::relu(x.matmul(w.to(device)) + b.to(device));]=]
  REPLACE [=[  return tiny::relu(x.matmul(w.cpu().to(device)) + b.cpu().to(device));  // "the CPU is the safe way"]=])
