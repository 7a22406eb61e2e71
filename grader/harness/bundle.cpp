#include "bundle.h"

#include <fstream>
#include <sstream>

namespace workbook {

namespace fs = std::filesystem;

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

void Bundle::save(const fs::path& dir) const {
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
      entry.update({{"file", file}, {"device", i.device}, {"dtype", i.dtype}, {"shape", i.shape},
                    {"requires_grad", i.requires_grad}, {"is_pinned", i.is_pinned}});
    }
    list.push_back(entry);
  }
  doc["_tensors"] = list;
  const fs::path tmp = dir / "values.json.tmp";
  {
    std::ofstream out(tmp);
    out << doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    TINY_CHECK(out.good(), IOError, "could not write ", tmp.string());
  }
  fs::rename(tmp, dir / "values.json");
}

Bundle Bundle::load(const fs::path& dir) {
  const fs::path path = dir / "values.json";
  std::ifstream in(path);
  TINY_CHECK(in.good(), IOError, "no ", path.string(), ": the program did not write its results");
  Bundle b;
  try {
    b.values = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    TINY_THROW(IOError, path.string(), " is not valid JSON (", e.what(), ")");
  }
  TINY_CHECK(b.values.is_object(), IOError, path.string(), " does not hold a JSON object");
  const nlohmann::json list = b.values.value("_tensors", nlohmann::json::array());
  b.values.erase("_tensors");
  try {
    for (const auto& entry : list) {
      const std::string name = entry.at("name");
      TINY_CHECK(b.infos_.count(name) == 0, IOError, path.string(), " lists the tensor '", name, "' twice");
      TensorInfo i;
      i.defined = entry.at("defined");
      if (i.defined) {
        i.device = entry.at("device");
        i.dtype = entry.at("dtype");
        // Integers only: converting a JSON float such as 1e300 to int64_t is undefined behaviour.
        for (const auto& d : entry.at("shape")) {
          TINY_CHECK(d.is_number_integer() && d.get<int64_t>() >= 0, IOError, path.string(), ": the shape of '",
                     name, "' must list non-negative integers, got ", d.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
          i.shape.push_back(d.get<int64_t>());
        }
        i.requires_grad = entry.at("requires_grad");
        i.is_pinned = entry.at("is_pinned");
        // A plain file name inside the folder: never a path out of it, a device or a FIFO (which would hang).
        const std::string file = entry.at("file");
        TINY_CHECK(!file.empty() && file != "." && file != ".." && file.find('/') == std::string::npos &&
                       fs::is_regular_file(dir / file),
                   IOError, path.string(), ": the file of the tensor '", name,
                   "' must be a .npy file inside the folder, got '", file, "'");
        b.tensors_[name] = tiny::io::load_npy((dir / file).string());
        TINY_CHECK(b.tensors_[name].sizes() == i.shape, IOError, path.string(), ": the tensor '", name,
                   "' is recorded with shape ", tiny::shape_str(i.shape), " but ", file, " holds shape ",
                   tiny::shape_str(b.tensors_[name].sizes()));
      }
      b.order_.push_back(name);
      b.infos_[name] = i;
    }
  } catch (const nlohmann::json::exception& e) {
    TINY_THROW(IOError, path.string(), " lists its tensors wrongly (", e.what(), ")");
  }
  return b;
}

}  // namespace workbook
