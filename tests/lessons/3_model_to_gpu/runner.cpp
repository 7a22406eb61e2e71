// Lesson 3's glue: rebuilds the models of the checker's inputs, calls each
// exercise, and writes down where every tensor ended up and what came out.
#include <filesystem>
#include <map>

#include <optional>

#include "exercise.h"
#include "harness/runner.h"
#include "net.h"

namespace {

using lesson3_checks::Net;

// A module made of nothing but tensors placed where the checker asked
// (the glue of left_behind): entries named "a.b.c" create the children "a" and "a.b".
struct Holder : tiny::nn::Module {
  std::string name() const override { return "Holder"; }
  std::map<std::string, std::shared_ptr<Holder>> kids;
};

void place(Holder& root, const std::string& dotted, const std::string& kind, const tiny::Device& device) {
  Holder* at = &root;
  std::string rest = dotted;
  for (size_t dot = rest.find('.'); dot != std::string::npos; dot = rest.find('.')) {
    const std::string child = rest.substr(0, dot);
    auto it = at->kids.find(child);
    if (it == at->kids.end()) it = at->kids.emplace(child, at->register_module(child, std::make_shared<Holder>())).first;
    at = it->second.get();
    rest = rest.substr(dot + 1);
  }
  const tiny::Tensor t = tiny::zeros({2}, device);
  if (kind == "parameter") {
    at->register_parameter(rest, t);
  } else {
    at->register_buffer(rest, t, kind == "buffer");  // "buffer_np": a non-persistent buffer
  }
}

// name -> device of every parameter and buffer.
nlohmann::json devices_of(const tiny::nn::Module& model) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, t] : model.named_parameters()) out[name] = t.device().str();
  for (const auto& [name, t] : model.named_buffers()) out[name] = t.device().str();
  return out;
}

nlohmann::json names_of(const std::vector<std::pair<std::string, tiny::Tensor>>& named) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

std::shared_ptr<Net> net_from(const workbook::Bundle& in, const tiny::Device& device) {
  auto net = std::make_shared<Net>();
  net->load_state_dict(in.state("model"));
  net->to(device);
  return net;
}

}  // namespace

WORKBOOK_EXERCISE(left_behind) {
  nlohmann::json answers = nlohmann::json::array();
  for (const auto& c : in.values.at("cases")) {
    Holder model;
    for (const auto& e : c.at("entries")) {
      place(model, e.at("name").get<std::string>(), e.at("kind").get<std::string>(),
            tiny::Device(e.at("device").get<std::string>()));
    }
    answers.push_back(lesson3::left_behind(model, tiny::Device(c.at("device").get<std::string>())));
  }
  out.values["answers"] = answers;
}

WORKBOOK_EXERCISE(normalizer) {
  const tiny::Device device(in.values.at("device").get<std::string>());
  lesson3::Normalizer norm(in.tensor("mean").clone(), in.tensor("stddev").clone());
  out.values["parameters"] = names_of(norm.named_parameters());
  out.values["buffers"] = names_of(norm.named_buffers());
  out.values["state_keys"] = names_of(norm.state_dict().items());
  norm.to(device);
  out.values["buffer_devices"] = devices_of(norm);
  out.values["member_devices"] = {{"mean", norm.mean.defined() ? norm.mean.device().str() : "undefined"},
                                  {"stddev", norm.stddev.defined() ? norm.stddev.device().str() : "undefined"}};
  out.put("y", norm(in.tensor("x").to(device)));
}

WORKBOOK_EXERCISE(positional_offset) {
  const auto& cases = in.values.at("cases");
  for (size_t i = 0; i < cases.size(); ++i) {
    const tiny::Device device(cases[i].at("device").get<std::string>());
    lesson3::PositionalOffset offset(cases[i].at("scale").get<double>());
    offset.to(device);
    out.values["done"] = i;  // cases before this one ran
    out.put("y" + std::to_string(i), offset(in.tensor("x" + std::to_string(i)).to(device)));
  }
  out.values["done"] = cases.size();
}

WORKBOOK_EXERCISE(predict) {
  const tiny::Device device(in.values.at("device").get<std::string>());
  auto net = net_from(in, device);
  const tiny::Tensor x = in.tensor("x");
  // What predict() alone asked of the GPU (the model's move above left out): its waits and launches.
  // On the emulated GPU, the call is profiled too: the grader's report draws its GPU timeline beside the reference's.
  std::optional<tiny::profiler::profile> prof;
  if (device.is_cuda() && tiny::cuda::is_emulated(device.index())) prof.emplace();
  const tiny::cuda::DeviceCounters before = tiny::cuda::device_counters(device.index());
  const tiny::Tensor y = lesson3::predict(*net, x);
  // Whether the model's GPU still had work queued when the outputs were handed
  // back (a non_blocking copy back nobody waited for): in deferred mode it has not run.
  out.values["idle"] = !device.is_cuda() || tiny::cuda::current_stream(device.index()).query();
  const tiny::cuda::DeviceCounters after = tiny::cuda::device_counters(device.index());
  if (prof) {
    prof->stop();
    out.values["trace"] = nlohmann::json::parse(prof->chrome_trace());
  }
  out.values["predict_waits"] = after.synchronizations - before.synchronizations;
  out.values["predict_launches"] = after.kernel_launches - before.kernel_launches;
  out.values["model_devices"] = devices_of(*net);
  out.values["input_device"] = x.device().str();
  out.put("y", y);
}

WORKBOOK_EXERCISE(save_checkpoint) {
  const tiny::Device device(in.values.at("device").get<std::string>());
  const std::string path = in.values.at("path");
  std::filesystem::remove(path);
  auto net = net_from(in, device);
  lesson3::save_checkpoint(*net, path);
  out.values["model_devices"] = devices_of(*net);
  out.values["file_written"] = std::filesystem::exists(path);
  if (!std::filesystem::exists(path)) return;
  const tiny::StateDict file = tiny::load(path);
  out.values["file_keys"] = names_of(file.items());
  out.put_state("file", file);
}

WORKBOOK_EXERCISE(load_checkpoint) {
  const tiny::Device start(in.values.at("start_device").get<std::string>());
  const tiny::Device device(in.values.at("device").get<std::string>());
  const std::string path = in.values.at("path");
  tiny::save(in.state("checkpoint"), path);  // the file, as save_checkpoint writes it
  auto net = std::make_shared<Net>();         // a fresh model: its own random weights
  net->to(start);
  lesson3::load_checkpoint(*net, path, device);
  out.values["model_devices"] = devices_of(*net);
  out.put_state("model", net->state_dict());
}
