# Lesson 1's classic mistakes: each must fail its check with its message.

# "auto" on a machine without a GPU must not give a GPU.
workbook_mistake(no_cpu_fallback CHECK choose_device MESSAGE "falls back to the CPU"
  FIND [=[return count > 0 ? tiny::Device(tiny::kCUDA, tiny::cuda::current_device()) : tiny::Device(tiny::kCPU);]=]
  REPLACE [=[return tiny::Device(tiny::kCUDA, tiny::cuda::current_device());]=])

# An explicit cuda:1 with no GPU at all silently trains on the CPU: only "auto" may fall back.
workbook_mistake(explicit_request_falls_back CHECK choose_device_errors MESSAGE "training on the CPU instead would hide"
  FIND [=[  if (count == 0) {]=]
  REPLACE [=[  if (count == 0) {
    return tiny::Device(tiny::kCPU);]=])

# A typo such as cuda:3 on a 2-GPU machine silently trains on the CPU.
workbook_mistake(bad_index_falls_back CHECK choose_device_errors MESSAGE "not a reason to fall back"
  FIND [=[  if (index >= count) {]=]
  REPLACE [=[  if (index >= count) {
    return tiny::Device(tiny::DeviceType::CPU);]=])

# "cuda" taken as cuda:0, whichever GPU is current (torch.device("cuda") means the current one).
workbook_mistake(cuda_means_cuda0 CHECK choose_device MESSAGE "means the current GPU"
  FIND [=[device.has_index() ? device.index() : tiny::cuda::current_device()]=]
  REPLACE [=[device.has_index() ? device.index() : 0]=])

# current_device() (which GPU is selected) where device_count() (how many) is meant.
workbook_mistake(count_is_current_device CHECK count_devices MESSAGE "your answer follows tiny::cuda::current_device()"
  FIND [=[return tiny::cuda::is_available() ? tiny::cuda::device_count() : 0;]=]
  REPLACE [=[return tiny::cuda::is_available() ? tiny::cuda::current_device() : 0;]=])

# GB (10^9 bytes) instead of GiB (2^30 bytes).
workbook_mistake(memory_in_gb CHECK describe_device MESSAGE "that is GB (10^9 bytes)"
  FIND [=[/ (1024.0 * 1024.0 * 1024.0)]=]
  REPLACE [=[/ 1e9]=])

# Device 0's properties for every device.
workbook_mistake(properties_of_device_0 CHECK describe_device MESSAGE "the same GPU's properties whatever device"
  FIND [=[tiny::cuda::get_device_properties(device.index())]=]
  REPLACE [=[tiny::cuda::get_device_properties(0)]=])

# The error for a missing GPU does not say which GPUs exist.
workbook_mistake(vague_error CHECK choose_device_errors MESSAGE "does not say which GPUs exist"
  FIND [=[" does not exist: this machine has " +
                            std::to_string(count) + " GPU(s), cuda:0 to cuda:" + std::to_string(count - 1) +
                            "; pick one of them or use cpu"]=]
  REPLACE [=[" does not exist"]=])

# Re-parsing by hand, a misspelt device reported as a missing GPU: the wrong error type.
workbook_mistake(wrong_error_type CHECK choose_device_errors MESSAGE "the text is not a device at all"
  FIND [=[  const tiny::Device device(requested);]=]
  REPLACE [=[  if (requested != "cpu" && requested.rfind("cuda", 0) != 0) {
    throw tiny::DeviceError("choose_device: '" + requested + "' is not a device: use cpu, auto, cuda or cuda:N");
  }
  const tiny::Device device(requested);]=])

# Re-parsing the index by hand: std::stoi throws std::invalid_argument or std::out_of_range from inside.
workbook_mistake(unchecked_stoi CHECK choose_device_errors MESSAGE "came from inside your code (std::stoi?)"
  FIND [=[  const tiny::Device device(requested);]=]
  REPLACE [=[  const tiny::Device device = requested.rfind("cuda:", 0) == 0
                                  ? tiny::Device(tiny::kCUDA, std::stoi(requested.substr(5)))
                                  : tiny::Device(requested);]=])

# "cuda" returned as it was parsed: a device without an index, where the check wants the current GPU's.
workbook_mistake(cuda_without_index CHECK choose_device MESSAGE "a device without an index leaves the choice to whoever uses it"
  FIND [=[  return tiny::Device(tiny::kCUDA, index);]=]
  REPLACE [=[  return device.has_index() ? tiny::Device(tiny::kCUDA, index) : device;]=])
