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

# The clock is read while the products are still queued on the GPU.
workbook_mistake(no_final_sync CHECK time_matmul_waits MESSAGE "the clock stopped before the GPU finished"
  FIND [=[  wait_for_gpu();
  const Clock::time_point stop = Clock::now();]=]
  REPLACE [=[  const Clock::time_point stop = Clock::now();]=])

# Synchronized, but only after reading the clock.
workbook_mistake(sync_after_clock CHECK time_matmul_waits MESSAGE "the clock stopped before the GPU finished"
  FIND [=[  wait_for_gpu();
  const Clock::time_point stop = Clock::now();]=]
  REPLACE [=[  const Clock::time_point stop = Clock::now();
  wait_for_gpu();]=])

# Waits for the current device (cuda:0) while the matrices are on cuda:1.
workbook_mistake(sync_wrong_device CHECK time_matmul_waits MESSAGE "you synchronized cuda:0, but the matrices are on cuda:1"
  FIND [=[if (gpu >= 0) tiny::cuda::synchronize(gpu);]=]
  REPLACE [=[if (gpu >= 0) tiny::cuda::synchronize();]=])

# No warm-up: the first product's setup is timed.
workbook_mistake(no_warmup CHECK time_matmul_waits MESSAGE "there was no warm-up"
  FIND [=[  a.matmul(b);  // warm-up, not timed
]=]
  REPLACE [=[]=])

# The total time of all reps, not the time per product.
workbook_mistake(total_not_mean CHECK time_matmul_waits MESSAGE "divided by reps"
  FIND [=[.count() / reps;]=]
  REPLACE [=[.count();]=])

# The clock starts while the warm-up and earlier work are still queued.
workbook_mistake(no_start_sync CHECK time_matmul_clock_start MESSAGE "The clock started while earlier GPU work was still queued"
  FIND [=[  wait_for_gpu();
  const Clock::time_point start = Clock::now();]=]
  REPLACE [=[  const Clock::time_point start = Clock::now();]=])
