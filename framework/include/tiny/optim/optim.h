/// @file optim/optim.h
/// @brief Every optimizer and scheduler in one include (PyTorch's `torch.optim`).
#pragma once

#include "tiny/optim/adam.h"
#include "tiny/optim/lr_scheduler.h"
#include "tiny/optim/optimizer.h"
#include "tiny/optim/rmsprop.h"
#include "tiny/optim/sgd.h"
