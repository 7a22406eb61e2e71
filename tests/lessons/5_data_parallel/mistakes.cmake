# Lesson 5's classic mistakes: each is the reference with one change, and must
# fail its check with a message that names the mistake.

workbook_mistake(chunk_sizes CHECK scatter MESSAGE "sizes must differ by at most one"
  FIND [=[const int64_t length = rows / n + (i < rows % n ? 1 : 0);  // the first rows % n pieces get one more]=]
  REPLACE [=[const int64_t chunk = (rows + n - 1) / n;  // torch.chunk's sizes
    const int64_t length = chunk < rows - start ? chunk : rows - start;]=])

workbook_mistake(whole_batch_copied CHECK scatter MESSAGE "you copied the whole batch to every device"
  FIND [=[pieces.push_back(batch.narrow(0, start, length).to(devices[static_cast<size_t>(i)]));]=]
  REPLACE [=[pieces.push_back(batch.to(devices[static_cast<size_t>(i)]).narrow(0, start, length));]=])

workbook_mistake(no_size_check CHECK scatter_too_small MESSAGE "throw tiny::ValueError"
  FIND [=[TINY_CHECK(rows >= n, ValueError, "scatter: cannot split ", rows, " samples across ", n,
             " devices: each device needs at least one");]=]
  REPLACE [=[]=])

workbook_mistake(gather_not_moved CHECK gather MESSAGE "move every piece to output_device first"
  FIND [=[moved.push_back(piece.to(output_device));]=]
  REPLACE [=[moved.push_back(piece);]=])

workbook_mistake(wrap_not_moved CHECK wrap MESSAGE "move it there first"
  FIND [=[model->to(tiny::Device(tiny::kCUDA, device_ids.at(0)));  // replicas are copied from here every step]=]
  REPLACE [=[]=])

workbook_mistake(labels_on_cpu CHECK train_step MESSAGE "the labels are still on cpu"
  FIND [=[batch.target.to(model.output_device())]=]
  REPLACE [=[batch.target]=])

workbook_mistake(module_called_directly CHECK train_step MESSAGE "the batch was not split"
  FIND [=[const tiny::Tensor logits = model(batch.data);]=]
  REPLACE [=[const tiny::Tensor logits = (*model.module())(batch.data.to(model.output_device()));]=])

workbook_mistake(batch_to_gpu_first CHECK train_step MESSAGE "the whole batch went to cuda:0 first"
  FIND [=[const tiny::Tensor logits = model(batch.data);]=]
  REPLACE [=[const tiny::Tensor logits = model(batch.data.to(model.output_device()));]=])

# gather through the CPU: right values, but every piece waits for its GPU and is copied twice.
workbook_mistake(gather_through_host CHECK gather MESSAGE "data went from a GPU through the CPU and back"
  FIND [=[moved.push_back(piece.to(output_device));]=]
  REPLACE [=[moved.push_back(piece.cpu().to(output_device));]=])

# The gathered output taken through the CPU before the loss: right losses and
# weights, found from the copy counters (bytes each way, pageable and pinned)...
workbook_mistake(output_through_host CHECK train_step MESSAGE "data went from a GPU through the CPU and back"
  FIND [=[const tiny::Tensor logits = model(batch.data);]=]
  REPLACE [=[const tiny::Tensor logits = model(batch.data).cpu().to(model.output_device());]=])
# ... and by the step_speed check, timed on the modelled clock (workbook_mistake
# skips timed checks, so this entry runs it alone).
add_test(NAME dev.mistake.5.output_through_host_step_speed
         COMMAND lesson_5_checks --student $<TARGET_FILE:lesson_5_mistake_output_through_host>
                 --reference $<TARGET_FILE:lesson_5_reference> --check step_speed
                 --expect-fail "step_speed=makes a round trip through the host")
set_tests_properties(dev.mistake.5.output_through_host_step_speed PROPERTIES LABELS dev TIMEOUT 600)

# Right in every number: empty_cache() after every step, "to keep memory low". The allocator sees
# it: the segment of cuda:1's replica given back after each step, and asked for again at the next.
workbook_mistake(empty_cache_every_step CHECK train_step MESSAGE "that is empty_cache() every step"
  FIND [=[  optimizer.step();
  return loss.item<double>();]=]
  REPLACE [=[  optimizer.step();
  tiny::cuda::empty_cache();  // "keep memory low"
  return loss.item<double>();]=])

# The loss copied back with non_blocking and read before the copy ran: right most of the time in
# threaded mode (the copy usually wins the race), stale every time in the check's deferred mode.
workbook_mistake(loss_copy_not_waited CHECK train_step MESSAGE "you read the host copy before the copy finished"
  FIND [=[  return loss.item<double>();]=]
  REPLACE [=[  return loss.to(tiny::Device("cpu"), /*non_blocking=*/true).item<double>();  // "no wait"]=])
