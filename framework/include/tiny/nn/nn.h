/// @file nn/nn.h
/// @brief Every `tiny::nn` header in one include (PyTorch's `import torch.nn as nn`).
#pragma once

#include "tiny/nn/activation.h"
#include "tiny/nn/batchnorm.h"
#include "tiny/nn/container.h"
#include "tiny/nn/conv.h"
#include "tiny/nn/embedding.h"
#include "tiny/nn/functional.h"
#include "tiny/nn/init.h"
#include "tiny/nn/linear.h"
#include "tiny/nn/loss.h"
#include "tiny/nn/module.h"
#include "tiny/nn/normalization.h"
#include "tiny/nn/parallel/comm.h"
#include "tiny/nn/parallel/data_parallel.h"
#include "tiny/nn/pooling.h"
