/// @file npy_format.cpp
/// @brief The `.npy` format: header parsing that trusts nothing, and atomic writes.
///
/// Format reference: numpy/lib/format.py (NEP 1). A file is the magic string
/// "\x93NUMPY", a major and a minor version byte, a little-endian header length
/// (2 bytes in 1.0, 4 bytes in 2.0 and 3.0), the header (a Python dict literal
/// with exactly the keys 'descr', 'fortran_order' and 'shape'), then the data.
#include "io/npy_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "io/atomic_file.h"
#include "io/file_common.h"
#include "tiny/error.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "tiny's .npy layer stores host bytes as little-endian data");

namespace tiny::io::detail {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;           // numpy's ARRAY_ALIGN: data starts on this boundary
constexpr size_t kGrowthDigits = 21;    // numpy's GROWTH_AXIS_MAX_DIGITS (spare header room)
constexpr size_t kMaxDims = 64;         // numpy 2's limit; numpy 1 allows 32
constexpr const char* kFixSave = "save the array again with numpy.save()";
constexpr const char* kSupported =
    "supported: '<f2' '<f4' '<f8' (float16/32/64), '|i1' '<i2' '<i4' '<i8' (int8..int64), "
    "'|u1' '<u2' '<u4' '<u8' (uint8..uint64), '|b1' (bool)";

// ---------------------------------------------------------------- descr

struct Descr {
  bool ok = false;          // a supported dtype in a little-endian (or byte-order free) spelling
  bool big_endian = false;  // a supported dtype, but stored big-endian
  size_t itemsize = 0;
  std::string canonical;    // numpy's own spelling, e.g. "<f4", "|b1"
};

Descr inspect_descr(const std::string& d) {
  Descr r;
  if (d.size() != 3) return r;
  const char order = d[0], kind = d[1], digit = d[2];
  if (order != '<' && order != '>' && order != '|' && order != '=') return r;
  if (digit < '1' || digit > '8') return r;
  const size_t size = static_cast<size_t>(digit - '0');
  bool known = false;
  switch (kind) {
    case 'f': known = size == 2 || size == 4 || size == 8; break;
    case 'i':
    case 'u': known = size == 1 || size == 2 || size == 4 || size == 8; break;
    case 'b': known = size == 1; break;
    default: break;
  }
  if (!known) return r;
  if (size > 1 && order == '>') {
    r.big_endian = true;
    r.itemsize = size;
    return r;
  }
  r.ok = true;
  r.itemsize = size;
  r.canonical = std::string(1, size == 1 ? '|' : '<') + kind + digit;
  return r;
}

// The fix for an unsupported dtype: the closest supported little-endian type.
std::string suggested_descr(const std::string& d) {
  if (d.size() >= 2) {
    switch (d[1]) {
      case 'f': return d.size() == 3 && (d[2] == '2' || d[2] == '8') ? std::string("<f") + d[2] : "<f4";
      case 'i': return d.size() == 3 && d[2] > '1' ? std::string("<i") + d[2] : "<i8";
      case 'u': return d.size() == 3 && d[2] > '1' ? std::string("<u") + d[2] : "<u8";
      case 'b': return "|b1";
      case 'c': return "<f4";  // complex: save real and imaginary parts separately
      default: break;
    }
  }
  return "<f4";
}

// ---------------------------------------------------------------- messages

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

// ---------------------------------------------------------------- header dict

struct Header {
  std::string descr;  // canonical
  size_t itemsize = 0;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// A recursive-descent parser for the one dict literal numpy writes. It reads
// only inside [p, p + n) and accepts what Python's literal_eval accepts for
// such a dict (either quote style, any whitespace, trailing commas, the 'L'
// suffix of Python 2 integers), nothing more.
class HeaderParser {
 public:
  HeaderParser(const char* p, size_t n, const std::string& name, bool allow_long_suffix)
      : p_(p), n_(n), name_(name), allow_long_(allow_long_suffix) {}

  Header parse() {
    bool have_descr = false, have_fortran = false, have_shape = false;
    Header h;
    skip_ws();
    expect('{', "the header must start with '{'");
    skip_ws();
    while (peek() != '}') {
      const size_t key_at = i_;
      const std::string key = parse_string("a quoted key");
      skip_ws();
      expect(':', "expected ':' after a key");
      skip_ws();
      if (key == "descr") {
        if (have_descr) fail_at(key_at, "the key 'descr' appears twice");
        have_descr = true;
        if (peek() == '[')
          TINY_THROW(IOError, name_,
                     ": structured dtypes (a list in 'descr') are not supported; save each field as its own "
                     "array, converted to a plain dtype (e.g. arr['x'].astype('<f4')), with numpy.save()");
        if (peek() != '\'' && peek() != '"') fail("'descr' must be a dtype string such as '<f4'");
        parse_descr_value(h);
      } else if (key == "fortran_order") {
        if (have_fortran) fail_at(key_at, "the key 'fortran_order' appears twice");
        have_fortran = true;
        h.fortran_order = parse_bool();
      } else if (key == "shape") {
        if (have_shape) fail_at(key_at, "the key 'shape' appears twice");
        have_shape = true;
        h.shape = parse_shape();
      } else {
        fail_at(key_at, "unexpected key '" + printable(key.data(), key.size(), 80, ShowBytes::kAscii) +
                            "' (a .npy header has exactly the keys 'descr', 'fortran_order' and 'shape')");
      }
      skip_ws();
      if (peek() == ',') {
        ++i_;
        skip_ws();
      } else if (peek() != '}') {
        fail("expected ',' or '}' after a value");
      }
    }
    ++i_;  // '}'
    skip_ws();
    if (i_ != n_) fail("unexpected text after the closing '}'");
    if (!have_descr || !have_fortran || !have_shape) {
      std::string missing;
      if (!have_descr) missing += " 'descr'";
      if (!have_fortran) missing += " 'fortran_order'";
      if (!have_shape) missing += " 'shape'";
      fail_at(0, "missing key(s):" + missing);
    }
    return h;
  }

 private:
  int peek() const { return i_ < n_ ? static_cast<unsigned char>(p_[i_]) : -1; }

  void skip_ws() {
    while (i_ < n_ && (p_[i_] == ' ' || p_[i_] == '\t' || p_[i_] == '\n' || p_[i_] == '\r' || p_[i_] == '\f' ||
                       p_[i_] == '\v'))
      ++i_;
  }

  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    TINY_THROW(IOError, name_, ": malformed .npy header: ", what, " (at byte ", at, " of the ", n_,
               "-byte header: \"", printable(p_, n_, 120, ShowBytes::kAscii),
               "\"). A valid header looks like {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }; ",
               kFixSave);
  }
  [[noreturn]] void fail(const std::string& what) const { fail_at(i_, what); }

  void expect(char c, const char* what) {
    if (peek() != static_cast<unsigned char>(c)) fail(what);
    ++i_;
  }

  std::string parse_string(const char* what) {
    const int q = peek();
    if (q != '\'' && q != '"') fail(std::string("expected ") + what);
    ++i_;
    const size_t start = i_;
    while (i_ < n_ && static_cast<unsigned char>(p_[i_]) != q) {
      if (p_[i_] == '\\') fail("escape sequences are not allowed in header strings");
      if (p_[i_] == '\n') fail("unterminated string");
      ++i_;
    }
    if (i_ >= n_) fail_at(start - 1, "unterminated string");
    std::string s(p_ + start, i_ - start);
    ++i_;  // closing quote
    return s;
  }

  void parse_descr_value(Header& h) {
    const std::string d = parse_string("a dtype string");
    const Descr info = inspect_descr(d);
    const std::string shown = printable(d.data(), d.size(), 40, ShowBytes::kAscii);
    if (info.big_endian)
      TINY_THROW(IOError, name_, ": big-endian data (descr '", shown,
                 "') is not supported; convert it in numpy with arr.astype('", suggested_descr(d),
                 "') and save it again with numpy.save()");
    if (!info.ok)
      TINY_THROW(IOError, name_, ": unsupported dtype (descr '", shown, "'); ", kSupported,
                 ". Convert it in numpy, e.g. arr.astype('", suggested_descr(d),
                 "'), and save it again with numpy.save()");
    h.descr = info.canonical;
    h.itemsize = info.itemsize;
  }

  bool parse_bool() {
    if (n_ - i_ >= 4 && std::memcmp(p_ + i_, "True", 4) == 0) {
      i_ += 4;
      if (is_ident_char(peek())) fail("'fortran_order' must be True or False");
      return true;
    }
    if (n_ - i_ >= 5 && std::memcmp(p_ + i_, "False", 5) == 0) {
      i_ += 5;
      if (is_ident_char(peek())) fail("'fortran_order' must be True or False");
      return false;
    }
    fail("'fortran_order' must be True or False");
  }

  static bool is_ident_char(int c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }

  std::vector<int64_t> parse_shape() {
    std::vector<int64_t> shape;
    expect('(', "'shape' must be a tuple of integers such as (3, 4), (3,) or ()");
    skip_ws();
    bool trailing_comma = false;
    while (peek() != ')') {
      if (shape.size() == kMaxDims)
        fail("'shape' has more than " + std::to_string(kMaxDims) + " dimensions");
      shape.push_back(parse_dim());
      skip_ws();
      trailing_comma = false;
      if (peek() == ',') {
        ++i_;
        trailing_comma = true;
        skip_ws();
      } else if (peek() != ')') {
        fail("expected ',' or ')' in 'shape'");
      }
    }
    // In Python "(3)" is the integer 3, not a tuple: numpy rejects it too.
    if (shape.size() == 1 && !trailing_comma) fail("'shape' must be a tuple: write (3,) rather than (3)");
    ++i_;  // ')'
    return shape;
  }

  int64_t parse_dim() {
    const size_t start = i_;
    if (peek() == '-') fail("negative dimension in 'shape'");
    if (peek() < '0' || peek() > '9') fail("expected a non-negative integer in 'shape'");
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      const uint64_t digit = static_cast<uint64_t>(peek() - '0');
      if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10)
        fail_at(start, "a dimension in 'shape' does not fit in 64 bits");
      v = v * 10 + digit;
      ++i_;
    }
    if (allow_long_ && peek() == 'L') ++i_;  // Python 2's long literal, as numpy's _filter_header allows
    if (is_ident_char(peek()) || peek() == '.') fail("expected an integer in 'shape'");
    return static_cast<int64_t>(v);
  }

  const char* p_;
  size_t n_;
  size_t i_ = 0;
  const std::string& name_;
  bool allow_long_;
};

// ---------------------------------------------------------------- preamble

struct Preamble {
  int major = 0;
  size_t header_offset = 0;  // where the header text starts
  uint64_t header_len = 0;
  uint64_t data_offset = 0;  // header_offset + header_len
};

// `p` holds the first min(total_size, 12) bytes of the file.
Preamble parse_preamble(const char* p, size_t avail, uint64_t total_size, const std::string& name) {
  const size_t magic_seen = avail < kMagicLen ? avail : kMagicLen;
  if (std::memcmp(p, kMagic, magic_seen) != 0) {
    if (avail >= 4 && std::memcmp(p, "PK\x03\x04", 4) == 0)
      TINY_THROW(IOError, name,
                 ": this is a .npz (zip) archive, not a .npy file; extract its arrays with numpy.load() and "
                 "save each one with numpy.save()");
    TINY_THROW(IOError, name, ": not a .npy file: bad magic, it starts with \"",
               printable(p, magic_seen, 80, ShowBytes::kAscii), "\" instead of \"\\x93NUMPY\"; ", kFixSave);
  }
  if (avail < kMagicLen + 2)
    TINY_THROW(IOError, name, ": truncated .npy file: only ", total_size,
               " bytes, too short for the 10-byte preamble; ", kFixSave);
  Preamble r;
  const int major = static_cast<unsigned char>(p[6]);
  const int minor = static_cast<unsigned char>(p[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    TINY_THROW(IOError, name, ": unsupported .npy format version ", major, ".", minor,
               "; supported versions are 1.0, 2.0 and 3.0. ", kFixSave);
  r.major = major;
  const size_t len_bytes = major == 1 ? 2 : 4;
  r.header_offset = kMagicLen + 2 + len_bytes;
  if (avail < r.header_offset)
    TINY_THROW(IOError, name, ": truncated .npy file: only ", total_size, " bytes, too short for the ",
               r.header_offset, "-byte preamble of format ", major, ".0; ", kFixSave);
  const auto* u = reinterpret_cast<const unsigned char*>(p + kMagicLen + 2);
  r.header_len = major == 1 ? (uint64_t{u[0]} | uint64_t{u[1]} << 8)
                            : (uint64_t{u[0]} | uint64_t{u[1]} << 8 | uint64_t{u[2]} << 16 | uint64_t{u[3]} << 24);
  r.data_offset = r.header_offset + r.header_len;  // at most 12 + 2^32: no overflow
  if (r.data_offset > total_size)
    TINY_THROW(IOError, name, ": truncated .npy file: the header is ", r.header_len, " bytes long but only ",
               total_size - r.header_offset, " bytes follow the preamble; ", kFixSave);
  return r;
}

// Checks the data size the header implies against what the file holds.
size_t checked_data_bytes(const Header& h, uint64_t available, uint64_t data_offset, const std::string& name) {
  // Like numpy, zero-length dimensions do not excuse an overflowing shape.
  uint64_t bytes = h.itemsize;
  bool zero = false;
  const uint64_t max_bytes = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  for (int64_t d : h.shape) {
    if (d == 0) {
      zero = true;
      continue;
    }
    if (bytes > max_bytes / static_cast<uint64_t>(d))
      TINY_THROW(IOError, name, ": the shape ", shape_str(h.shape), " of dtype '", h.descr,
                 "' is too large: its size in bytes overflows 64 bits. The header is corrupt; ", kFixSave);
    bytes *= static_cast<uint64_t>(d);
  }
  if (zero) bytes = 0;
  if (bytes != available) {
    const std::string more =
        available > bytes ? " (" + std::to_string(available - bytes) + " extra bytes at the end)" : "";
    TINY_THROW(IOError, name, ": data size does not match the header: shape ", shape_str(h.shape), " of dtype '",
               h.descr, "' needs ", bytes, " bytes, but the file has ", available, " bytes after its ",
               data_offset, "-byte header", more, ". The file is truncated or corrupt; ", kFixSave);
  }
  return static_cast<size_t>(bytes);
}

Header parse_header_text(const char* p, size_t n, int major, const std::string& name) {
  return HeaderParser(p, n, name, /*allow_long_suffix=*/major <= 2).parse();
}

// ---------------------------------------------------------------- file helpers

// The header numpy 1.24 writes for a C-order array, byte for byte.
std::string make_header(const std::string& descr, const std::vector<int64_t>& shape) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_str(shape) + ", }";
  if (!shape.empty()) {
    const size_t digits = std::to_string(shape[0]).size();
    dict.append(kGrowthDigits > digits ? kGrowthDigits - digits : 0, ' ');
  }
  const size_t hlen = dict.size() + 1;  // + the final '\n'
  for (int major : {1, 2}) {
    const size_t prefix = kMagicLen + 2 + (major == 1 ? 2 : 4);
    const size_t pad = kAlign - (prefix + hlen) % kAlign;
    const uint64_t total = hlen + pad;
    if (major == 1 && total > 0xffff) continue;
    std::string out(kMagic, kMagicLen);
    out += static_cast<char>(major);
    out += '\0';
    for (size_t b = 0; b < prefix - kMagicLen - 2; ++b) out += static_cast<char>((total >> (8 * b)) & 0xff);
    out += dict;
    out.append(pad, ' ');
    out += '\n';
    return out;
  }
  TINY_THROW(ValueError, "npy header too long");  // unreachable: at most 64 dims of 19 digits
}

// Validates the arguments of a write and returns the header to write.
std::string header_for_write(const std::string& descr, const std::vector<int64_t>& shape, const void* data,
                             size_t nbytes, const std::string& name) {
  const Descr info = inspect_descr(descr);
  if (!info.ok)
    TINY_THROW(ValueError, "cannot save ", name, ": unsupported dtype string '",
               printable(descr.data(), descr.size(), 80, ShowBytes::kAscii), "'; ", kSupported);
  TINY_CHECK(shape.size() <= kMaxDims, ValueError, "cannot save ", name, ": ", shape.size(),
             " dimensions is more than the ", kMaxDims, " a .npy file may have");
  uint64_t bytes = info.itemsize;
  bool zero = false;
  for (int64_t d : shape) {
    TINY_CHECK(d >= 0, ValueError, "cannot save ", name, ": negative dimension in shape ", shape_str(shape));
    if (d == 0) {
      zero = true;
      continue;
    }
    TINY_CHECK(bytes <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / static_cast<uint64_t>(d),
               ValueError, "cannot save ", name, ": shape ", shape_str(shape), " is too large (overflows 64 bits)");
    bytes *= static_cast<uint64_t>(d);
  }
  if (zero) bytes = 0;
  TINY_CHECK(bytes == nbytes, ValueError, "cannot save ", name, ": shape ", shape_str(shape), " of dtype '",
             info.canonical, "' needs ", bytes, " bytes of data, but ", nbytes, " were given");
  TINY_CHECK(data != nullptr || nbytes == 0, ValueError, "cannot save ", name, ": the data pointer is null");
  return make_header(info.canonical, shape);
}

}  // namespace

// ---------------------------------------------------------------- public

size_t descr_itemsize(const std::string& descr) {
  const Descr info = inspect_descr(descr);
  return info.ok ? info.itemsize : 0;
}

size_t NpyArray::itemsize() const { return descr_itemsize(descr); }

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

NpyArray parse_npy(const char* bytes, size_t size, const std::string& name_for_errors) {
  const std::string& name = name_for_errors;
  if (bytes == nullptr) size = 0;
  static const char empty = 0;
  const char* p = bytes ? bytes : &empty;
  const Preamble pre = parse_preamble(p, size < 12 ? size : 12, size, name);
  Header h = parse_header_text(p + pre.header_offset, static_cast<size_t>(pre.header_len), pre.major, name);
  const size_t nbytes = checked_data_bytes(h, size - pre.data_offset, pre.data_offset, name);
  NpyArray out;
  out.descr = std::move(h.descr);
  out.fortran_order = h.fortran_order;
  out.shape = std::move(h.shape);
  out.data.assign(p + pre.data_offset, p + pre.data_offset + nbytes);
  return out;
}

NpyArray read_npy_file(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw_open_error(path, errno, "open");
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) TINY_THROW(IOError, "cannot read ", path, ": ", errno_text(errno));
  if (S_ISDIR(st.st_mode)) TINY_THROW(IOError, path, " is a directory, not a .npy file; pass the path of a file");

  if (!S_ISREG(st.st_mode)) {
    // A pipe or device has no size to check against: read it all, then parse.
    const std::vector<char> all = read_to_end(fd.get(), path);
    return parse_npy(all.data(), all.size(), path);
  }

  // A regular file: read the header first, and allocate for the data only once
  // the header's size has been checked against the file's.
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  char pre_buf[12];
  const size_t pre_want = file_size < sizeof pre_buf ? static_cast<size_t>(file_size) : sizeof pre_buf;
  const size_t pre_got = pread_full(fd.get(), pre_buf, pre_want, 0, path);
  if (pre_got != pre_want) TINY_THROW(IOError, path, ": the file shrank while it was being read; try again");
  const Preamble pre = parse_preamble(pre_buf, pre_got, file_size, path);

  std::vector<char> header(static_cast<size_t>(pre.header_len));
  if (pread_full(fd.get(), header.data(), header.size(), pre.header_offset, path) != header.size())
    TINY_THROW(IOError, path, ": the file shrank while it was being read; try again");
  Header h = parse_header_text(header.data(), header.size(), pre.major, path);
  const size_t nbytes = checked_data_bytes(h, file_size - pre.data_offset, pre.data_offset, path);

  NpyArray out;
  out.descr = std::move(h.descr);
  out.fortran_order = h.fortran_order;
  out.shape = std::move(h.shape);
  out.data.resize(nbytes);
  if (pread_full(fd.get(), out.data.data(), nbytes, pre.data_offset, path) != nbytes)
    TINY_THROW(IOError, path, ": the file shrank while it was being read; try again");
  return out;
}

std::vector<char> serialize_npy(const std::string& descr, const std::vector<int64_t>& shape, const void* data,
                                size_t nbytes, const std::string& name_for_errors) {
  const std::string header = header_for_write(descr, shape, data, nbytes, name_for_errors);
  std::vector<char> out(header.begin(), header.end());
  if (nbytes) out.insert(out.end(), static_cast<const char*>(data), static_cast<const char*>(data) + nbytes);
  return out;
}

void write_npy_file(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
                    const void* data, size_t nbytes) {
  TINY_CHECK(!path.empty(), ValueError, "cannot save a .npy file: the path is empty");
  const std::string header = header_for_write(descr, shape, data, nbytes, path);

  AtomicFileWriter file(path, "npy", "array.npy");
  file.write(header.data(), header.size());
  file.write(data, nbytes);
  file.commit();
}

}  // namespace tiny::io::detail
