#include "bundle.h"

#include <cstdio>
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

namespace workbook {

void json_assert_failed(const char* condition) {
  throw std::out_of_range(std::string("a value the check reads is missing or of another kind in the results "
                                      "(nlohmann::json: ") + condition + ")");
}

}  // namespace workbook

namespace workbook {

namespace fs = std::filesystem;

namespace {

// FNV-1a (64 bits) of a file's bytes, as 16 hex digits ("" when it cannot be
// read): enough to see a file changed after the runner listed it; a program
// that means to forge its results can do so in its own process anyway.
std::string digest_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in.good()) return "";
  uint64_t h = 0xcbf29ce484222325ull;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      h ^= static_cast<unsigned char>(buf[i]);
      h *= 0x100000001b3ull;
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// The deepest nesting of arrays and objects in JSON text (strings skipped).
int nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// Where a cut may end: not inside a UTF-8 character.
size_t utf8_boundary(const std::string& text, size_t at) {
  while (at > 0 && at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
  return at;
}

}  // namespace

std::string bytes_text(size_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) v /= 1024, ++u;
  char buf[32];
  if (v == static_cast<double>(static_cast<uint64_t>(v))) {
    std::snprintf(buf, sizeof buf, "%.0f %s", v, units[u]);  // "16 MiB"
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);  // "62.0 MiB" (a little over 62)
  }
  return buf;
}

std::string exchange_limits_problem(std::string_view text) {
  if (text.size() > kMaxExchangeBytes) {
    return "is " + bytes_text(text.size()) + ", more than the " + bytes_text(kMaxExchangeBytes) + " the grader reads";
  }
  const int depth = nesting_depth(text);
  if (depth > kMaxExchangeDepth) {
    return "nests arrays and objects " + std::to_string(depth) + " levels deep, more than the " +
           std::to_string(kMaxExchangeDepth) + " the grader reads";
  }
  return "";
}

std::string cut_text(const std::string& text, size_t max_total, size_t max_line) {
  std::string out;
  size_t cut = 0;  // bytes left out past max_total
  for (size_t start = 0; start < text.size();) {
    const size_t nl = text.find('\n', start);
    const size_t end = nl == std::string::npos ? text.size() : nl;
    std::string line = text.substr(start, std::min(end - start, max_line + 1));
    if (end - start > max_line) {
      line.resize(utf8_boundary(text.substr(start, max_line + 1), max_line));
      line += "... (" + std::to_string(end - start - line.size()) + " bytes cut)";
    }
    if (nl != std::string::npos) line += "\n";
    if (out.size() + line.size() > max_total) {
      cut = text.size() - start;
      break;
    }
    out += line;
    start = nl == std::string::npos ? text.size() : nl + 1;
  }
  if (cut > 0) {
    if (!out.empty() && out.back() != '\n') out += "\n";
    out += "... (" + std::to_string(cut) + " bytes cut)\n";
  }
  return out;
}

void Bundle::put(const std::string& name, const tiny::Tensor& tensor) {
  TensorInfo info;
  info.defined = tensor.defined();
  if (info.defined) {
    info.device = tensor.device().str();
    info.dtype = tiny::dtype_name(tensor.dtype());
    info.shape = tensor.sizes();
    info.requires_grad = tensor.requires_grad();
    info.is_pinned = tensor.device().is_cpu() && tensor.is_pinned();
    tensors_[name] = tensor.detach();  // copied to the CPU by save(), after the runner read the counters
  } else {
    tensors_.erase(name);
  }
  if (infos_.count(name) == 0) order_.push_back(name);
  infos_[name] = info;
}

void Bundle::put_state(const std::string& prefix, const tiny::StateDict& state) {
  for (const auto& [key, value] : state) put(prefix + "." + key, value);
}

const TensorInfo& Bundle::info(const std::string& name) const {
  auto it = infos_.find(name);
  TINY_CHECK(it != infos_.end(), IndexError, "no tensor named '", name, "' in this exchange");
  return it->second;
}

tiny::Tensor Bundle::tensor(const std::string& name) const {
  const TensorInfo& i = info(name);
  TINY_CHECK(i.defined, ValueError, "the tensor '", name, "' is undefined (an empty tiny::Tensor)");
  return tensors_.at(name).cpu().contiguous();
}

tiny::StateDict Bundle::state(const std::string& prefix) const {
  tiny::StateDict out;
  const std::string start = prefix + ".";
  for (const std::string& name : order_) {
    if (name.rfind(start, 0) == 0 && infos_.at(name).defined) out.insert(name.substr(start.size()), tensor(name));
  }
  return out;
}

std::string Bundle::save_tensors(const fs::path& dir) const {
  fs::create_directories(dir);
  nlohmann::json doc = values;
  nlohmann::json list = nlohmann::json::array();
  for (size_t k = 0; k < order_.size(); ++k) {
    const std::string& name = order_[k];
    const TensorInfo& i = infos_.at(name);
    nlohmann::json entry = {{"name", name}, {"defined", i.defined}};
    if (i.defined) {
      const std::string file = "t" + std::to_string(k) + ".npy";
      tiny::io::save_npy((dir / file).string(), tensor(name));
      entry.update({{"file", file}, {"digest", digest_of(dir / file)}, {"device", i.device}, {"dtype", i.dtype},
                    {"shape", i.shape}, {"requires_grad", i.requires_grad}, {"is_pinned", i.is_pinned}});
    }
    list.push_back(entry);
  }
  doc["_tensors"] = list;
  return doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void Bundle::save(const fs::path& dir) const {
  const std::string text = save_tensors(dir);
  const fs::path tmp = dir / "values.json.tmp";
  {
    std::ofstream out(tmp);
    out << text;
    TINY_CHECK(out.good(), IOError, "could not write ", tmp.string());
  }
  fs::rename(tmp, dir / "values.json");
}

Bundle Bundle::load(const fs::path& dir) {
  const fs::path path = dir / "values.json";
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  TINY_CHECK(!ec && fs::exists(st), IOError, "no ", path.string(), ": the program did not write its results");
  TINY_CHECK(fs::is_regular_file(st), IOError, path.string(), " is not a plain file");
  const uintmax_t size = fs::file_size(path, ec);
  TINY_CHECK(!ec && size <= kMaxExchangeBytes, IOError, path.string(), " is ", bytes_text(static_cast<size_t>(size)),
             ", more than the ", bytes_text(kMaxExchangeBytes), " the grader reads");
  std::ifstream in(path, std::ios::binary);
  TINY_CHECK(in.good(), IOError, "cannot read ", path.string());
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return parse(dir, text, path.string());
}

Bundle Bundle::parse(const fs::path& dir, const std::string& text, const std::string& source) {
  const std::string path = source;  // how messages name the text
  if (const std::string problem = exchange_limits_problem(text); !problem.empty()) {
    TINY_THROW(IOError, path, " ", problem);
  }
  Bundle b;
  try {
    b.values = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    TINY_THROW(IOError, path, " is not valid JSON (", e.what(), ")");
  }
  TINY_CHECK(b.values.is_object(), IOError, path, " does not hold a JSON object");
  const nlohmann::json list = b.values.value("_tensors", nlohmann::json::array());
  b.values.erase("_tensors");
  std::set<std::string> files;
  try {
    for (const auto& entry : list) {
      const std::string name = entry.at("name");
      TINY_CHECK(b.infos_.count(name) == 0, IOError, path, " lists the tensor '", name, "' twice");
      TensorInfo i;
      i.defined = entry.at("defined");
      if (i.defined) {
        i.device = entry.at("device");
        i.dtype = entry.at("dtype");
        // Integers only: converting a JSON float such as 1e300 to int64_t is undefined behaviour.
        for (const auto& d : entry.at("shape")) {
          TINY_CHECK(d.is_number_integer() && d.get<int64_t>() >= 0, IOError, path, ": the shape of '",
                     name, "' must list non-negative integers, got ", d.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
          i.shape.push_back(d.get<int64_t>());
        }
        i.requires_grad = entry.at("requires_grad");
        i.is_pinned = entry.at("is_pinned");
        // A plain file name inside the folder: never a path out of it, a device or a FIFO (which would hang).
        const std::string file = entry.at("file");
        std::error_code ec;
        TINY_CHECK(!file.empty() && file != "." && file != ".." && file.find('/') == std::string::npos &&
                       fs::is_regular_file(fs::symlink_status(dir / file, ec)),
                   IOError, path, ": the file of the tensor '", name,
                   "' must be a .npy file inside the folder, got '", file, "'");
        // Each file once: a list naming one large file a million times would load it a million times.
        TINY_CHECK(files.insert(file).second, IOError, path, " lists the file '", file, "' twice");
        if (entry.contains("digest")) {
          TINY_CHECK(entry.at("digest").is_string() && entry.at("digest").get<std::string>() == digest_of(dir / file),
                     IOError, path, ": ", file, " (the tensor '", name,
                     "') was changed after the runner wrote it");
        }
        b.tensors_[name] = tiny::io::load_npy((dir / file).string());
        TINY_CHECK(b.tensors_[name].sizes() == i.shape, IOError, path, ": the tensor '", name,
                   "' is recorded with shape ", tiny::shape_str(i.shape), " but ", file, " holds shape ",
                   tiny::shape_str(b.tensors_[name].sizes()));
      }
      b.order_.push_back(name);
      b.infos_[name] = i;
    }
  } catch (const nlohmann::json::exception& e) {
    TINY_THROW(IOError, path, " lists its tensors wrongly (", e.what(), ")");
  }
  return b;
}

}  // namespace workbook
