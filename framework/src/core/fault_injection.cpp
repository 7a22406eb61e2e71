#include "core/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "tiny/error.h"

namespace tiny::fault {

namespace {

struct Plan {
  uint64_t device_malloc_at = 0;  // 0: no fault
  uint64_t file_write_at = 0;
};

std::atomic<bool> g_armed{false};
std::once_flag g_env_once;
std::mutex g_mutex;
Plan g_plan;
uint64_t g_device_mallocs = 0;
uint64_t g_bytes_written = 0;

Plan parse(const std::string& spec) {
  Plan plan;
  size_t start = 0;
  while (start < spec.size()) {
    size_t end = spec.find(',', start);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const size_t at = item.find('@');
    TINY_CHECK(at != std::string::npos, ValueError, "TINY_FAULT_INJECT: '", item,
               "' is not site@N (e.g. device_malloc@3 or file_write@4096)");
    const std::string site = item.substr(0, at), count = item.substr(at + 1);
    char* rest = nullptr;
    const unsigned long long n = std::strtoull(count.c_str(), &rest, 10);
    TINY_CHECK(!count.empty() && rest != nullptr && *rest == '\0' && n >= 1, ValueError, "TINY_FAULT_INJECT: the count in '",
               item, "' must be a whole number >= 1");
    if (site == "device_malloc") {
      plan.device_malloc_at = n;
    } else if (site == "file_write") {
      plan.file_write_at = n;
    } else {
      TINY_THROW(ValueError, "TINY_FAULT_INJECT: unknown site '", site, "' (sites: device_malloc, file_write)");
    }
  }
  return plan;
}

void install(const Plan& plan) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_plan = plan;
  g_device_mallocs = 0;
  g_bytes_written = 0;
  g_armed.store(plan.device_malloc_at != 0 || plan.file_write_at != 0, std::memory_order_release);
}

void read_environment() {
  std::call_once(g_env_once, [] {
    const char* spec = std::getenv("TINY_FAULT_INJECT");
    if (spec != nullptr && *spec != '\0') install(parse(spec));
  });
}

}  // namespace

void arm(const std::string& spec) {
  read_environment();  // a later first check must not replace this plan with the environment's
  install(parse(spec));
}

bool device_malloc_fails() {
  read_environment();
  if (!g_armed.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_plan.device_malloc_at == 0) return false;
  const uint64_t n = ++g_device_mallocs;
  // The planned allocation, and the caching allocator's retry right after it.
  return n == g_plan.device_malloc_at || n == g_plan.device_malloc_at + 1;
}

void file_bytes_written(uint64_t n) {
  read_environment();
  if (!g_armed.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_plan.file_write_at == 0) return;
  g_bytes_written += n;
  if (g_bytes_written >= g_plan.file_write_at) ::kill(::getpid(), SIGKILL);
}

}  // namespace tiny::fault
