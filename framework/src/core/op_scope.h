// The user-facing op that is running on this thread, for the memory tools:
// the caching allocator tags each block it hands out with it, so that
// tiny::cuda::memory_snapshot() and the MemoryTimeline can say which op holds
// which memory ("who holds my memory").
//
// An op marks its entry with TINY_OP_SCOPE("linear"). The outermost scope wins:
// linear calls addmm, addmm may copy, and all of that memory is "linear", the
// name the learner wrote. A scope costs one thread-local load, a compare and a
// pointer store; nothing is allocated or formatted. The name must be a string
// with static storage duration (a literal): blocks keep the pointer.
//
// While a tiny::profiler::profile records, the outermost scope also reports its
// entry and exit (one more relaxed atomic load per scope otherwise), so the
// trace shows each op's host time (Kineto's cpu_op). An op may name its input
// tensors, TINY_OP_SCOPE("linear", x, weight, bias): a profile opened with
// record_shapes then records their shapes and dtypes (Kineto's "Input Dims").
// Naming them costs nothing unless a profile records: the pointers are taken
// only after the hooks' load says one does.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tiny {
class Tensor;
}

namespace tiny::detail {

// The outermost open scope's name on this thread, or nullptr outside any.
extern thread_local const char* current_op_name;

// Set by the profiler's recording (gpu/model/trace.cpp) while it records.
struct OpTraceHooks {
  // The host's time at the op's entry; `inputs` (n of them, possibly undefined
  // tensors) are read there, never kept.
  int64_t (*enter)(const Tensor* const* inputs, size_t n);
  void (*exit)(const char* name, int64_t entered);  // records the op's host range
};
extern std::atomic<const OpTraceHooks*> op_trace_hooks;

// The current op, or "unknown" outside every scope.
inline const char* current_op() { return current_op_name != nullptr ? current_op_name : "unknown"; }

class OpScope {
 public:
  // `inputs`: the op's tensor arguments, for the profiler's record_shapes.
  template <class... Inputs>
  explicit OpScope(const char* name, const Inputs&... inputs) : outermost_(current_op_name == nullptr) {
    if (!outermost_) return;
    current_op_name = name;
    if (const OpTraceHooks* hooks = op_trace_hooks.load(std::memory_order_relaxed)) {
      hooks_ = hooks;
      if constexpr (sizeof...(Inputs) > 0) {
        const Tensor* const in[] = {&inputs...};
        entered_ = hooks->enter(in, sizeof...(Inputs));
      } else {
        entered_ = hooks->enter(nullptr, 0);
      }
    }
  }
  ~OpScope() {
    if (!outermost_) return;
    if (hooks_ != nullptr) hooks_->exit(current_op_name, entered_);
    current_op_name = nullptr;
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  bool outermost_;
  const OpTraceHooks* hooks_ = nullptr;
  int64_t entered_ = 0;
};

}  // namespace tiny::detail

#define TINY_OP_SCOPE_JOIN2(a, b) a##b
#define TINY_OP_SCOPE_JOIN(a, b) TINY_OP_SCOPE_JOIN2(a, b)
// Names the op running until the end of the enclosing block (outermost wins):
// TINY_OP_SCOPE("mm") or, naming its input tensors, TINY_OP_SCOPE("mm", a, b).
#define TINY_OP_SCOPE(...) ::tiny::detail::OpScope TINY_OP_SCOPE_JOIN(tiny_op_scope_, __LINE__)(__VA_ARGS__)
