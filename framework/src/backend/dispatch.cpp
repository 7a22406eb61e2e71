#include "backend/dispatch.h"

#include "gpu/device_context.h"

#include <mutex>

namespace tiny {

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::CPU: return "cpu";
    case Backend::Emulated: return "emulated cuda";
    case Backend::CUDA: return "cuda";
  }
  return "unknown";
}

Backend backend_of(const Device& device) {
  if (device.is_cpu()) return Backend::CPU;
  gpu::resolve_index(device);  // throws, naming the devices that exist
  // Which runtime serves cuda:N is chosen once (gpu::device_runtime()).
  return gpu::device_runtime_is_cuda() ? Backend::CUDA : Backend::Emulated;
}

DispatchStubBase::DispatchStubBase(const char* stub_name) : name(stub_name) { all().push_back(this); }

std::vector<DispatchStubBase*>& DispatchStubBase::all() {
  static auto* stubs = new std::vector<DispatchStubBase*>();
  return *stubs;
}

void ensure_kernels_registered() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_cpu_kernels();
    register_emulated_kernels();
#if defined(TINY_HAVE_CUDA) && TINY_HAVE_CUDA
    register_cuda_kernels();  // function pointers only: touches no GPU, so it runs everywhere
#endif
  });
}

DispatchStub<UnaryFn> unary_stub("unary");
DispatchStub<BinaryFn> binary_stub("binary");
DispatchStub<IterFn> where_stub("where");
DispatchStub<IterFn> copy_stub("copy");
DispatchStub<FillFn> fill_stub("fill");
DispatchStub<ArangeFn> arange_stub("arange");
DispatchStub<ReduceFn> reduce_stub("reduce");
DispatchStub<ArgReduceFn> arg_reduce_stub("arg_reduce");
DispatchStub<GemmFn> gemm_stub("gemm");
DispatchStub<SoftmaxFn> softmax_stub("softmax");
DispatchStub<SoftmaxBackwardFn> softmax_backward_stub("softmax_backward");
DispatchStub<NllForwardFn> nll_forward_stub("nll_forward");
DispatchStub<NllBackwardFn> nll_backward_stub("nll_backward");
DispatchStub<RandomFn> random_stub("random");
DispatchStub<Im2colFn> im2col_stub("im2col");
DispatchStub<Col2imFn> col2im_stub("col2im");
DispatchStub<Pool2dFn> pool2d_stub("pool2d");
DispatchStub<Pool2dBackwardFn> pool2d_backward_stub("pool2d_backward");
DispatchStub<EmbeddingFn> embedding_stub("embedding");
DispatchStub<EmbeddingBackwardFn> embedding_backward_stub("embedding_backward");
DispatchStub<SgdStepFn> sgd_step_stub("sgd_step");
DispatchStub<AdamStepFn> adam_step_stub("adam_step");
DispatchStub<RmspropStepFn> rmsprop_step_stub("rmsprop_step");
DispatchStub<NonFiniteCheckAndUnscaleFn> non_finite_check_and_unscale_stub("non_finite_check_and_unscale");
DispatchStub<UpdateScaleFn> update_scale_stub("update_scale");

}  // namespace tiny
