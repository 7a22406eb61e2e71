# Lesson 6's classic mistakes: each is the reference with one change, and must
# fail its check with a message that names the mistake.

workbook_mistake(device_from_rank CHECK setup MESSAGE "you picked the GPU from the global rank"
  FIND [=[return tiny::Device(tiny::kCUDA, local);]=]
  REPLACE [=[return tiny::Device(tiny::kCUDA, dist::get_rank());]=])

workbook_mistake(sum_not_mean CHECK all_reduce_mean MESSAGE "that is the sum over the ranks"
  FIND [=[return t.item<double>() / dist::get_world_size();]=]
  REPLACE [=[return t.item<double>();]=])

workbook_mistake(no_sampler CHECK make_loader MESSAGE "every rank loaded the same examples"
  FIND [=[options.sampler = data.sampler;]=]
  REPLACE [=[options.shuffle = true;]=])

workbook_mistake(no_set_epoch CHECK train_one_epoch MESSAGE "call data.sampler->set_epoch(epoch)"
  FIND [=[data.sampler->set_epoch(static_cast<uint64_t>(epoch));  // a new shuffle every epoch]=]
  REPLACE [=[(void)epoch;]=])

workbook_mistake(manual_all_reduce CHECK train_one_epoch MESSAGE "you all-reduced the gradients yourself on top of DDP"
  FIND [=[loss.backward();  // DDP averages the gradients over the ranks here]=]
  REPLACE [=[loss.backward();
    for (const tiny::Tensor& p : model.parameters()) dist::all_reduce(p.grad());  // "to be sure"]=])

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
