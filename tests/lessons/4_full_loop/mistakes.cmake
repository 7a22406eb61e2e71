# Lesson 4's classic mistakes: each is the reference with one change, and must
# fail its check with a message that names the mistake.

workbook_mistake(forgot_zero_grad CHECK train_step MESSAGE "the gradients were not cleared"
  FIND [=[optimizer.zero_grad();  // the gradients of the previous step are still there]=]
  REPLACE [=[// (no zero_grad: the gradients add up)]=])

workbook_mistake(unweighted_mean CHECK train_one_epoch MESSAGE "you averaged per batch"
  FIND [=[loss_sum += train_step(model, batch, optimizer, device) * static_cast<double>(n);
    examples += n;]=]
  REPLACE [=[loss_sum += train_step(model, batch, optimizer, device);
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
  FIND [=[static_cast<double>(correct) / static_cast<double>(examples)}]=]
  REPLACE [=[100.0 * static_cast<double>(correct) / static_cast<double>(examples)}]=])

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
  const tiny::Tensor loss = F::cross_entropy(model(on_device.data), on_device.target);
  loss.backward();
  optimizer.step();]=]
  REPLACE [=[  const tiny::Tensor loss = F::cross_entropy(model(on_device.data), on_device.target);
  loss.backward();
  optimizer.step();
  optimizer.zero_grad();]=])
