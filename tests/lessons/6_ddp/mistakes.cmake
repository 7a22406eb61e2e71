# Lesson 6's classic mistakes: each is the reference with one change, and must
# fail its check with a message that names the mistake.

# average_gradients: the mechanism by hand.
workbook_mistake(average_sum_only CHECK average_gradients MESSAGE "is the sum of the ranks' gradients, not their mean"
  FIND [=[    p.grad().div_(world);        // the sum over the ranks becomes their mean]=]
  REPLACE [=[]=])

workbook_mistake(average_divided_twice CHECK average_gradients MESSAGE "you divided twice"
  FIND [=[    dist::all_reduce(p.grad());  // in place: every rank now holds the sum]=]
  REPLACE [=[    dist::all_reduce(p.grad(), dist::ReduceOp::AVG);]=])

workbook_mistake(average_a_copy CHECK average_gradients MESSAGE "is still this rank's own gradient"
  FIND [=[    dist::all_reduce(p.grad());  // in place: every rank now holds the sum]=]
  REPLACE [=[    dist::all_reduce(p.grad().clone());]=])

# Right in its numbers, wrong in its collectives: the weights are equal on every rank, so averaging them changes nothing.
workbook_mistake(average_weights_too CHECK average_gradients MESSAGE "the weights too?"
  FIND [=[    p.grad().div_(world);        // the sum over the ranks becomes their mean]=]
  REPLACE [=[    p.grad().div_(world);
    dist::all_reduce(p);  // "keep the weights in sync too"
    p.div_(world);]=])

# Right in its numbers: the world size counted with a collective per parameter.
workbook_mistake(average_counts_ranks CHECK average_gradients MESSAGE "the world size needs no collective"
  FIND [=[    p.grad().div_(world);        // the sum over the ranks becomes their mean]=]
  REPLACE [=[    const tiny::Tensor ranks = tiny::ones({1});
    dist::all_reduce(ranks);
    p.grad().div_(ranks.item<double>());]=])

workbook_mistake(device_from_rank CHECK setup MESSAGE "you picked the GPU from the global rank"
  FIND [=[return tiny::Device(tiny::kCUDA, local);]=]
  REPLACE [=[return tiny::Device(tiny::kCUDA, dist::get_rank());]=])

workbook_mistake(sum_not_mean CHECK all_reduce_mean MESSAGE "that is the sum over the ranks"
  FIND [=[return t.item<double>() / dist::get_world_size();]=]
  REPLACE [=[return t.item<double>();]=])

workbook_mistake(no_sampler CHECK make_loader MESSAGE "every rank loaded the same examples"
  FIND [=[options.sampler = data.sampler;]=]
  REPLACE [=[options.shuffle = true;]=])

workbook_mistake(no_set_epoch CHECK train_one_epoch MESSAGE "only your code tells it the epoch (set_epoch)"
  FIND [=[data.sampler->set_epoch(static_cast<uint64_t>(epoch));  // a new shuffle every epoch]=]
  REPLACE [=[(void)epoch;]=])

workbook_mistake(manual_all_reduce CHECK train_one_epoch MESSAGE "DDP already averaged the gradients in backward(); your loop all-reduced them again"
  FIND [=[loss.backward();  // DDP averages the gradients over the ranks here]=]
  REPLACE [=[loss.backward();
    for (const tiny::Tensor& p : model.parameters()) dist::all_reduce(p.grad());  // "to be sure"]=])

# Right in its numbers (the sum of the means, divided again, is the mean): caught by the collective counts only.
workbook_mistake(manual_all_reduce_divided CHECK train_one_epoch MESSAGE "DDP already averaged the gradients in backward(); your loop all-reduced them again"
  FIND [=[loss.backward();  // DDP averages the gradients over the ranks here]=]
  REPLACE [=[loss.backward();
    for (const tiny::Tensor& p : model.parameters()) {
      dist::all_reduce(p.grad());
      p.grad().div_(dist::get_world_size());
    }]=])

workbook_mistake(loss_over_world CHECK train_one_epoch MESSAGE "you divided the loss by the world size"
  FIND [=[const tiny::Tensor loss = F::cross_entropy(model(x), y);]=]
  REPLACE [=[const tiny::Tensor loss = F::cross_entropy(model(x), y).div(dist::get_world_size());]=])

workbook_mistake(mean_divided_again CHECK train_one_epoch MESSAGE "You divided the gradients by the world size after backward()"
  FIND [=[loss.backward();  // DDP averages the gradients over the ranks here]=]
  REPLACE [=[loss.backward();
    for (const tiny::Tensor& p : model.parameters()) p.grad().div_(dist::get_world_size());  // "DDP sums"]=])

# Right in its numbers: the loss all-reduced every step, to log it.
workbook_mistake(loss_all_reduced_every_step CHECK train_one_epoch MESSAGE "more collectives per step than needed"
  FIND [=[    optimizer.step();
    sum += loss.item<double>() * static_cast<double>(x.size(0));]=]
  REPLACE [=[    optimizer.step();
    const tiny::Tensor logged = loss.detach().clone();
    dist::all_reduce(logged);
    sum += loss.item<double>() * static_cast<double>(x.size(0));]=])

# accumulation_step: no_sync.
# Right in its numbers: every micro-batch all-reduces.
workbook_mistake(no_no_sync CHECK accumulation_step MESSAGE "you all-reduced on every micro-batch"
  FIND [=[      auto guard = model.no_sync();  // forward and backward inside: gradients add up locally
      forward_backward();]=]
  REPLACE [=[      forward_backward();]=])

workbook_mistake(last_in_no_sync CHECK accumulation_step MESSAGE "the last too, ran inside no_sync()"
  FIND [=[      forward_backward();  // outside no_sync: this backward all-reduces the accumulated gradients]=]
  REPLACE [=[      auto guard = model.no_sync();
      forward_backward();]=])

workbook_mistake(micro_loss_not_divided CHECK accumulation_step MESSAGE "Divide each micro-batch's loss by the number of micro-batches"
  FIND [=[const tiny::Tensor loss = F::cross_entropy(model(x), y).div(count);  // the mean over all micro-batches]=]
  REPLACE [=[const tiny::Tensor loss = F::cross_entropy(model(x), y);]=])

workbook_mistake(every_rank_saves CHECK train MESSAGE "rank 1 saved a checkpoint too"
  FIND [=[if (rank == 0) tiny::save(model->state_dict(), options.checkpoint);  // one writer]=]
  REPLACE [=[tiny::save(model->state_dict(), options.checkpoint);]=])

workbook_mistake(wrapper_keys CHECK train MESSAGE "you saved the DDP wrapper's state_dict"
  FIND [=[if (rank == 0) tiny::save(model->state_dict(), options.checkpoint);  // one writer]=]
  REPLACE [=[if (rank == 0) tiny::save(ddp->state_dict(), options.checkpoint);]=])

workbook_mistake(no_destroy CHECK train MESSAGE "call tiny::distributed::destroy_process_group()"
  FIND [=[  dist::destroy_process_group();
  return losses;]=]
  REPLACE [=[  return losses;]=])

# A right answer written another way: every gradient flattened into one buffer,
# one all-reduce for all of them (what DDP's buckets do): fewer calls, the same bytes.
workbook_alternative(average_flattened CHECKS average_gradients
  FIND [=[  for (const tiny::Tensor& p : model.parameters()) {
    if (!p.grad().defined()) continue;
    dist::all_reduce(p.grad());  // in place: every rank now holds the sum
    p.grad().div_(world);        // the sum over the ranks becomes their mean
  }]=]
  REPLACE [=[  std::vector<tiny::Tensor> grads;
  for (const tiny::Tensor& p : model.parameters())
    if (p.grad().defined()) grads.push_back(p.grad().reshape({-1}));
  const tiny::Tensor flat = tiny::cat(grads);
  dist::all_reduce(flat);
  int64_t offset = 0;
  for (const tiny::Tensor& p : model.parameters()) {
    if (!p.grad().defined()) continue;
    p.grad().copy_(flat.narrow(0, offset, p.numel()).view(p.sizes()).div(world));
    offset += p.numel();
  }]=])

# The guard around backward only: the forward, outside it, already told DDP to synchronize.
workbook_mistake(no_sync_backward_only CHECK accumulation_step MESSAGE "the forward is where DDP decides"
  FIND [=[    auto forward_backward = [&] {
      const tiny::Tensor loss = F::cross_entropy(model(x), y).div(count);  // the mean over all micro-batches
      loss.backward();
      total += loss.item<double>();
    };
    if (i + 1 < micro_batches.size()) {
      auto guard = model.no_sync();  // forward and backward inside: gradients add up locally
      forward_backward();
    } else {
      forward_backward();  // outside no_sync: this backward all-reduces the accumulated gradients
    }]=]
  REPLACE [=[    const tiny::Tensor loss = F::cross_entropy(model(x), y).div(count);
    if (i + 1 < micro_batches.size()) {
      auto guard = model.no_sync();
      loss.backward();
    } else {
      loss.backward();
    }
    total += loss.item<double>();]=])

# Right in every number and every collective: each gradient taken to the host,
# all-reduced there and copied back. Only the copy counters of the rank's GPU
# see it (bytes each way beyond what the reference's gloo staging makes).
workbook_mistake(average_through_host CHECK average_gradients MESSAGE "they went from the GPU to the host and back"
  FIND [=[    dist::all_reduce(p.grad());  // in place: every rank now holds the sum
    p.grad().div_(world);        // the sum over the ranks becomes their mean]=]
  REPLACE [=[    const tiny::Tensor host = p.grad().cpu();  // "gloo works on the CPU"
    dist::all_reduce(host);
    p.grad().copy_(host.div(world));]=])
# all_reduce_mean under `if (rank == 0)`: rank 0 waits in a collective rank 1 never calls. The
# message names what each rank called, never a CUDA device-side assert (the emulated NCCL's error).
workbook_mistake(mean_on_rank_0_only CHECK train MESSAGE "Rank 0 is running collective all_reduce of 1 float64 elements, but Rank 1 is running collective"
  FIND [=[    const double mean = all_reduce_mean(local, device);  // every rank takes part]=]
  REPLACE [=[    const double mean = rank == 0 ? all_reduce_mean(local, device) : local;  // "only rank 0 prints it"]=])

# The plain mean of the batches' losses: right while an epoch is one batch (or
# every batch has the same size), wrong with a short last batch; a newcomer's
# version passed before the check had one.
workbook_mistake(epoch_mean_of_batches CHECK train_one_epoch MESSAGE "the short last batch counts as much as a full one"
  FIND [=[    sum += loss.item<double>() * static_cast<double>(x.size(0));
    examples += x.size(0);]=]
  REPLACE [=[    sum += loss.item<double>();
    examples += 1;  // batches]=])

# The mean copied back with non_blocking and read before the copy ran: a race on a real GPU
# (right whenever the copy wins it), stale every time in the check's deferred mode (in threaded
# mode the host read first in 8 runs of 8 too, but that is timing, not a promise).
workbook_mistake(mean_copy_not_waited CHECK all_reduce_mean MESSAGE "you read the host copy before the copy finished"
  FIND [=[  return t.item<double>() / dist::get_world_size();]=]
  REPLACE [=[  const tiny::Tensor host = t.to(tiny::Device("cpu"), /*non_blocking=*/true);  // "no wait"
  return host.item<double>() / dist::get_world_size();]=])

# The mean taken in float32: right to 7 digits, and exercise.h asks for a double's precision.
workbook_mistake(mean_in_float32 CHECK all_reduce_mean MESSAGE "that is the mean rounded to float32"
  FIND [=[tiny::full({1}, value, tiny::kFloat64)]=]
  REPLACE [=[tiny::full({1}, value, tiny::kFloat32)]=])

# Right in every number and in its collectives: empty_cache() after every step, "to keep memory
# low". The ranks' allocators see it: segments given back to the device after a step, and
# allocations that reach the device again at the next step, which the reference's cache serves.
workbook_mistake(empty_cache_every_step CHECK train_one_epoch MESSAGE "that is empty_cache() every step"
  FIND [=[    optimizer.step();
    sum += loss.item<double>() * static_cast<double>(x.size(0));]=]
  REPLACE [=[    optimizer.step();
    tiny::cuda::empty_cache();  // "keep memory low"
    sum += loss.item<double>() * static_cast<double>(x.size(0));]=])

# Right: empty_cache() once, after the epoch's last step (memory handed back before something
# else runs, say an evaluation): no step asks the device again, so the allocator check, which
# counts between steps, passes it.
workbook_alternative(empty_cache_after_epoch CHECKS train_one_epoch
  FIND [=[  return examples > 0 ? sum / static_cast<double>(examples) : 0.0;]=]
  REPLACE [=[  tiny::cuda::empty_cache();  // once an epoch, not every step
  return examples > 0 ? sum / static_cast<double>(examples) : 0.0;]=])

# Every rank trains alone on all the data, its batches as large as the ranks'
# together: the right weights and losses with no gradient all-reduce (a
# student's trial passed so while only extra collectives were counted); and
# the same all-reducing the (identical) gradients, which moves the bytes the
# reference does and is still one GPU's work done on each rank.
set(alone_find_setup [=[  auto ddp = std::make_shared<tiny::nn::parallel::DistributedDataParallel>(model);
  tiny::optim::SGD optimizer(ddp->parameters(), {options.lr});
  ShardedLoader data = make_loader(options.dataset, options.batch_size, options.seed);]=])
set(alone_setup [=[  tiny::optim::SGD optimizer(model->parameters(), {options.lr});
  tiny::data::DataLoaderOptions all;  // every example, the ranks' batches in one
  all.batch_size = options.batch_size * dist::get_world_size();
  tiny::data::DataLoader loader(options.dataset, all);]=])
set(alone_find_epoch [=[    const double local = train_one_epoch(*ddp, data, optimizer, device, epoch);]=])
set(alone_epoch [=[    double sum = 0;
    int64_t seen = 0;
    for (const tiny::data::Batch& batch : loader) {
      const tiny::Tensor x = batch.data.to(device), y = batch.target.to(device);
      optimizer.zero_grad();
      const tiny::Tensor loss = F::cross_entropy((*model)(x), y);
      loss.backward();
@all_reduce@      optimizer.step();
      sum += loss.item<double>() * static_cast<double>(x.size(0));
      seen += x.size(0);
    }
    const double local = sum / static_cast<double>(seen);]=])
set(all_reduce "")
string(CONFIGURE "${alone_epoch}" alone_epoch_plain @ONLY)
set(all_reduce [=[      for (const tiny::Tensor& p : model->parameters()) {
        dist::all_reduce(p.grad());
        p.grad().div_(static_cast<double>(dist::get_world_size()));
      }
]=])
string(CONFIGURE "${alone_epoch}" alone_epoch_all_reducing @ONLY)
workbook_mistake(each_rank_trains_alone CHECK train MESSAGE "examples in 3 epochs, the reference's 24"
  FIND "${alone_find_setup}" REPLACE "${alone_setup}" FIND "${alone_find_epoch}" REPLACE "${alone_epoch_plain}")
workbook_mistake(each_rank_trains_alone_all_reducing CHECK train MESSAGE "examples in 3 epochs, the reference's 24"
  FIND "${alone_find_setup}" REPLACE "${alone_setup}" FIND "${alone_find_epoch}" REPLACE "${alone_epoch_all_reducing}")
