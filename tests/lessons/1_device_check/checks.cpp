// Lesson 1's checks: every exercise runs with 0, 1 and 2 emulated GPUs, with
// the student's code and the reference, and the answers must agree.
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

// n emulated GPUs; failures name the call and the machine.
RunOptions gpus(int n, const std::string& call = "") {
  RunOptions o;
  o.gpus = n;
  if (!call.empty()) o.call = call + " " + machine(n);
  return o;
}

// Runs `exercise` on the same inputs with n = 0, 1, 2 GPUs and compares `key`.
Outcome same_answer(Context& ctx, const std::string& exercise, const Bundle& in, const std::string& key,
                    const std::string& call) {
  for (int n : {0, 1, 2}) {
    Run mine, ref;
    if (auto early = ctx.both(exercise, in, mine, ref, gpus(n, call))) return *early;
    if (mine.out.values[key] != ref.out.values[key]) {
      return Outcome::fail(call + " " + machine(n) + " returned " + mine.out.values[key].dump() + ", expected " +
                           ref.out.values[key].dump());
    }
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

WORKBOOK_CHECK(choose_device, "choose_device() picks the GPU asked for, or falls back to the CPU without one") {
  for (int n : {0, 1, 2}) {
    for (const char* requested : {"cpu", "auto", "cuda", "cuda:0", "cuda:1"}) {
      if (std::string(requested) == "cuda:1" && n == 1) continue;  // an error there: see choose_device_errors
      Bundle in;
      in.values["requested"] = requested;
      const std::string call = std::string("choose_device(\"") + requested + "\")";
      Run mine, ref;
      if (auto early = ctx.both("choose_device", in, mine, ref, gpus(n, call))) return *early;
      const std::string got = mine.out.values["device"], want = ref.out.values["device"];
      if (got == want) continue;
      if (std::string(requested) == "cpu") {
        return Outcome::fail(call + " " + machine(n) + " returned " + got + ": \"cpu\" always means the CPU");
      }
      if (n == 0 && got != "cpu") {
        return Outcome::fail(call + " returned " + got +
                             ": with no GPU, fall back to the CPU (check tiny::cuda::is_available() first)");
      }
      return Outcome::fail(call + " " + machine(n) + " returned " + got + ", expected " + want);
    }
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(choose_device_errors, "choose_device() refuses a GPU that does not exist and a misspelt device") {
  struct Case {
    const char* requested;
    int gpus;
    const char* error;  // the tiny::Error subclass the reference throws
  };
  for (const Case c : {Case{"cuda:3", 2, "DeviceError"}, Case{"cuda:1", 1, "DeviceError"}, Case{"gpu", 2, "ValueError"},
                       Case{"cuda:x", 0, "ValueError"}, Case{"cuda:99999999999", 2, "DeviceError"}}) {
    Bundle in;
    in.values["requested"] = c.requested;
    const std::string call = std::string("choose_device(\"") + c.requested + "\") " + machine(c.gpus);
    const Run mine = ctx.student("choose_device", in, gpus(c.gpus));
    const std::string expected_type = std::string("tiny::") + c.error;
    if (mine.status == "todo") return Outcome::todo(mine.message);
    if (mine.status == "crash") return Outcome::fail(call + ": your code " + mine.message);
    if (mine.status == "ok") {
      // value(), not a const operator[]: a run that forged its results may have sent no "device" at all.
      const std::string got = mine.out.values.value("device", std::string("nothing"));
      if (got == "cpu" && c.gpus > 0 && std::string(c.error) == "DeviceError") {
        return Outcome::fail(call + " returned cpu: a GPU index that does not exist is a mistake in the request, "
                             "not a reason to fall back; throw a tiny::DeviceError that names the GPUs there are");
      }
      return Outcome::fail(call + " returned " + got + " instead of throwing a " + expected_type);
    }
    // It threw: the right error, with a message that helps the person who typed the request.
    if (mine.error_type != expected_type) {
      std::string why = call + " threw " + mine.error_type + " (\"" + mine.message + "\"), but it should throw " +
                        expected_type;
      if (mine.error_type.rfind("std::", 0) == 0) {
        why += ": that exception came from inside your code (std::stoi?), not from a check of yours; "
               "test the text before converting it";
      } else {
        why += std::string(": ") + (std::string(c.error) == "DeviceError"
                                        ? "the text is a well-formed device, but that GPU does not exist here"
                                        : "the text is not a device at all");
      }
      return Outcome::fail(why);
    }
    if (mine.message.find(c.requested) == std::string::npos) {
      return Outcome::fail(call + " threw, but its message does not say what was asked for ('" + c.requested +
                           "'):\n  " + mine.message);
    }
    const std::string last = "cuda:" + std::to_string(c.gpus - 1);
    if (std::string(c.error) == "DeviceError" && mine.message.find(last) == std::string::npos) {
      return Outcome::fail(call + " threw, but its message does not say which GPUs exist (" +
                           std::to_string(c.gpus) + ", cuda:0 to " + last + "):\n  " + mine.message);
    }
    if (std::string(c.error) == "ValueError" && mine.message.find("cpu") == std::string::npos) {
      return Outcome::fail(call + " threw, but its message does not list the accepted forms (cpu, auto, cuda, "
                           "cuda:N):\n  " + mine.message);
    }
  }
  return Outcome::pass();
}

WORKBOOK_CHECK(describe_device, "describe_device() gives the name, memory in GiB and whether it is emulated") {
  for (const char* device : {"cuda:0", "cuda:1", "cpu"}) {
    Bundle in;
    in.values["device"] = device;
    const std::string call = std::string("describe_device(") + device + ")";
    Run mine, ref;
    if (auto early = ctx.both("describe_device", in, mine, ref, gpus(2, call))) return *early;
    if (mine.out.values["name"] != ref.out.values["name"]) {
      return Outcome::fail(call + ".name is " + mine.out.values["name"].dump() + ", expected " +
                           ref.out.values["name"].dump());
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
