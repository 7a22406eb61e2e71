// Lesson 1 demo: which devices does this machine have, and which one would we train on?
//   ./workbook run 1            (asks for "auto")
//   ./workbook run 1 cuda:1     (asks for a given device)
//   TINY_EMULATED_GPUS=0 ./workbook run 1    (a machine without a GPU: see the fallback)
#include <cstdio>

#include <CLI/CLI.hpp>

#include "exercise.h"

int main(int argc, char** argv) {
  CLI::App app{"Lesson 1 demo: which devices this machine has, and which one training would run on",
               "./workbook run 1"};
  std::string requested = "auto";
  app.add_option("device", requested, "the device to ask for: auto, cpu or cuda:N")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0; a bad flag: CLI11 names it, and the status is 2 as before
  }
  try {
    std::printf("GPUs found: %d\n", lesson1::count_devices());
    for (const tiny::Device& device : lesson1::available_devices()) {
      const lesson1::DeviceDescription d = lesson1::describe_device(device);
      std::printf("  %-7s %s", device.str().c_str(), d.name.c_str());
      if (!device.is_cpu()) {
        const tiny::cuda::DeviceProperties p = tiny::cuda::get_device_properties(device.index());
        std::printf(", %.2f GiB, %d multiprocessors, compute capability %d.%d%s", d.memory_gib,
                    p.multi_processor_count, p.major, p.minor, d.emulated ? " (emulated on your CPU)" : "");
      }
      std::printf("\n");
    }
    const tiny::Device device = lesson1::choose_device(requested);
    std::printf("asked for '%s': training would run on %s\n", requested.c_str(), device.str().c_str());
    if (!device.is_cpu()) std::printf("%s\n", tiny::cuda::device_banner(device).c_str());
  } catch (const tiny::NotImplemented& e) {
    std::printf("%s\n(fill in lessons/1_device_check/exercise.cpp, then run ./workbook check 1)\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
