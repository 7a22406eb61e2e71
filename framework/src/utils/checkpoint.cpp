// tiny::utils::checkpoint: a node whose backward recomputes its segment (see
// tiny/utils/checkpoint.h).
#include "tiny/utils/checkpoint.h"

#include <atomic>
#include <cstdio>

#include "autograd/function.h"
#include "core/op_scope.h"
#include "tiny/autograd.h"
#include "tiny/error.h"
#include "tiny/generator.h"

namespace tiny::utils {

namespace {

using Fn = std::function<Tensor(const Tensor&)>;

// Puts a generator back where it was, also when the recomputation throws.
class GeneratorStateGuard {
 public:
  GeneratorStateGuard(Generator generator, PhiloxState replay) : generator_(generator), saved_(generator.get_state()) {
    generator_.set_state(replay);
  }
  ~GeneratorStateGuard() { generator_.set_state(saved_); }
  GeneratorStateGuard(const GeneratorStateGuard&) = delete;
  GeneratorStateGuard& operator=(const GeneratorStateGuard&) = delete;

 private:
  Generator generator_;
  PhiloxState saved_;
};

// `extra` are tensors the segment uses that need gradients (its parameters):
// they make the node part of the graph even when `input` needs no gradient.
// Their gradients reach .grad() through the nested backward, so the node
// returns none for them.
Tensor checkpoint_impl(const Fn& fn, const Tensor& input, bool preserve_rng_state, const std::vector<Tensor>& extra) {
  std::vector<Tensor> inputs{input};
  inputs.insert(inputs.end(), extra.begin(), extra.end());
  if (!autograd::should_record(inputs)) return fn(input);

  // The generator is a handle: copies share the device's state.
  Generator generator = default_generator(input.device());
  const PhiloxState rng_state = preserve_rng_state ? generator.get_state() : PhiloxState{};
  Tensor out;
  {
    NoGradGuard no_grad;
    out = fn(input);
  }
  TINY_CHECK(out.defined(), ValueError, "checkpoint: the checkpointed function returned an undefined tensor");
  // The output must be a tensor of its own to carry the checkpoint node
  // (fn may return its input, or a view of it).
  if (out.unsafe_impl()->storage == input.unsafe_impl()->storage) out = out.clone();

  const size_t num_inputs = inputs.size();
  autograd::record(
      "CheckpointFunctionBackward", inputs, {out}, {autograd::save(input)},
      [fn, preserve_rng_state, generator, rng_state, num_inputs](const autograd::BackwardArgs& args) {
        Tensor x = args.saved[0].detach();
        if (args.needs[0]) x.requires_grad_(true);
        Tensor y;
        {
          EnableGradGuard grad_on;
          if (preserve_rng_state) {
            GeneratorStateGuard replay(generator, rng_state);
            y = fn(x);
          } else {
            y = fn(x);
          }
        }
        std::vector<Tensor> grads(num_inputs);
        // A segment with nothing to differentiate (no parameter, input needs no grad) has no graph.
        if (y.requires_grad()) {
          autograd::backward({y}, {args.grad()});
          if (args.needs[0]) grads[0] = x.grad();
        }
        return grads;
      });
  return out;
}

}  // namespace

Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& input, bool preserve_rng_state) {
  TINY_CHECK(fn != nullptr, ValueError, "checkpoint: fn is empty; pass the function (or lambda) to checkpoint");
  TINY_CHECK(input.defined(), ValueError, "checkpoint: input is an undefined tensor");
  if (is_grad_enabled() && !input.requires_grad()) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      std::fprintf(stderr,
                   "tiny warning: checkpoint: None of the inputs have requires_grad=True; running the function "
                   "without checkpointing so that its parameters still get gradients (its activations are kept). "
                   "Use checkpoint_sequential, or checkpoint a later part of the model.\n");
    }
    return fn(input);
  }
  return checkpoint_impl(fn, input, preserve_rng_state, {});
}

Tensor checkpoint_sequential(nn::Sequential& seq, int segments, const Tensor& input) {
  const int64_t n = static_cast<int64_t>(seq.size());
  TINY_CHECK(n > 0, ValueError, "checkpoint_sequential: the Sequential is empty");
  TINY_CHECK(segments >= 1 && segments <= n, ValueError, "checkpoint_sequential: segments must be between 1 and "
             "the number of modules (", n, "), got ", segments);
  // PyTorch's split: segment_size = n // segments, the last segment takes the rest.
  const int64_t size = n / segments;
  auto run = [&seq](int64_t begin, int64_t end, const Tensor& x) {
    Tensor h = x;
    for (int64_t i = begin; i < end; ++i) h = (*seq[i])(h);
    return h;
  };
  Tensor h = input;
  int64_t begin = 0;
  for (int s = 0; s + 1 < segments; ++s) {
    const int64_t end = begin + size;
    std::vector<Tensor> params;
    for (int64_t i = begin; i < end; ++i) {
      for (const Tensor& p : seq[i]->parameters()) {
        if (p.requires_grad()) params.push_back(p);
      }
    }
    h = checkpoint_impl([run, begin, end](const Tensor& x) { return run(begin, end, x); }, h, true, params);
    begin = end;
  }
  return run(begin, n, h);
}

}  // namespace tiny::utils
