// TINY_DEFINE_DISPATCH, for the op files that define the stubs (see backend/dispatch.h).
#pragma once

#include "backend/dispatch.h"
#include "backend/emulated/emulate.h"

namespace tiny {
// What the work functions beside the definitions are written with.
using emulated::cost_of;
using emulated::KernelWork;
using gpu::model::Work;
}  // namespace tiny

// Defines `stub` (declared in its family's header, backend/stubs/) in
// namespace tiny, named `stub_name` in messages, with `work`: a function of
// the stub's parameters returning the emulated::KernelWork of one call (its
// name in traces, the bytes it moves, its FLOPs). The stub's emulated kernel
// is generated from it (backend/emulated/emulate.h), so a kernel family cannot
// be added without its cost on the modelled GPU.
//   TINY_DEFINE_DISPATCH(unary_stub, "unary", unary_work);
#define TINY_DEFINE_DISPATCH(stub, stub_name, work)                                                          \
  decltype(::tiny::stub) stub{stub_name,                                                                     \
                              &::tiny::emulated::Kernel<decltype(::tiny::stub), &::tiny::stub, &work>::run}; \
  [[maybe_unused]] static const bool TINY_DISPATCH_CONCAT(tiny_listed_, __LINE__) =                         \
      ::tiny::list_stub(stub_name, [](::tiny::Backend backend) { return ::tiny::stub.has(backend); })
