// Lesson 1's checks: every exercise runs with 0, 1 and 2 emulated GPUs, with
// the student's code and the reference, and the answers must agree.
#include <optional>

#include "harness/checker.h"

using workbook::Bundle;
using workbook::Context;
using workbook::Outcome;
using workbook::Run;
using workbook::RunOptions;

WORKBOOK_LESSON(1, "1_device_check");

namespace {

std::string machine(int n) {
  return n == 0 ? "on a machine without a GPU" : "with " + std::to_string(n) + " GPU" + (n == 1 ? "" : "s");
}

// A machine: n emulated GPUs and, where current >= 0, the GPU made current
// first (tiny::cuda::set_device(current), torch.cuda.set_device).
struct Machine {
  int gpus;
  int current = -1;
  std::string text() const {
    return machine(gpus) + (current >= 0 ? ", cuda:" + std::to_string(current) + " current" : "");
  }
};

// n emulated GPUs; failures name the call and the machine.
RunOptions gpus(int n, const std::string& call = "") {
  RunOptions o;
  o.gpus = n;
  if (!call.empty()) o.call = call + " " + machine(n);
  return o;
}

Bundle on(const Machine& m, Bundle in = {}) {
  if (m.current >= 0) in.values["current_device"] = m.current;
  return in;
}

// The student's answer (`key`) on machine m, or why there is none.
std::optional<nlohmann::json> student_answer(Context& ctx, const std::string& exercise, const Bundle& in,
                                             const Machine& m, const std::string& key) {
  const Run run = ctx.student(exercise, on(m, in), gpus(m.gpus));
  if (!run.ok()) return std::nullopt;
  return run.out.values.value(key, nlohmann::json());
}

// Runs `exercise` on the same inputs on every machine and compares `key`. An
// answer that differs is named only when a probe confirms the mistake: it
// changes when another GPU is made current (tiny::cuda::current_device() where
// the number of GPUs was meant).
Outcome same_answer(Context& ctx, const std::string& exercise, const Bundle& in, const std::string& key,
                    const std::string& call) {
  for (const Machine m : {Machine{0}, Machine{1}, Machine{2}, Machine{2, 1}}) {
    Run mine, ref;
    if (auto early = ctx.both(exercise, on(m, in), mine, ref, gpus(m.gpus, call))) return *early;
    if (mine.out.values[key] == ref.out.values[key]) continue;
    std::string why = call + " " + m.text() + " returned " + mine.out.values[key].dump() + ", expected " +
                      ref.out.values[key].dump();
    const auto first = student_answer(ctx, exercise, in, Machine{2, 0}, key);
    const auto second = student_answer(ctx, exercise, in, Machine{2, 1}, key);
    if (first && second && *first != *second) {
      why += ". With 2 GPUs it returned " + first->dump() + " while cuda:0 was current and " + second->dump() +
             " while cuda:1 was: your answer follows tiny::cuda::current_device(), which says which GPU is "
             "selected (torch.cuda.current_device()), not how many there are; count them with "
             "tiny::cuda::device_count()";
    }
    return Outcome::fail(why);
  }
  return Outcome::pass();
}

}  // namespace

WORKBOOK_CHECK(count_devices, "count_devices() is right with 0, 1 and 2 GPUs") {
  return same_answer(ctx, "count_devices", Bundle{}, "count", "count_devices()");
}

WORKBOOK_CHECK(available_devices, "available_devices() lists every GPU, then the CPU") {
  return same_answer(ctx, "available_devices", Bundle{}, "devices", "available_devices()");
}

WORKBOOK_CHECK(choose_device, "choose_device() picks the GPU asked for; only \"auto\" falls back to the CPU") {
  const Machine machines[] = {Machine{0}, Machine{1}, Machine{2}, Machine{2, 1}};
  for (const Machine& m : machines) {
    for (const char* requested : {"cpu", "auto", "cuda", "cuda:0", "cuda:1"}) {
      const std::string r = requested;
      if (m.gpus == 0 && r != "cpu" && r != "auto") continue;  // errors there: see choose_device_errors
      if (r == "cuda:1" && m.gpus == 1) continue;
      Bundle in;
      in.values["requested"] = requested;
      const std::string call = "choose_device(\"" + r + "\")";
      Run mine, ref;
      if (auto early = ctx.both("choose_device", on(m, in), mine, ref, gpus(m.gpus, call))) {
        if (m.gpus == 0 && r == "auto" && mine.status == "error") {
          return Outcome::fail(call + " on a machine without a GPU threw " + mine.error_type + " (\"" + mine.message +
                               "\"): with no GPU, \"auto\" falls back to the CPU (look at count_devices() first)");
        }
        return *early;
      }
      const std::string got = mine.out.values["device"], want = ref.out.values["device"];
      if (got == want) continue;
      const std::string where = call + " " + m.text() + " returned " + got;
      if (r == "cpu") return Outcome::fail(where + ": \"cpu\" always means the CPU");
      if (m.gpus == 0) return Outcome::fail(where + ": with no GPU, \"auto\" falls back to the CPU");
      if ((r == "auto" || r == "cuda") && m.current == 1 && got == "cuda:0") {
        return Outcome::fail(where + ", expected " + want + ": \"" + r + "\" means the current GPU "
                             "(tiny::cuda::current_device(), which tiny::cuda::set_device(1) made cuda:1), as "
                             "torch.device(\"cuda\") does; the device tiny::Device(\"cuda\") parses has no index");
      }
      if ((r == "auto" || r == "cuda") && got == "cuda") {
        return Outcome::fail(where + ", expected " + want + ": a device without an index leaves the choice to "
                             "whoever uses it. choose_device says which GPU: the current one, "
                             "tiny::cuda::current_device() (PyTorch's torch.cuda.current_device(), which a bare "
                             "torch.device(\"cuda\") stands for)");
      }
      return Outcome::fail(where + ", expected " + want);
    }
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(choose_device_errors, "choose_device() refuses a GPU that is not there and text that is no device") {
  struct Case {
    const char* requested;
    int gpus;
    const char* error;  // the tiny::Error subclass the reference throws
  };
  for (const Case c : {Case{"cuda:3", 2, "DeviceError"}, Case{"cuda:1", 1, "DeviceError"}, Case{"gpu", 2, "ValueError"},
                       Case{"cuda:x", 0, "ValueError"}, Case{"cuda:99999999999", 2, "ValueError"},
                       Case{"cuda:1", 0, "DeviceError"}, Case{"cuda", 0, "DeviceError"}}) {
    Bundle in;
    in.values["requested"] = c.requested;
    const std::string call = std::string("choose_device(\"") + c.requested + "\") " + machine(c.gpus);
    const Run mine = ctx.student("choose_device", in, gpus(c.gpus));
    const std::string expected_type = std::string("tiny::") + c.error;
    const bool absurd_index = std::string(c.requested) == "cuda:99999999999";
    if (mine.status == "todo") return Outcome::todo(mine.message);
    if (mine.status == "crash") return Outcome::fail(call + ": your code " + mine.message);
    if (mine.status == "ok") {
      // value(), not a const operator[]: a run that forged its results may have sent no "device" at all.
      const std::string got = mine.out.values.value("device", std::string("nothing"));
      if (got == "cpu" && c.gpus > 0 && std::string(c.error) == "DeviceError") {
        return Outcome::fail(call + " returned cpu: a GPU index that does not exist is a mistake in the request, "
                             "not a reason to fall back; throw a tiny::DeviceError that names the GPUs there are");
      }
      if (got == "cpu" && c.gpus == 0) {
        return Outcome::fail(call + " returned cpu: the user asked for a GPU by name, and training on the CPU "
                             "instead would hide that there is none. Only \"auto\" falls back; throw a "
                             "tiny::DeviceError that says no GPU is available (and suggests auto or cpu)");
      }
      return Outcome::fail(call + " returned " + got + " instead of throwing a " + expected_type);
    }
    // It threw: the right error, with a message that helps the person who typed the request. An index too
    // long to be a GPU may be reported either way: tiny::Device("cuda:99999999999") throws a tiny::ValueError
    // (PyTorch: "Could not parse device index"), and "that GPU does not exist" is true too.
    const bool right_type = mine.error_type == expected_type || (absurd_index && mine.error_type == "tiny::DeviceError");
    if (!right_type) {
      std::string why = call + " threw " + mine.error_type + " (\"" + mine.message + "\"), but it should throw " +
                        expected_type;
      if (mine.error_type.rfind("std::", 0) == 0) {
        why += ": that exception came from inside your code (std::stoi?), not from a check of yours; "
               "let tiny::Device parse the text (it throws tiny::ValueError, as torch.device does)";
      } else if (c.gpus == 0 && std::string(c.error) == "DeviceError") {
        why += ": the text is a device, but there is no GPU here to give";
      } else {
        why += std::string(": ") + (std::string(c.error) == "DeviceError"
                                        ? "the text is a well-formed device, but that GPU does not exist here"
                                        : "the text is not a device at all");
      }
      return Outcome::fail(why);
    }
    if (mine.message.find(absurd_index ? "99999999999" : c.requested) == std::string::npos) {
      return Outcome::fail(call + " threw, but its message does not say what was asked for ('" + c.requested +
                           "'):\n  " + mine.message);
    }
    if (absurd_index) continue;
    const std::string last = "cuda:" + std::to_string(c.gpus - 1);
    if (std::string(c.error) == "DeviceError" && c.gpus > 0 && mine.message.find(last) == std::string::npos) {
      return Outcome::fail(call + " threw, but its message does not say which GPUs exist (" +
                           std::to_string(c.gpus) + ", cuda:0 to " + last + "):\n  " + mine.message);
    }
    if (std::string(c.error) == "DeviceError" && c.gpus == 0 && mine.message.find("auto") == std::string::npos &&
        mine.message.find("cpu") == std::string::npos) {
      return Outcome::fail(call + " threw, but its message does not say what to do instead (ask for auto, which "
                           "falls back, or for cpu):\n  " + mine.message);
    }
    if (std::string(c.requested) == "gpu" && mine.message.find("cpu") == std::string::npos) {
      return Outcome::fail(call + " threw, but its message does not list the accepted forms (cpu, cuda, cuda:N, "
                           "auto):\n  " + mine.message);
    }
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(describe_device, "describe_device() gives the name, memory in GiB and whether it is emulated") {
  struct Case {
    const char* device;
    int current;  // the GPU made current first, -1: none
  };
  for (const Case c : {Case{"cuda:0", -1}, Case{"cuda:1", -1}, Case{"cpu", -1}, Case{"cuda:0", 1}}) {
    Bundle in;
    in.values["device"] = c.device;
    const Machine m{2, c.current};
    const std::string call = std::string("describe_device(") + c.device + ")";
    Run mine, ref;
    if (auto early = ctx.both("describe_device", on(m, in), mine, ref, gpus(2, call))) return *early;
    if (mine.out.values["name"] != ref.out.values["name"]) {
      std::string why = call + " " + m.text() + ": .name is " + mine.out.values["name"].dump() + ", expected " +
                        ref.out.values["name"].dump();
      // Probe: whose properties did it read? The reference's description of the other GPU says.
      const std::string other = std::string(c.device) == "cuda:0" ? "cuda:1" : "cuda:0";
      Bundle probe;
      probe.values["device"] = other;
      const Run theirs = ctx.reference("describe_device", on(Machine{2}, probe), gpus(2));
      if (theirs.ok() && theirs.out.values["name"] == mine.out.values["name"]) {
        why += ", the name of " + other + ": ";
        why += c.current >= 0 ? "you read the current device's properties (tiny::cuda::get_device_properties() "
                                "with no index, or with current_device(); cuda:1 was current)"
                              : "you read the same GPU's properties whatever device you were given";
        why += ". Ask for the device you were given: tiny::cuda::get_device_properties(device.index())";
      }
      return Outcome::fail(why);
    }
    const double got = mine.out.values["memory_gib"], want = ref.out.values["memory_gib"];
    if (std::abs(got - want) > 1e-9 * std::max(1.0, want)) {
      const double bytes = ref.out.values["total_memory_bytes"];
      if (bytes > 0 && std::abs(got - bytes / 1e9) < 1e-9 * bytes) {
        return Outcome::fail(call + ".memory_gib is " + std::to_string(got) +
                             ": that is GB (10^9 bytes); a GiB is 2^30 = 1073741824 bytes, expected " +
                             std::to_string(want));
      }
      return Outcome::fail(call + ".memory_gib is " + std::to_string(got) + ", expected " + std::to_string(want));
    }
    if (mine.out.values["emulated"] != ref.out.values["emulated"]) {
      return Outcome::fail(call + ".emulated is " + mine.out.values["emulated"].dump() + ", expected " +
                           ref.out.values["emulated"].dump());
    }
  }
  return Outcome::pass();
}
