// The fuzz target bodies for tiny's readers: .npy, safetensors, IDX, the digits CSV.
#include <string>

#include "common.h"
#include "io/npy_format.h"
#include "io/safetensors.h"
#include "targets.h"
#include "tiny/data/datasets.h"
#include "tiny/io.h"
#include "tiny/serialize.h"

namespace tiny_fuzz {

namespace {

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

void npy(const uint8_t* data, size_t size) {
  const char* bytes = reinterpret_cast<const char*>(data);
  const tiny::io::detail::NpyArray array = tiny::io::detail::parse_npy(bytes, size, "fuzz.npy");
  require(array.data.size() == static_cast<size_t>(array.numel()) * array.itemsize(),
          "parse_npy returned data that does not match its shape");
  MemFile file(data, size);
  const tiny::Tensor t = tiny::io::load_npy(file.path());
  require(t.sizes() == array.shape, "load_npy returned a tensor of another shape than the header's");
  require(t.numel() == product(array.shape), "load_npy: numel does not match the shape");
}

void safetensors(const uint8_t* data, size_t size) {
  const char* bytes = reinterpret_cast<const char*>(data);
  const tiny::StateDict from_memory = tiny::io::detail::parse_safetensors(bytes, size, "fuzz.safetensors");
  for (const auto& [name, tensor] : from_memory) {
    require(tensor.defined() && tensor.is_contiguous(), "parse_safetensors returned a bad tensor " + name);
  }
  MemFile file(data, size);
  const tiny::StateDict from_file = tiny::load(file.path());
  require(from_file.size() == from_memory.size(), "tiny::load and parse_safetensors disagree on the tensor count");
}

void idx(const uint8_t* data, size_t size) {
  MemFile file(data, size);
  // Any dimension count first; a file that passes is read again expecting its own count (FashionMNIST's
  // 3 and 1) and a wrong one.
  const tiny::data::IdxFile f = tiny::data::read_idx(file.path(), 0);
  uint64_t n = 1;
  for (int64_t d : f.shape) {
    require(d >= 0, "read_idx returned a negative dimension");
    require(!__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n), "read_idx accepted dimensions that overflow");
  }
  require(n == f.data.size(), "read_idx returned " + std::to_string(f.data.size()) + " data bytes for a shape of " +
                                  std::to_string(n) + " elements");
  const int dims = static_cast<int>(f.shape.size());
  require(tiny::data::read_idx(file.path(), dims).data == f.data, "read_idx read the file differently twice");
  try {
    tiny::data::read_idx(file.path(), dims == 3 ? 1 : 3);
    require(false, "read_idx accepted a file with the wrong dimension count");
  } catch (const tiny::IOError&) {
  }
}

void digits_csv(const uint8_t* data, size_t size) {
  const std::filesystem::path root = scratch_dir() / "digits";
  std::filesystem::create_directories(root);
  write_file(root / "digits.csv", data, size);
  for (bool train : {true, false}) {
    tiny::data::Digits d(root.string(), train);
    require(d.size() == (train ? tiny::data::Digits::kNumTrain : tiny::data::Digits::kNumTest),
            "Digits returned a split of the wrong size");
  }
}

}  // namespace tiny_fuzz
