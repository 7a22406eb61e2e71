// tiny::cuda::memory_snapshot and its readable summary ("who holds my memory").
#include <algorithm>
#include <cstdio>
#include <map>

#include "gpu/caching_allocator.h"
#include "gpu/device_context.h"
#include "runtime/cpu_allocator.h"  // format_bytes
#include "tiny/cuda.h"

namespace tiny::cuda {

namespace {
int resolve(int index) {
  return gpu::resolve_index(index < 0 ? Device(DeviceType::CUDA) : Device(DeviceType::CUDA, index));
}
}  // namespace

std::vector<SegmentInfo> memory_snapshot(int device) {
  if (device >= 0) return gpu::device_allocator(resolve(device)).snapshot();
  std::vector<SegmentInfo> all;
  const int count = gpu::device_count();
  for (int i = 0; i < count; ++i) {
    std::vector<SegmentInfo> segments = gpu::device_allocator(i).snapshot();
    all.insert(all.end(), std::make_move_iterator(segments.begin()), std::make_move_iterator(segments.end()));
  }
  return all;
}

std::string memory_snapshot_summary(int device, size_t top) {
  const int index = resolve(device);
  const std::vector<SegmentInfo> segments = gpu::device_allocator(index).snapshot();
  using runtime::format_bytes;

  size_t reserved = 0, allocated = 0, pending = 0, live_blocks = 0;
  struct OpTotal {
    size_t bytes = 0;
    size_t blocks = 0;
  };
  std::map<std::string, OpTotal> per_op;
  std::vector<const BlockInfo*> live;
  for (const SegmentInfo& segment : segments) {
    reserved += segment.total_size;
    allocated += segment.allocated_size;
    pending += segment.active_size - segment.allocated_size;
    for (const BlockInfo& block : segment.blocks) {
      if (block.state != "active_allocated") continue;
      ++live_blocks;
      OpTotal& total = per_op[block.op];
      total.bytes += block.size;
      ++total.blocks;
      live.push_back(&block);
    }
  }

  std::string out = "Memory of cuda:" + std::to_string(index) + ": " + format_bytes(allocated) + " allocated in " +
                    std::to_string(live_blocks) + " blocks, " + format_bytes(reserved) + " reserved in " +
                    std::to_string(segments.size()) + " segments (" + format_bytes(reserved - allocated) +
                    " cached";
  if (pending > 0) out += ", " + format_bytes(pending) + " freed but waiting for other streams";
  out += ")\n";
  if (live.empty()) return out + "No live blocks.\n";

  char line[256];
  out += "Live memory by op (the op that allocated it):\n";
  std::vector<std::pair<std::string, OpTotal>> ops(per_op.begin(), per_op.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
  for (const auto& [op, total] : ops) {
    std::snprintf(line, sizeof(line), "  %-24s %12s in %zu block%s\n", op.c_str(), format_bytes(total.bytes).c_str(),
                  total.blocks, total.blocks == 1 ? "" : "s");
    out += line;
  }

  std::stable_sort(live.begin(), live.end(), [](const BlockInfo* a, const BlockInfo* b) { return a->size > b->size; });
  const size_t shown = std::min(top, live.size());
  out += "Largest live blocks (" + std::to_string(shown) + " of " + std::to_string(live.size()) + "):\n";
  std::snprintf(line, sizeof(line), "  %-24s %12s %12s %8s\n", "op", "size", "requested", "stream");
  out += line;
  for (size_t i = 0; i < shown; ++i) {
    const BlockInfo& block = *live[i];
    std::snprintf(line, sizeof(line), "  %-24s %12s %12s %8lld\n", block.op.c_str(), format_bytes(block.size).c_str(),
                  format_bytes(block.requested_size).c_str(), static_cast<long long>(block.stream));
    out += line;
  }
  return out;
}

}  // namespace tiny::cuda
