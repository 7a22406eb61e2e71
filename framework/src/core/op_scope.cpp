// The thread-local current op of core/op_scope.h.
#include "core/op_scope.h"

namespace tiny::detail {
thread_local const char* current_op_name = nullptr;
std::atomic<const OpTraceHooks*> op_trace_hooks{nullptr};
}  // namespace tiny::detail
