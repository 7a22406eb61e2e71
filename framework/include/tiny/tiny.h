/// @file tiny.h
/// @brief Everything of `tiny` in one include (PyTorch's `#include <torch/torch.h>`).
#pragma once

#include "tiny/autograd.h"
#include "tiny/cuda.h"
#include "tiny/data/data.h"
#include "tiny/device.h"
#include "tiny/distributed/distributed.h"
#include "tiny/dtype.h"
#include "tiny/error.h"
#include "tiny/generator.h"
#include "tiny/io.h"
#include "tiny/nn/functional.h"
#include "tiny/nn/nn.h"
#include "tiny/nn/parallel/distributed.h"
#include "tiny/nn/utils.h"
#include "tiny/ops.h"
#include "tiny/optim/optim.h"
#include "tiny/parallel.h"
#include "tiny/scalar.h"
#include "tiny/serialize.h"
#include "tiny/state_dict.h"
#include "tiny/tensor.h"
