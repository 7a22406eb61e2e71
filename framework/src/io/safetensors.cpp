/// @file safetensors.cpp
/// @brief Checkpoints in Hugging Face's safetensors format: `tiny::save`, `tiny::load`.
///
/// Format (github.com/huggingface/safetensors, README "Format"): 8 bytes N, an
/// unsigned little-endian 64-bit header length; N bytes of UTF-8 JSON, an object
/// mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
/// plus an optional "__metadata__" object of strings, padded with spaces so that
/// the data starts on an 8-byte boundary; then the data section, in which the
/// offsets are relative. The reference implementation also requires: no
/// duplicate keys, a header of at most 100 MB, `end - begin` equal to the
/// tensor's size in bytes, and tensors that cover the data section exactly,
/// back to back, without holes or overlaps (MetadataIncompleteBuffer).
///
/// The header is parsed with nlohmann-json's SAX interface into the few
/// structures the schema allows, so a hostile header can neither nest deeply
/// nor hide a duplicate key, and costs linear time.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_set>
#include <utility>

#include "io/atomic_file.h"
#include "io/file_common.h"
#include "tiny/autograd.h"
#include "tiny/error.h"
#include "tiny/ops.h"
#include "tiny/serialize.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "tiny's safetensors layer stores host bytes as little-endian data");

namespace tiny::io::detail {
namespace {

// Every dtype of the format, with its size. Adding a tiny dtype is filling in
// its `tiny` field here and a case in safetensors_dtype_name.
const SafetensorsDtype kDtypes[] = {
    {"BOOL", 1, Dtype::Bool},   {"U8", 1, Dtype::UInt8},       {"I8", 1, std::nullopt},
    {"F8_E5M2", 1, std::nullopt}, {"F8_E4M3", 1, std::nullopt}, {"I16", 2, std::nullopt},
    {"U16", 2, std::nullopt},   {"F16", 2, Dtype::Float16},    {"BF16", 2, Dtype::BFloat16},
    {"I32", 4, Dtype::Int32},   {"U32", 4, std::nullopt},      {"F32", 4, Dtype::Float32},
    {"F64", 8, Dtype::Float64}, {"I64", 8, Dtype::Int64},      {"U64", 8, std::nullopt},
};

constexpr const char* kCorrupt = "the file is corrupt or not a safetensors file";
constexpr const char* kTinyDtypes = "tiny loads F16, BF16, F32, F64, I64, I32, U8 and BOOL";

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string all_dtype_names() {
  std::string s;
  for (const auto& d : kDtypes) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

// ---------------------------------------------------------------- header parser

// A SAX handler that accepts exactly the safetensors schema. On the first
// problem it records a message and stops the parse.
class HeaderHandler : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit HeaderHandler(uint64_t data_size) : data_size_(data_size) {}

  std::string error;  // empty while all is well
  bool finished = false;
  std::vector<SafetensorsEntry> entries;  // in header order
  std::map<std::string, std::string> metadata;

  bool null() override { return scalar("null"); }
  bool boolean(bool) override { return scalar("a boolean"); }
  bool number_integer(number_integer_t v) override {
    if (state_ == State::Shape)
      return fail(in_tensor() + "shape has a negative dimension " + std::to_string(v) +
                  " (dimensions are integers >= 0)");
    if (state_ == State::Offsets)
      return fail(in_tensor() + "data_offsets has a negative value " + std::to_string(v) +
                  " (offsets are integers >= 0)");
    return scalar("a number");
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (state_ == State::Shape) {
      if (shape_.size() >= kSafetensorsMaxDims)
        return fail(in_tensor() + "shape has more than " + std::to_string(kSafetensorsMaxDims) + " dimensions");
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return fail(in_tensor() + "shape has a dimension " + std::to_string(v) + " larger than 2^63 - 1");
      shape_.push_back(static_cast<int64_t>(v));
      return true;
    }
    if (state_ == State::Offsets) {
      if (offsets_.size() >= 2) return fail(in_tensor() + "data_offsets must be [begin, end], it has more than 2 values");
      offsets_.push_back(v);
      return true;
    }
    return scalar("a number");
  }
  bool number_float(number_float_t, const string_t& text) override {
    if (state_ == State::Shape || state_ == State::Offsets)
      return fail(in_tensor() + (state_ == State::Shape ? "shape" : "data_offsets") + " has the value " +
                  printable(text, 80, ShowBytes::kUtf8) + ", which is not an integer in [0, 2^64)");
    return scalar("a number");
  }
  bool binary(binary_t&) override { return scalar("binary data"); }
  bool string(string_t& v) override {
    if (state_ == State::Metadata) {
      metadata.emplace(meta_key_, std::move(v));
      return true;
    }
    if (state_ == State::Tensor && field_ == Field::Dtype) {
      dtype_ = std::move(v);
      return true;
    }
    return scalar("a string");
  }

  bool start_object(std::size_t) override {
    switch (state_) {
      case State::Start: state_ = State::Top; return true;
      case State::Top: state_ = is_meta_ ? State::Metadata : State::Tensor; return true;
      default: return scalar("an object");
    }
  }
  bool end_object() override {
    switch (state_) {
      case State::Top: state_ = State::Done; finished = true; return true;
      case State::Metadata: state_ = State::Top; return true;
      case State::Tensor: state_ = State::Top; return finish_tensor();
      default: return fail("internal error: unexpected end of object");  // the lexer never gets here
    }
  }
  bool start_array(std::size_t) override {
    if (state_ == State::Tensor && field_ == Field::Shape) {
      state_ = State::Shape;
      return true;
    }
    if (state_ == State::Tensor && field_ == Field::Offsets) {
      state_ = State::Offsets;
      return true;
    }
    return scalar("an array");
  }
  bool end_array() override {
    if (state_ == State::Offsets && offsets_.size() != 2)
      return fail(in_tensor() + "data_offsets must be [begin, end], it has " + std::to_string(offsets_.size()) +
                  " value" + (offsets_.size() == 1 ? "" : "s"));
    state_ = State::Tensor;
    return true;
  }

  bool key(string_t& k) override {
    if (state_ == State::Top) {
      if (!top_keys_.insert(k).second)
        return fail("the name '" + printable(k, 80, ShowBytes::kUtf8) +
                    "' appears twice (duplicate keys are not allowed)");
      is_meta_ = k == "__metadata__";
      name_ = std::move(k);
      if (!is_meta_) reset_tensor();
      return true;
    }
    if (state_ == State::Metadata) {
      if (metadata.count(k))
        return fail("__metadata__ has the key '" + printable(k, 80, ShowBytes::kUtf8) +
                    "' twice (duplicate keys are not allowed)");
      meta_key_ = std::move(k);
      return true;
    }
    // state_ == State::Tensor
    if (k == "dtype") field_ = Field::Dtype;
    else if (k == "shape") field_ = Field::Shape;
    else if (k == "data_offsets") field_ = Field::Offsets;
    else
      return fail(in_tensor() + "unexpected field '" + printable(k, 80, ShowBytes::kUtf8) +
                  "' (a tensor's entry has exactly \"dtype\", \"shape\" and \"data_offsets\")");
    const unsigned bit = 1u << static_cast<unsigned>(field_);
    if (seen_fields_ & bit) return fail(in_tensor() + "the field '" + k + "' appears twice");
    seen_fields_ |= bit;
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    if (error.empty()) error = "the header is not valid JSON (at byte " + std::to_string(position) + "): " + ex.what();
    return false;
  }

 private:
  enum class State { Start, Top, Metadata, Tensor, Shape, Offsets, Done };
  enum class Field { Dtype = 0, Shape = 1, Offsets = 2 };

  bool fail(const std::string& what) {
    if (error.empty()) error = what;
    return false;
  }
  std::string in_tensor() const { return "tensor '" + printable(name_, 80, ShowBytes::kUtf8) + "': "; }

  // A value where the schema does not allow it.
  bool scalar(const char* found) {
    switch (state_) {
      case State::Start: return fail(std::string("the header must be a JSON object, found ") + found);
      case State::Top:
        if (is_meta_) return fail(std::string("__metadata__ must be an object of strings, found ") + found);
        return fail(in_tensor() + "its entry must be an object with \"dtype\", \"shape\" and \"data_offsets\", found " +
                    found);
      case State::Metadata:
        return fail("__metadata__ value of '" + printable(meta_key_, 80, ShowBytes::kUtf8) +
                    "' must be a string, found " + found);
      case State::Tensor:
        switch (field_) {
          case Field::Dtype: return fail(in_tensor() + "dtype must be a string such as \"F32\", found " + found);
          case Field::Shape:
            return fail(in_tensor() + "shape must be a list of integers such as [2, 3], found " + found);
          case Field::Offsets:
            return fail(in_tensor() + "data_offsets must be a list [begin, end], found " + found);
        }
        break;
      case State::Shape: return fail(in_tensor() + "shape must hold integers only, found " + found);
      case State::Offsets: return fail(in_tensor() + "data_offsets must hold integers only, found " + found);
      case State::Done: break;
    }
    return fail(std::string("unexpected ") + found);
  }

  void reset_tensor() {
    seen_fields_ = 0;
    dtype_.clear();
    shape_.clear();
    offsets_.clear();
  }

  bool finish_tensor() {
    const char* names[] = {"dtype", "shape", "data_offsets"};
    std::string missing;
    for (unsigned f = 0; f < 3; ++f)
      if (!(seen_fields_ & (1u << f))) missing += (missing.empty() ? "\"" : ", \"") + std::string(names[f]) + "\"";
    if (!missing.empty()) return fail(in_tensor() + "its entry lacks " + missing);

    const SafetensorsDtype* dt = find_safetensors_dtype(dtype_);
    if (!dt)
      return fail(in_tensor() + "unknown dtype '" + printable(dtype_, 80, ShowBytes::kUtf8) +
                  "' (safetensors dtypes: " + all_dtype_names() + ")");
    if (!dt->tiny)
      return fail(in_tensor() + "dtype " + dt->name + " is not supported (" + kTinyDtypes +
                  "); convert it in PyTorch before saving, e.g. t.float() or t.long()");

    // Size in bytes, without overflow; like numpy and the reference, a zero
    // dimension does not excuse an overflowing product.
    uint64_t nbytes = dt->itemsize;
    bool zero = false;
    for (int64_t d : shape_) {
      if (d == 0) {
        zero = true;
        continue;
      }
      if (__builtin_mul_overflow(nbytes, static_cast<uint64_t>(d), &nbytes) ||
          nbytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return fail(in_tensor() + "shape " + shape_text(shape_) + " of dtype " + dt->name +
                    " is too large: its size in bytes overflows 64 bits");
    }
    if (zero) nbytes = 0;

    const uint64_t begin = offsets_[0], end = offsets_[1];
    const std::string offsets = "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "]";
    if (end < begin) return fail(in_tensor() + offsets + " end before they begin");
    if (end > data_size_)
      return fail(in_tensor() + offsets + " are out of range: the data section has only " +
                  std::to_string(data_size_) + " bytes (is the file truncated?)");
    if (end - begin != nbytes)
      return fail(in_tensor() + "shape " + shape_text(shape_) + " of dtype " + dt->name + " needs " +
                  std::to_string(nbytes) + " bytes, but its " + offsets + " span " + std::to_string(end - begin));

    SafetensorsEntry e;
    e.name = std::move(name_);
    e.dtype = dt;
    e.shape = std::move(shape_);
    e.begin = begin;
    e.end = end;
    entries.push_back(std::move(e));
    return true;
  }

  uint64_t data_size_;
  State state_ = State::Start;
  std::unordered_set<std::string> top_keys_;
  bool is_meta_ = false;
  std::string name_;
  std::string meta_key_;
  Field field_ = Field::Dtype;
  unsigned seen_fields_ = 0;
  std::string dtype_;
  std::vector<int64_t> shape_;
  std::vector<uint64_t> offsets_;
};

// Reads `n` bytes at `offset` of the source into `dst`.
using Reader = std::function<void(uint64_t offset, char* dst, size_t n)>;

StateDict load_from(uint64_t size, const Reader& read, const std::string& name) {
  char prefix[8] = {0};
  read(0, prefix, size < 8 ? static_cast<size_t>(size) : 8);
  const uint64_t n = check_safetensors_prefix(prefix, size, name);
  std::string header(static_cast<size_t>(n), '\0');  // n <= 100 MB and <= size - 8: checked
  read(8, header.data(), header.size());
  const SafetensorsHeader h = parse_safetensors_header(header.data(), header.size(), size - 8 - n, name);
  header.clear();
  header.shrink_to_fit();

  StateDict out;
  out.metadata = h.metadata;
  for (const SafetensorsEntry& e : h.tensors) {
    Tensor t = empty(e.shape, *e.dtype->tiny);
    const uint64_t nbytes = e.end - e.begin;
    if (nbytes) read(8 + n + e.begin, static_cast<char*>(t.raw_data_ptr()), static_cast<size_t>(nbytes));
    if (e.dtype->tiny == Dtype::Bool) {
      // PyTorch writes 0 or 1, but the file is untrusted: any other byte would be an invalid C++ bool.
      auto* bytes = static_cast<unsigned char*>(t.raw_data_ptr());
      for (uint64_t i = 0; i < nbytes; ++i) bytes[i] = bytes[i] != 0;
    }
    out.insert(e.name, t);
  }
  return out;
}

std::string json_string(const std::string& s, const char* what, const std::string& path) {
  try {
    return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  } catch (const nlohmann::json::type_error&) {
    const std::string shown = printable(s, 80, ShowBytes::kAscii);  // not UTF-8: every byte above 0x7f as \xNN
    TINY_THROW(ValueError, "cannot save ", path, ": the ", what, " '", shown,
               "' is not valid UTF-8 (the safetensors header is UTF-8 JSON); rename it");
  }
}

}  // namespace

// ---------------------------------------------------------------- public (internal API)

const SafetensorsDtype* find_safetensors_dtype(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

const char* safetensors_dtype_name(Dtype dtype) {
  switch (dtype) {
    case Dtype::Bool: return "BOOL";
    case Dtype::Int64: return "I64";
    case Dtype::Int32: return "I32";
    case Dtype::UInt8: return "U8";
    case Dtype::Float32: return "F32";
    case Dtype::Float64: return "F64";
    case Dtype::Float16: return "F16";
    case Dtype::BFloat16: return "BF16";
  }
  TINY_THROW(DtypeError, "safetensors: no safetensors name for dtype ", static_cast<int>(dtype));
}

uint64_t check_safetensors_prefix(const char* prefix, uint64_t file_size, const std::string& name) {
  if (file_size < 8)
    TINY_THROW(IOError, name, ": too short to be a safetensors file: it has ", file_size,
               " bytes, and the header length alone takes 8; ", kCorrupt);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(prefix[i]);
  if (n > kSafetensorsMaxHeader)
    TINY_THROW(IOError, name, ": the header length is ", n, " bytes, more than the ", kSafetensorsMaxHeader,
               "-byte limit of the safetensors format; ", kCorrupt);
  if (n > file_size - 8)
    TINY_THROW(IOError, name, ": the header length is ", n, " bytes, larger than the file (", file_size,
               " bytes, of which ", file_size - 8, " follow the length); the file is truncated or corrupt");
  return n;
}

SafetensorsHeader parse_safetensors_header(const char* json, size_t n, uint64_t data_size, const std::string& name) {
  if (n == 0) TINY_THROW(IOError, name, ": bad safetensors header: it is empty (length 0); ", kCorrupt);
  // nlohmann-json stops at a NUL byte as if the input ended there, so it would
  // accept "{}\0garbage"; valid JSON never holds one (a string escapes it as \u0000).
  if (const void* nul = std::memchr(json, '\0', n))
    TINY_THROW(IOError, name, ": bad safetensors header: the header is not valid JSON: it has a NUL byte at offset ",
               static_cast<const char*>(nul) - json, " (the padding after the JSON must be spaces); ", kCorrupt);
  HeaderHandler handler(data_size);
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(json, json + n, &handler, nlohmann::json::input_format_t::json,
                                   /*strict=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& ex) {
    if (handler.error.empty()) handler.error = std::string("the header is not valid JSON: ") + ex.what();
  }
  if (!ok || !handler.finished || !handler.error.empty()) {
    const std::string what = handler.error.empty() ? "the header is not valid JSON" : handler.error;
    TINY_THROW(IOError, name, ": bad safetensors header: ", what, "; ", kCorrupt);
  }

  // The data section must be covered exactly: sorted by offset, each tensor
  // starts where the previous one ended, and the last ends at the end.
  SafetensorsHeader h;
  h.metadata = std::move(handler.metadata);
  h.tensors = std::move(handler.entries);
  std::stable_sort(h.tensors.begin(), h.tensors.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry& e : h.tensors) {
    const std::string range = "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
    if (e.begin < covered)
      TINY_THROW(IOError, name, ": bad safetensors header: the data of tensor '",
                 printable(e.name, 80, ShowBytes::kUtf8), "' ", range, " overlaps that of tensor '",
                 printable(previous->name, 80, ShowBytes::kUtf8), "' [", previous->begin, ", ", previous->end, "]; ",
                 kCorrupt);
    if (e.begin > covered)
      TINY_THROW(IOError, name, ": bad safetensors header: bytes [", covered, ", ", e.begin,
                 ") of the data section belong to no tensor (a hole before tensor '",
                 printable(e.name, 80, ShowBytes::kUtf8), "' ", range, "); ", kCorrupt);
    covered = e.end;
    if (e.end > e.begin) previous = &e;
  }
  if (covered != data_size)
    TINY_THROW(IOError, name, ": bad safetensors header: the last ", data_size - covered, " of the ", data_size,
               " bytes of the data section belong to no tensor (extra bytes at the end of the file, or a tensor "
               "missing from the header); ",
               kCorrupt);
  return h;
}

StateDict parse_safetensors(const char* bytes, size_t size, const std::string& name) {
  if (bytes == nullptr) size = 0;
  return load_from(
      size, [&](uint64_t offset, char* dst, size_t n) { std::memcpy(dst, bytes + offset, n); }, name);
}

std::string make_safetensors_header(const StateDict& state, const std::string& path) {
  std::string json = "{";
  if (!state.metadata.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : state.metadata) {
      if (!first) json += ",";
      first = false;
      json += json_string(k, "metadata key", path) + ":" + json_string(v, "metadata value", path);
    }
    json += "}";
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : state) {
    TINY_CHECK(t.defined(), ValueError, "cannot save ", path, ": the tensor '", name, "' is undefined");
    TINY_CHECK(name != "__metadata__", ValueError, "cannot save ", path,
               ": a tensor may not be named '__metadata__' (the safetensors header uses that key for the "
               "metadata); rename it");
    const uint64_t nbytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    if (json.size() > 1) json += ",";
    json += json_string(name, "tensor name", path) + ":{\"dtype\":\"" + safetensors_dtype_name(t.dtype()) +
            "\",\"shape\":[";
    for (int64_t i = 0; i < t.dim(); ++i) json += (i ? "," : "") + std::to_string(t.size(i));
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + nbytes) + "]}";
    offset += nbytes;
  }
  json += "}";
  json.append((8 - json.size() % 8) % 8, ' ');  // the data starts on an 8-byte boundary, as the reference writes
  return json;
}

}  // namespace tiny::io::detail

namespace tiny {

namespace {
using io::detail::errno_text;
using io::detail::Fd;
using io::detail::pread_full;
}  // namespace

void save(const StateDict& state, const std::string& path) {
  TINY_CHECK(!path.empty(), ValueError, "tiny::save: the path is empty; pass a file path such as model.safetensors");
  const std::string header = io::detail::make_safetensors_header(state, path);
  io::detail::AtomicFileWriter file(path, "safetensors", "model.safetensors");
  unsigned char length[8];
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);
  file.write(length, sizeof length);
  file.write(header.data(), header.size());
  NoGradGuard no_grad;
  for (const auto& [name, t] : state) {
    // One tensor at a time on the host, so saving a model from a GPU needs one tensor's worth of host memory.
    const Tensor host = t.detach().cpu().contiguous();
    const size_t nbytes = static_cast<size_t>(host.numel()) * host.element_size();
    TINY_CHECK(nbytes == static_cast<size_t>(t.numel()) * t.element_size(), Error, "cannot save ", path,
               ": the tensor '", name, "' changed size while it was being saved");
    if (nbytes) file.write(host.raw_data_ptr(), nbytes);
  }
  file.commit();
}

StateDict load(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) io::detail::throw_open_error(path, errno, "open");
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) TINY_THROW(IOError, "cannot read ", path, ": ", errno_text(errno));
  if (S_ISDIR(st.st_mode))
    TINY_THROW(IOError, path, " is a directory, not a safetensors file; pass the path of a file");

  if (!S_ISREG(st.st_mode)) {
    // A pipe or device has no size to check against: read it all, then parse.
    const std::vector<char> all = io::detail::read_to_end(fd.get(), path);
    return io::detail::parse_safetensors(all.data(), all.size(), path);
  }

  // A regular file: every size in the header is checked against the file's
  // size before anything is allocated for it.
  const auto read = [&](uint64_t offset, char* dst, size_t n) {
    if (pread_full(fd.get(), dst, n, offset, path) != n)
      TINY_THROW(IOError, path, ": the file shrank while it was being read; try again");
  };
  return io::detail::load_from(static_cast<uint64_t>(st.st_size), read, path);
}

}  // namespace tiny
