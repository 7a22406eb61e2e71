# Lesson 3's committed wrong solutions: each must fail its check with its message.

# left_behind
workbook_mistake(left_behind_params_only CHECK left_behind MESSAGE "only looks at the parameters"
  FIND [=[  for (const auto& [name, tensor] : model.named_buffers()) {
    if (tensor.device() != device) names.push_back(name);
  }
]=]
  REPLACE [=[]=])
workbook_mistake(left_behind_state_dict CHECK left_behind MESSAGE "misses non-persistent buffers"
  FIND [=[  for (const auto& [name, tensor] : model.named_parameters()) {
    if (tensor.device() != device) names.push_back(name);
  }
  for (const auto& [name, tensor] : model.named_buffers()) {]=]
  REPLACE [=[  for (const auto& [name, tensor] : model.state_dict()) {]=])
workbook_mistake(left_behind_is_cuda CHECK left_behind MESSAGE "takes a tensor on cuda:1 to be on cuda:0"
  FIND [=[    if (tensor.device() != device) names.push_back(name);
  }
  for (const auto& [name, tensor] : model.named_buffers()) {
    if (tensor.device() != device) names.push_back(name);]=]
  REPLACE [=[    if (tensor.is_cuda() != device.is_cuda()) names.push_back(name);
  }
  for (const auto& [name, tensor] : model.named_buffers()) {
    if (tensor.is_cuda() != device.is_cuda()) names.push_back(name);]=])

# Normalizer
workbook_mistake(normalizer_plain_member CHECK normalizer_buffers MESSAGE "is a plain member, not a buffer"
  FIND [=[  this->mean = register_buffer("mean", mean);
  this->stddev = register_buffer("stddev", stddev);]=]
  REPLACE [=[  this->mean = mean;
  this->stddev = stddev;]=])
workbook_mistake(normalizer_as_parameter CHECK normalizer_buffers MESSAGE "registers its statistics as parameters"
  FIND [=[  this->mean = register_buffer("mean", mean);
  this->stddev = register_buffer("stddev", stddev);]=]
  REPLACE [=[  this->mean = register_parameter("mean", mean);
  this->stddev = register_parameter("stddev", stddev);]=])
workbook_mistake(normalizer_member_not_kept CHECK normalizer_buffers MESSAGE "keep the handle register_buffer returns"
  FIND [=[  this->mean = register_buffer("mean", mean);
  this->stddev = register_buffer("stddev", stddev);]=]
  REPLACE [=[  register_buffer("mean", mean);
  register_buffer("stddev", stddev);]=])
workbook_mistake(normalizer_not_persistent CHECK normalizer_buffers MESSAGE "registered with persistent=false"
  FIND [=[  this->mean = register_buffer("mean", mean);
  this->stddev = register_buffer("stddev", stddev);]=]
  REPLACE [=[  this->mean = register_buffer("mean", mean, false);
  this->stddev = register_buffer("stddev", stddev, false);]=])

# PositionalOffset
workbook_mistake(offset_on_cpu CHECK positional_offset MESSAGE "forward() mixed devices"
  FIND [=[tiny::arange(length, tiny::TensorOptions(x.device()).dtype(x.dtype()))]=]
  REPLACE [=[tiny::arange(length, tiny::TensorOptions(x.dtype()))]=])
workbook_mistake(offset_default_dtype CHECK positional_offset MESSAGE "the positions were made in float32"
  FIND [=[tiny::arange(length, tiny::TensorOptions(x.device()).dtype(x.dtype()))]=]
  REPLACE [=[tiny::arange(length, tiny::TensorOptions(x.device()))]=])

# predict
workbook_mistake(predict_inputs_on_cpu CHECK predict MESSAGE "the inputs are still on cpu"
  FIND [=[return model(inputs.to(device)).cpu();]=]
  REPLACE [=[return model(inputs).cpu();]=])
workbook_mistake(predict_moves_model CHECK predict MESSAGE "Move the inputs to the model instead"
  FIND [=[return model(inputs.to(device)).cpu();]=]
  REPLACE [=[model.to(inputs.device());
  return model(inputs).cpu();]=])
workbook_mistake(predict_output_on_gpu CHECK predict MESSAGE "return them on the CPU with .cpu()"
  FIND [=[return model(inputs.to(device)).cpu();]=]
  REPLACE [=[return model(inputs.to(device));]=])
workbook_mistake(predict_with_grad CHECK predict MESSAGE "outputs that require grad"
  FIND [=[  tiny::NoGradGuard no_grad;
]=]
  REPLACE [=[]=])

# checkpoints
workbook_mistake(save_params_only CHECK save_checkpoint MESSAGE "the buffers mean and stddev are missing"
  FIND [=[tiny::save(model.state_dict(), path);]=]
  REPLACE [=[tiny::StateDict state;
  for (const auto& [name, tensor] : model.named_parameters()) state.insert(name, tensor);
  tiny::save(state, path);]=])
# Moves the file's tensors instead of the model: load_state_dict copies them into the model where it is.
workbook_mistake(load_not_moved CHECK load_checkpoint MESSAGE "Call model.to(device) as well"
  FIND [=[  model.load_state_dict(tiny::load(path));
  model.to(device);]=]
  REPLACE [=[  tiny::StateDict on_device;
  for (const auto& [name, tensor] : tiny::load(path)) on_device.insert(name, tensor.to(device));
  model.load_state_dict(on_device);]=])

# Right in its numbers, wrong only in its speed: the batch predicted a row at a
# time, each row's outputs read back with .cpu() (a wait per row). The predict
# check counts predict()'s waits and launches on the GPU, so it fails every time.
workbook_mistake(predict_row_by_row CHECK predict MESSAGE "a .cpu() (or .item()) per row"
  FIND [=[  return model(inputs.to(device)).cpu();]=]
  REPLACE [=[  std::vector<tiny::Tensor> rows;
  for (int64_t i = 0; i < inputs.size(0); ++i) rows.push_back(model(inputs.narrow(0, i, 1).to(device)).cpu());
  return tiny::cat(rows, 0);]=])
# ... while one synchronize "to be safe" before reading the answer is one wait, not one per row: it passes.
workbook_alternative(predict_with_a_sync CHECKS predict
  FIND [=[  return model(inputs.to(device)).cpu();]=]
  REPLACE [=[  const tiny::Tensor outputs = model(inputs.to(device));
  if (device.is_cuda()) tiny::cuda::synchronize(device.index());
  return outputs.cpu();]=])
# Outputs copied back with non_blocking and returned unwaited: values right most
# of the time in threaded mode, wrong every time in the check's deferred mode,
# and named from the stream still holding work (issue 21: unfinished copies).
workbook_mistake(predict_copy_back_not_waited CHECK predict MESSAGE "the outputs' copy back to the CPU had not run"
  FIND [=[  return model(inputs.to(device)).cpu();]=]
  REPLACE [=[  return model(inputs.to(device)).to(tiny::Device("cpu"), /*non_blocking=*/true);  // "faster"]=])

# The same trap for the second buffer: registered, and its member left empty.
workbook_mistake(normalizer_stddev_not_kept CHECK normalizer_buffers MESSAGE "the member Normalizer::stddev is still an empty tiny::Tensor"
  FIND [=[  this->stddev = register_buffer("stddev", stddev);]=]
  REPLACE [=[  register_buffer("stddev", stddev);]=])
