# Lesson 1's classic mistakes: each must fail its check with its message.

# Asking for "cuda" on a machine without a GPU must not give cuda:0.
workbook_mistake(no_cpu_fallback CHECK choose_device MESSAGE "with no GPU, fall back to the CPU"
  FIND [=[  if (count == 0) return tiny::Device(tiny::DeviceType::CPU);  // no GPU here: fall back to the CPU]=]
  REPLACE [=[]=])

# A typo such as cuda:3 on a 2-GPU machine silently trains on the CPU.
workbook_mistake(bad_index_falls_back CHECK choose_device_errors MESSAGE "not a reason to fall back"
  FIND [=[  if (index >= count) {]=]
  REPLACE [=[  if (index >= count) {
    return tiny::Device(tiny::DeviceType::CPU);]=])

# GB (10^9 bytes) instead of GiB (2^30 bytes).
workbook_mistake(memory_in_gb CHECK describe_device MESSAGE "that is GB (10^9 bytes)"
  FIND [=[/ (1024.0 * 1024.0 * 1024.0)]=]
  REPLACE [=[/ 1e9]=])

# The error for a missing GPU does not say which GPUs exist.
workbook_mistake(vague_error CHECK choose_device_errors MESSAGE "does not say which GPUs exist"
  FIND [=[" does not exist: this machine has " +
                            std::to_string(count) + " GPU(s), cuda:0 to cuda:" + std::to_string(count - 1) +
                            "; pick one of them or use cpu"]=]
  REPLACE [=[" does not exist"]=])

# A misspelt device is not a missing GPU: the wrong error type.
workbook_mistake(wrong_error_type CHECK choose_device_errors MESSAGE "the text is not a device at all"
  FIND [=[    throw tiny::ValueError(]=]
  REPLACE [=[    throw tiny::DeviceError(]=])

# std::stoi on an index too large for an int throws std::out_of_range from inside.
workbook_mistake(unchecked_stoi CHECK choose_device_errors MESSAGE "came from inside your code (std::stoi?)"
  FIND [=[requested.size() <= 8 ? std::stoi(requested.substr(5)) : count]=]
  REPLACE [=[std::stoi(requested.substr(5))]=])
