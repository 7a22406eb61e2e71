// Kernel dispatch (ATen's DispatchStub): each kernel family has one stub
// holding a function per backend. Ops call `stub(device)(args...)`.
//
// Where each piece lives, so any op is found in three hops:
//   backend/stubs/<family>.h   declares the family's stubs (its function types)
//   the op's file (ops/, optim/, amp/)
//                              defines each stub with TINY_DEFINE_DISPATCH
//                              (backend/define_dispatch.h), beside the work the
//                              kernel does on the modelled GPU; the emulated
//                              column is generated from that
//   backend/cpu/<family>_kernels.cpp, backend/cuda/<family>.cu
//                              define the kernels and register them at their
//                              end with TINY_REGISTER_KERNEL
// tiny is a shared library, so every registration runs when it loads; a test
// lists any stub a backend lacks (tests/framework/test_dispatch.cpp).
#pragma once

#include <vector>

#include "tiny/device.h"
#include "tiny/error.h"

namespace tiny {

enum class Backend : uint8_t { CPU = 0, Emulated = 1, CUDA = 2 };
constexpr int kNumBackends = 3;
const char* backend_name(Backend backend);
// The backend that runs ops on `device`.
Backend backend_of(const Device& device);

// One line of the stub registry, for the tests and error messages.
struct StubListing {
  const char* name;
  bool (*has)(Backend backend);
};
// Every stub defined, in the order the library's files were initialized.
std::vector<StubListing>& all_stubs();
// Adds a stub to all_stubs() (TINY_DEFINE_DISPATCH does; returns true).
bool list_stub(const char* name, bool (*has)(Backend backend));

// A literal type: a stub is constant-initialized, so registrations running
// from any file's static initializers always find its table in place.
template <typename Fn>
struct DispatchStub {
  constexpr explicit DispatchStub(const char* stub_name, Fn emulated = nullptr) : name(stub_name) {
    table[static_cast<int>(Backend::Emulated)] = emulated;
  }
  bool has(Backend backend) const { return table[static_cast<int>(backend)] != nullptr; }
  Fn operator()(Backend backend) const {
    Fn fn = table[static_cast<int>(backend)];
    TINY_CHECK(fn != nullptr, NotImplemented, "the '", name, "' kernel is not implemented for the ",
               backend_name(backend), " backend");
    return fn;
  }
  Fn operator()(const Device& device) const { return (*this)(backend_of(device)); }
  const char* name;
  Fn table[kNumBackends] = {};
};

// Stores `fn` as `backend`'s kernel of `stub` (TINY_REGISTER_KERNEL; returns true).
template <typename Fn>
bool register_kernel(DispatchStub<Fn>& stub, Backend backend, Fn fn) {
  stub.table[static_cast<int>(backend)] = fn;
  return true;
}

}  // namespace tiny

// In a family's header (backend/stubs/): the stub and its function type.
#define TINY_DECLARE_DISPATCH(FnType, stub) extern ::tiny::DispatchStub<FnType> stub

#define TINY_DISPATCH_CONCAT_(a, b) a##b
#define TINY_DISPATCH_CONCAT(a, b) TINY_DISPATCH_CONCAT_(a, b)

// At the end of the file that defines a kernel: registers it for one backend
// (CPU or CUDA; the emulated column is generated where the stub is defined).
//   TINY_REGISTER_KERNEL(unary_stub, CPU, unary_kernel);
#define TINY_REGISTER_KERNEL(stub, backend, fn)                                            \
  [[maybe_unused]] static const bool TINY_DISPATCH_CONCAT(tiny_registered_, __LINE__) = \
      ::tiny::register_kernel(::tiny::stub, ::tiny::Backend::backend, &fn)
