/// @file serialize.h
/// @brief Checkpoints: `tiny::save` and `tiny::load` of a StateDict as a safetensors file.
///
/// The format is Hugging Face's safetensors (https://github.com/huggingface/safetensors):
/// an 8-byte little-endian header length N, N bytes of JSON
/// `{"__metadata__": {...}, "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}`
/// padded with spaces to a multiple of 8, then the tensors' bytes, little-endian and
/// row-major, back to back. PyTorch reads it with `safetensors.torch.load_file`.
#pragma once

#include <string>

#include "tiny/state_dict.h"

namespace tiny {

/// @brief Writes `state` to `path` as a safetensors file, atomically (PyTorch: `safetensors.torch.save_file`).
///
/// Tensors are written in the StateDict's order, contiguous, device tensors
/// copied to the CPU first; `state.metadata` becomes the header's `__metadata__`
/// (omitted when empty). Each dtype is stored under its safetensors name (F32,
/// F64, F16, BF16, I64, I32, U8, BOOL). The bytes go to a temporary file in the same directory,
/// which is fsynced and renamed over `path`: a crash or an error mid-save never
/// destroys the previous checkpoint. Throws tiny::ValueError for a state that
/// cannot be written (an undefined tensor, a tensor named `__metadata__`, a
/// name that is not UTF-8) and tiny::IOError when the file cannot be written.
void save(const StateDict& state, const std::string& path);

/// @brief Reads a safetensors file into a StateDict of CPU tensors, with its `__metadata__` (PyTorch: `load_file`).
///
/// The tensors come in the order of their data in the file, which is the
/// order `save` wrote them in. Everything is validated first; a malformed file
/// throws tiny::IOError naming the file and what is wrong. Dtypes other than
/// F16, BF16, F32, F64, I64, I32, U8 and BOOL are refused with the conversion to make.
StateDict load(const std::string& path);

}  // namespace tiny
