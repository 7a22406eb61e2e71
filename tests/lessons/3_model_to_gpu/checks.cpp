// Lesson 3's checks: models built from the checker's state are moved between
// the CPU and two emulated GPUs, and every parameter, buffer, input and output
// must end up where it belongs, with the reference's values.
#include <algorithm>
#include <set>

#include "harness/checker.h"
#include "harness/compare.h"
#include "net.h"

using workbook::Bundle;
using workbook::Context;
using workbook::Outcome;
using workbook::Run;
using workbook::RunOptions;

WORKBOOK_LESSON(3, "3_model_to_gpu");

namespace {

using Names = std::vector<std::string>;

std::string list_text(const Names& names) {
  std::string s = "[";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s + "]";
}

Names sorted(Names names) {
  std::sort(names.begin(), names.end());
  return names;
}

Names names_in(const nlohmann::json& list) {
  Names out;
  for (const auto& v : list) out.push_back(v.get<std::string>());
  return out;
}

bool contains(const Names& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The names whose device in a {name: device} map is not `device`.
Names not_on(const nlohmann::json& devices, const std::string& device) {
  Names out;
  for (const auto& [name, d] : devices.items()) {
    if (d.get<std::string>() != device) out.push_back(name + " (on " + d.get<std::string>() + ")");
  }
  return out;
}

// Runs the reference after a student's run that returned normally.
std::optional<Outcome> reference_run(Context& ctx, const std::string& exercise, const Bundle& in, Run& ref) {
  ref = ctx.reference(exercise, in);
  if (ref.ok()) return std::nullopt;
  return Outcome::error("the reference solution failed on these inputs (a bug in the workbook, not in your code: "
                        "please report it with the seed)\n  " + ref.message);
}

bool mixed_devices(const Run& run) {
  return run.status == "error" && run.message.find("Expected all tensors to be on the same device") != std::string::npos;
}

// A random state for lesson3_checks::Net: weights, biases, and statistics (stddev > 0).
tiny::StateDict random_net_state(const Context& ctx, uint64_t stream) {
  tiny::Generator gen = ctx.generator(stream);
  lesson3_checks::Net net;
  tiny::StateDict state;
  for (const auto& [name, t] : net.state_dict()) {
    tiny::Tensor value = tiny::randn(t.sizes(), {}, gen);
    if (name == "stddev") value = tiny::rand(t.sizes(), {}, gen) + 0.5;
    state.insert(name, value);
  }
  return state;
}

// ---- left_behind ------------------------------------------------------------

struct Entry {
  std::string name, kind, device;  // kind: parameter, buffer, buffer_np (not persistent)
};
struct PlacementCase {
  std::string device;
  std::vector<Entry> entries;
};

const std::vector<PlacementCase>& placement_cases() {
  static const std::vector<PlacementCase> cases = {
      {"cuda:0",
       {{"fc1.weight", "parameter", "cuda:0"}, {"fc1.bias", "parameter", "cuda:0"},
        {"norm.mean", "buffer", "cuda:0"}, {"norm.stddev", "buffer", "cpu"}}},
      {"cuda:0", {{"weight", "parameter", "cuda:0"}, {"bias", "parameter", "cpu"}, {"running_mean", "buffer", "cuda:0"}}},
      {"cuda:0",
       {{"fc.weight", "parameter", "cuda:0"}, {"fc.bias", "parameter", "cuda:0"}, {"pe.mask", "buffer_np", "cuda:0"},
        {"pe.scale", "buffer", "cuda:0"}}},
      {"cuda:0", {{"layer.weight", "parameter", "cuda:1"}, {"layer.bias", "parameter", "cuda:0"}}},
      {"cuda:0",
       {{"fc.weight", "parameter", "cuda:0"}, {"pe.mask", "buffer_np", "cpu"}, {"pe.scale", "buffer", "cuda:0"}}},
      {"cpu",
       {{"a.weight", "parameter", "cuda:0"}, {"a.bias", "parameter", "cpu"}, {"stats", "buffer", "cuda:1"}}},
  };
  return cases;
}

// What left_behind returns for `c` when it looks only at the entries `counted` accepts,
// and calls a tensor on `device` when `same` says so.
template <class Counted, class Same>
Names predicted(const PlacementCase& c, Counted counted, Same same) {
  Names out;
  for (const Entry& e : c.entries) {
    if (counted(e) && !same(e.device, c.device)) out.push_back(e.name);
  }
  return sorted(out);
}

std::string describe(const PlacementCase& c) {
  std::string s = "a model with";
  for (size_t i = 0; i < c.entries.size(); ++i) {
    const Entry& e = c.entries[i];
    const std::string kind = e.kind == "parameter" ? "parameter" : e.kind == "buffer" ? "buffer" : "non-persistent buffer";
    s += (i ? ", " : " ") + e.name + " (" + kind + " on " + e.device + ")";
  }
  return s;
}

}  // namespace

WORKBOOK_CHECK(left_behind, "left_behind() finds every parameter and buffer that is not on the device") {
  Bundle in;
  in.values["cases"] = nlohmann::json::array();
  for (const PlacementCase& c : placement_cases()) {
    nlohmann::json entries = nlohmann::json::array();
    for (const Entry& e : c.entries) entries.push_back({{"name", e.name}, {"kind", e.kind}, {"device", e.device}});
    in.values["cases"].push_back({{"device", c.device}, {"entries", entries}});
  }
  Run mine, ref;
  if (auto early = ctx.both("left_behind", in, mine, ref)) return *early;

  auto all = [](const Entry&) { return true; };
  auto exact = [](const std::string& a, const std::string& b) { return a == b; };
  std::vector<Names> got, want, params_only, persistent_only, kind_only;
  for (size_t i = 0; i < placement_cases().size(); ++i) {
    const PlacementCase& c = placement_cases()[i];
    got.push_back(sorted(names_in(mine.out.values["answers"][i])));
    want.push_back(sorted(names_in(ref.out.values["answers"][i])));
    params_only.push_back(predicted(c, [](const Entry& e) { return e.kind == "parameter"; }, exact));
    persistent_only.push_back(predicted(c, [](const Entry& e) { return e.kind != "buffer_np"; }, exact));
    kind_only.push_back(predicted(c, all, [](const std::string& a, const std::string& b) {
      return (a == "cpu") == (b == "cpu");
    }));
  }
  if (got == want) return Outcome::pass();
  if (got == params_only) {
    return Outcome::fail("left_behind() only looks at the parameters: on " + describe(placement_cases()[0]) +
                         " it returned " + list_text(got[0]) + ", but the buffer norm.stddev is still on cpu too. "
                         "Buffers (running statistics, masks) move with .to() and forward() uses them: walk "
                         "model.named_buffers() as well as model.named_parameters()");
  }
  if (got == persistent_only) {
    return Outcome::fail("left_behind() misses non-persistent buffers: on " + describe(placement_cases()[4]) +
                         " it returned " + list_text(got[4]) + ", but pe.mask is on cpu. state_dict() leaves "
                         "non-persistent buffers out (they are not saved), yet .to() moves them and forward() uses "
                         "them: walk model.named_parameters() and model.named_buffers(), not state_dict()");
  }
  if (got == kind_only) {
    return Outcome::fail("left_behind() takes a tensor on cuda:1 to be on cuda:0: on " + describe(placement_cases()[3]) +
                         " it returned " + list_text(got[3]) + ", expected " + list_text(want[3]) +
                         ". Two GPUs are two separate memories: compare the whole device (tensor.device() != device), "
                         "not just whether it is a GPU");
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      return Outcome::fail("left_behind(model, " + placement_cases()[i].device + ") on " +
                           describe(placement_cases()[i]) + " returned " + list_text(got[i]) + ", expected " +
                           list_text(want[i]));
    }
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(normalizer_buffers, "Normalizer registers mean and stddev as buffers, so .to() moves them") {
  tiny::Generator gen = ctx.generator(1);
  Bundle in;
  in.values["device"] = "cuda:0";
  in.put("mean", tiny::randn({lesson3_checks::kIn}, {}, gen));
  in.put("stddev", tiny::rand({lesson3_checks::kIn}, {}, gen) + 0.5);
  in.put("x", tiny::randn({4, lesson3_checks::kIn}, {}, gen));

  Run mine = ctx.student("normalizer", in);
  if (mine.status == "todo") return Outcome::todo(mine.message);
  const nlohmann::json& v = mine.out.values;
  if (v.contains("buffers")) {  // the constructor returned: look at what it registered
    const Names parameters = names_in(v["parameters"]), buffers = names_in(v["buffers"]);
    const Names state_keys = names_in(v["state_keys"]);
    if (contains(parameters, "mean") || contains(parameters, "stddev")) {
      return Outcome::fail("Normalizer registers its statistics as parameters (named_parameters() is " +
                           list_text(parameters) + "): the optimizer would train them and they would get "
                           "gradients. Fixed statistics are buffers: register_buffer(\"mean\", mean)");
    }
    if (!contains(buffers, "mean") && !contains(buffers, "stddev") && v["member_devices"]["mean"] == "cpu") {
      return Outcome::fail("Normalizer::mean is a plain member, not a buffer: named_buffers() is " +
                           list_text(buffers) + ", so norm.to(cuda:0) did not move it and it is still on cpu "
                           "(forward() then mixes devices). Register it: this->mean = register_buffer(\"mean\", mean); "
                           "the same for stddev");
    }
    for (const char* name : {"mean", "stddev"}) {
      if (contains(buffers, name) && v["member_devices"].value(name, "") == "undefined") {
        const std::string n = name;
        return Outcome::fail("\"" + n + "\" is registered, but the member Normalizer::" + n + " is still an empty "
                             "tiny::Tensor, so forward() cannot use it: keep the handle register_buffer returns: "
                             "this->" + n + " = register_buffer(\"" + n + "\", " + n + ")");
      }
    }
    if (sorted(buffers) == Names{"mean", "stddev"} && sorted(state_keys) != Names{"mean", "stddev"}) {
      return Outcome::fail("mean and stddev are buffers, but state_dict() holds only " + list_text(state_keys) +
                           ": they were registered with persistent=false, so a checkpoint would lose them and a "
                           "loaded model would normalise with the wrong statistics. Leave persistent at its default (true)");
    }
    if (sorted(buffers) != Names{"mean", "stddev"}) {
      return Outcome::fail("Normalizer's named_buffers() is " + list_text(buffers) + ", expected [mean, stddev]");
    }
  }
  if (auto early = ctx.unless_ok(mine)) return *early;
  Run ref;
  if (auto early = reference_run(ctx, "normalizer", in, ref)) return *early;
  const Names stuck = not_on(v["buffer_devices"], "cuda:0");
  if (!stuck.empty()) return Outcome::fail("after norm.to(cuda:0), these are elsewhere: " + list_text(stuck));
  if (auto why = workbook::differ("Normalizer(mean, stddev)(x)", mine.out, ref.out, "y")) return Outcome::fail(*why);
  return Outcome::pass();
}

WORKBOOK_CHECK(positional_offset, "PositionalOffset makes its positions on x's device, with x's dtype") {
  tiny::Generator gen = ctx.generator(2);
  struct Case {
    const char* device;
    tiny::Dtype dtype;
    int64_t batch, length;
  };
  const std::vector<Case> cases = {{"cpu", tiny::kFloat32, 3, 6}, {"cuda:0", tiny::kFloat64, 2, 9},
                                   {"cuda:1", tiny::kFloat32, 4, 5}};
  Bundle in;
  in.values["cases"] = nlohmann::json::array();
  std::vector<tiny::Tensor> xs;
  std::vector<double> scales;
  for (size_t i = 0; i < cases.size(); ++i) {
    // A scale that float32 cannot hold exactly, so positions made in float32 show in a float64 result.
    const double scale = 0.25 + tiny::rand({1}, tiny::kFloat64, gen).item<double>() / 3.0;
    xs.push_back(tiny::randn({cases[i].batch, cases[i].length}, cases[i].dtype, gen));
    scales.push_back(scale);
    in.values["cases"].push_back({{"device", cases[i].device}, {"scale", scale}});
    in.put("x" + std::to_string(i), xs.back());
  }

  Run mine = ctx.student("positional_offset", in);
  if (mixed_devices(mine)) {
    const int i = mine.out.values.value("done", 0);
    return Outcome::fail(std::string("with x on ") + cases[i].device +
                         ", forward() mixed devices: it makes its positions somewhere else than x, and .to() could "
                         "not move them because they are made fresh in forward(). Create them where x is: "
                         "tiny::arange(n, tiny::TensorOptions(x.device()).dtype(x.dtype())). The error was:\n  " +
                         mine.message);
  }
  if (auto early = ctx.unless_ok(mine)) return *early;
  Run ref;
  if (auto early = reference_run(ctx, "positional_offset", in, ref)) return *early;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string name = "y" + std::to_string(i);
    const std::string what = std::string("PositionalOffset(") + std::to_string(scales[i]) + ")(x) with x " +
                             tiny::dtype_name(cases[i].dtype) + " on " + cases[i].device;
    const bool exact = cases[i].dtype == tiny::kFloat64;
    auto why = workbook::differ(what, mine.out, ref.out, name, exact ? 1e-13 : 1e-5, exact ? 1e-13 : 1e-6);
    if (!why) continue;
    if (exact && mine.out.has(name) && mine.out.info(name).dtype == "float64") {
      // The probe: positions made in float32 (the default dtype) give exactly this.
      const tiny::Tensor f32 = xs[i] + tiny::arange(cases[i].length, tiny::kFloat32) * scales[i];
      if (!workbook::differ(what, mine.out.tensor(name), f32, 1e-15, 0)) {
        return Outcome::fail(what + ": the positions were made in float32 (the default dtype) while x is float64, "
                             "so scale * i was rounded to float32 before being added (the values are off by about "
                             "1e-8). Create them with x's dtype as well as its device: "
                             "tiny::TensorOptions(x.device()).dtype(x.dtype())");
      }
    }
    return Outcome::fail(*why);
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(predict, "predict() moves the inputs to the model's device and returns CPU outputs, model left in place") {
  tiny::Generator gen = ctx.generator(3);
  Bundle in;
  in.put_state("model", random_net_state(ctx, 4));
  in.put("x", tiny::randn({6, lesson3_checks::kIn}, {}, gen));
  for (const char* device : {"cuda:0", "cuda:1"}) {
    in.values["device"] = device;
    const std::string call = std::string("predict(model on ") + device + ", inputs on cpu)";
    // Deferred mode: queued GPU work runs only when the host waits, so outputs copied back
    // with non_blocking and never waited for are unwritten every time, not now and then.
    RunOptions deferred;
    deferred.mode = "deferred";
    Run mine = ctx.student("predict", in, deferred);
    if (mixed_devices(mine) && mine.message.find("cpu") != std::string::npos) {
      return Outcome::fail(call + " mixed devices: the inputs are still on cpu while the model is on " + device +
                           ". Move the inputs to the model's device (the device of its first parameter) with "
                           "inputs.to(device) before calling the model. The error was:\n  " + mine.message);
    }
    if (mixed_devices(mine)) {
      return Outcome::fail(call + " mixed devices: the model is on " + device +
                           ", so take the device from the model's parameters, not a fixed GPU. The error was:\n  " +
                           mine.message);
    }
    if (auto early = ctx.unless_ok(mine)) return *early;
    const Names moved = not_on(mine.out.values["model_devices"], device);
    if (!moved.empty()) {
      const bool to_cpu = not_on(mine.out.values["model_devices"], "cpu").empty();
      return Outcome::fail(call + " moved the caller's model: " + list_text(moved) + " afterwards." +
                           (to_cpu ? " Moving the model to the inputs' device works once, but it leaves the caller "
                                     "training on the CPU without knowing it. Move the inputs to the model instead: "
                                     "inputs.to(device)"
                                   : ""));
    }
    Run ref;
    if (auto early = reference_run(ctx, "predict", in, ref)) return *early;
    if (!ctx.details.contains("timelines") && mine.out.values.contains("trace") && ref.out.values.contains("trace")) {
      // The report's two GPU timelines (cuda:0's call): a row at a time shows as a wait per row.
      ctx.details["timelines"] = {{"yours", mine.out.values["trace"]}, {"reference", ref.out.values["trace"]}};
    }
    const workbook::TensorInfo& y = mine.out.info("y");
    if (y.defined && y.device != "cpu") {
      return Outcome::fail(call + " returned outputs on " + y.device + ": return them on the CPU with .cpu(), "
                           "ready to print or save");
    }
    if (y.defined && !mine.out.values.value("idle", true)) {
      return Outcome::fail(call + " returned while " + device + " still had work queued: the outputs' copy back to "
                           "the CPU had not run, so the caller would read memory the GPU had not written yet (a "
                           "non_blocking copy returns at once; in this check's deferred mode nothing queued runs "
                           "until someone waits, on a real GPU it is a race you lose now and then). Return them "
                           "with .cpu(), which waits");
    }
    if (y.defined && y.requires_grad) {
      return Outcome::fail(call + " returned outputs that require grad: a graph was recorded for nothing. Run the "
                           "model inside a scope with a tiny::NoGradGuard (PyTorch: with torch.no_grad())");
    }
    if (auto why = workbook::differ(call, mine.out, ref.out, "y")) return Outcome::fail(*why);
    // Right numbers, and the speed to go with them: one copy in, one forward, one wait for the answer.
    // Counted on the GPU (the same on every run), so a slow predict fails here, not by chance. One extra
    // wait (a synchronize "to be safe") is let pass: it costs one wait, not one per row.
    const uint64_t waits = mine.out.values.value("predict_waits", uint64_t{0}),
                   ref_waits = ref.out.values.value("predict_waits", uint64_t{0}),
                   launches = mine.out.values.value("predict_launches", uint64_t{0}),
                   ref_launches = ref.out.values.value("predict_launches", uint64_t{0});
    if (waits > ref_waits + 1) {
      const int64_t rows = in.tensor("x").size(0);
      return Outcome::fail(call + " gave the right outputs, but made the host wait for the GPU " +
                           std::to_string(waits) + " times and queued " + std::to_string(launches) +
                           " GPU operations, where the reference waits " + std::to_string(ref_waits) +
                           " time(s) and queues " + std::to_string(ref_launches) + " for the same " +
                           std::to_string(rows) + " rows" +
                           (waits >= static_cast<uint64_t>(rows) ? ": a .cpu() (or .item()) per row" : "") +
                           ". Every .cpu() waits for the GPU, and a row at a time pays the launches of a whole "
                           "forward per row: move the whole batch in one .to(device), run the model once, and "
                           "copy the outputs back once");
    }
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(save_checkpoint, "save_checkpoint() writes every parameter and buffer of a GPU model to the file") {
  const tiny::StateDict state = random_net_state(ctx, 5);
  Bundle in;
  in.put_state("model", state);
  in.values["device"] = "cuda:0";
  in.values["path"] = (ctx.work_dir / "lesson3_save.safetensors").string();
  Run mine = ctx.student("save_checkpoint", in);
  if (auto early = ctx.unless_ok(mine)) return *early;
  const nlohmann::json& v = mine.out.values;
  const Names moved = not_on(v["model_devices"], "cuda:0");
  if (!moved.empty()) {
    return Outcome::fail("save_checkpoint() moved the model: " + list_text(moved) + " afterwards. The caller's model "
                         "must stay on its GPU; tiny::save copies GPU tensors to the CPU by itself");
  }
  if (!v.value("file_written", false)) {
    return Outcome::fail("save_checkpoint(model, path) wrote no file at " + in.values["path"].get<std::string>());
  }
  Names expected;
  for (const auto& [key, t] : state) expected.push_back(key);
  const Names keys = names_in(v["file_keys"]);
  if (sorted(keys) != sorted(expected)) {
    Names missing;
    for (const std::string& k : expected) {
      if (!contains(keys, k)) missing.push_back(k);
    }
    if (sorted(missing) == Names{"mean", "stddev"} && keys.size() + 2 == expected.size()) {
      return Outcome::fail("the checkpoint holds only the parameters " + list_text(keys) + ": the buffers mean and "
                           "stddev are missing, so a model loaded from it would normalise with the wrong statistics "
                           "(and a strict load fails). Save model.state_dict(): it holds the parameters and the "
                           "persistent buffers");
    }
    return Outcome::fail("the checkpoint holds " + list_text(keys) + ", expected " + list_text(expected));
  }
  for (const auto& [key, t] : state) {
    if (auto why = workbook::differ("the checkpoint's " + key, mine.out.tensor("file." + key), t)) {
      return Outcome::fail(*why);
    }
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(load_checkpoint, "load_checkpoint() restores the values and leaves the whole model on the device") {
  const tiny::StateDict state = random_net_state(ctx, 6);
  struct Case {
    const char* start;
    const char* device;
  };
  for (const Case c : {Case{"cpu", "cuda:0"}, Case{"cuda:0", "cpu"}, Case{"cuda:1", "cuda:0"}}) {
    Bundle in;
    in.put_state("checkpoint", state);
    in.values["start_device"] = c.start;
    in.values["device"] = c.device;
    in.values["path"] = (ctx.work_dir / "lesson3_load.safetensors").string();
    const std::string call = std::string("load_checkpoint(model on ") + c.start + ", path, " + c.device + ")";
    Run mine = ctx.student("load_checkpoint", in);
    if (auto early = ctx.unless_ok(mine)) return *early;
    const nlohmann::json& devices = mine.out.values["model_devices"];
    const Names stuck = not_on(devices, c.device);
    if (!stuck.empty()) {
      if (not_on(devices, c.start).empty()) {
        return Outcome::fail(call + " left the model on " + c.start + ": loading copies the file's values into the "
                             "model's tensors wherever they are, it does not move them. Call model.to(device) as well");
      }
      return Outcome::fail(call + " left these tensors off " + c.device + ": " + list_text(stuck));
    }
    for (const auto& [key, t] : state) {
      if (auto why = workbook::differ(call + ": the model's " + key, mine.out.tensor("model." + key), t)) {
        return Outcome::fail(*why + "\n(the model must hold the checkpoint's values after loading)");
      }
    }
  }
  return Outcome::pass();
}
