/// @file data.h
/// @brief All of `tiny::data` in one include (PyTorch's `torch.utils.data` plus a few `torchvision.datasets`).
#pragma once

#include "tiny/data/dataloader.h"
#include "tiny/data/dataset.h"
#include "tiny/data/datasets.h"
#include "tiny/data/sampler.h"
