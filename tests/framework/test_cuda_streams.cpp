// tiny::cuda streams and events on the emulated GPU (torch.cuda.Stream, Event,
// torch.cuda.stream(s), Tensor.record_stream). Asynchrony is shown with the
// emulator's gates, never with sleeps: a gate kernel holds its stream's worker
// until the test opens it, so "not run yet" is certain, and "has run" follows
// from synchronize().
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/tensor_impl.h"
#include "gpu/caching_allocator.h"
#include "gpu/device_context.h"
#include "gpu/emulated/emulated_runtime.h"
#include "tiny/tiny.h"

namespace {

namespace gpu = tiny::gpu;
using tiny::Tensor;
using tiny::cuda::Event;
using tiny::cuda::Stream;
using tiny::cuda::StreamGuard;
using Mode = gpu::EmulatedRuntime::Mode;

const tiny::Device kGpu("cuda:0");

gpu::EmulatedRuntime& emu() {
  gpu::EmulatedRuntime* rt = gpu::emulated_runtime();
  if (rt == nullptr) throw std::runtime_error("these tests need the emulated GPU: unset TINY_EMULATED_GPUS");
  return *rt;
}

gpu::Stream native(const Stream& s) { return gpu::Stream{s.device(), s.id()}; }

// Holds `stream` behind a gate kernel (optionally followed by `then`) until
// open() or the end of the scope, so that a failing test never leaves a
// stream blocked for the tests after it.
class HeldStream {
 public:
  explicit HeldStream(const Stream& stream, std::function<void()> then = {}) : gate_(std::make_shared<gpu::Gate>()) {
    auto gate = gate_;
    emu().launch(
        native(stream),
        [gate, then] {
          gate->wait();
          if (then) then();
        },
        "gate");
  }
  ~HeldStream() { gate_->open(); }
  HeldStream(const HeldStream&) = delete;
  HeldStream& operator=(const HeldStream&) = delete;
  void open() { gate_->open(); }

 private:
  std::shared_ptr<gpu::Gate> gate_;
};

// Gates need workers that run as soon as they can: threaded mode (a blocking
// launch would wait for the gate forever). Restores the mode afterwards.
class CudaStreams : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = emu().mode();
    emu().set_mode(Mode::threaded);
    tiny::cuda::synchronize(0);
    tiny::cuda::synchronize(1);
  }
  void TearDown() override {
    tiny::cuda::synchronize(0);
    tiny::cuda::synchronize(1);
    emu().set_mode(previous_);
  }

 private:
  Mode previous_ = Mode::threaded;
};

void* block_address(const Tensor& t) { return t.unsafe_impl()->storage->data; }

TEST_F(CudaStreams, NewStreamsAreDistinctNonDefaultStreamsOfTheirDevice) {
  const Stream a(0), b(0), c(1);
  EXPECT_NE(a, b);  // consecutive pooled streams always differ
  EXPECT_EQ(a.device(), 0);
  EXPECT_EQ(c.device(), 1);
  EXPECT_NE(a, Stream::default_stream(0));
  EXPECT_EQ(Stream::default_stream(0).id(), 0);
  EXPECT_EQ(Stream::default_stream(1), tiny::cuda::default_stream(1));
  EXPECT_NE(Stream::default_stream(0), Stream::default_stream(1));
  const Stream copy = a;
  EXPECT_EQ(copy, a);
  EXPECT_EQ(Stream().device(), tiny::cuda::current_device());  // -1: the current device
  EXPECT_THROW(Stream{2}, tiny::DeviceError);                    // two emulated devices
  EXPECT_TRUE(a.query());                                        // nothing queued
}

TEST_F(CudaStreams, OpsUnderAStreamGuardRunOnThatStream) {
  const Tensor a = tiny::ones({1000}, kGpu);  // on the default stream
  tiny::cuda::synchronize(0);
  const Stream side(0);
  const Stream main_stream = tiny::cuda::current_stream(0);
  ASSERT_EQ(main_stream, Stream::default_stream(0));

  HeldStream held(side);
  Tensor b;
  {
    StreamGuard guard(side);
    EXPECT_EQ(tiny::cuda::current_stream(), side);
    EXPECT_EQ(gpu::current_stream(0), native(side));  // what kernels and the allocator use
    b = a * 2.0;                                       // queued behind the gate
  }
  EXPECT_EQ(tiny::cuda::current_stream(0), main_stream);
  EXPECT_FALSE(side.query());

  // The default stream is independent: its work completes while `side` is held.
  const Tensor c = (a + 1.0).cpu();
  EXPECT_TRUE(main_stream.query());
  EXPECT_EQ(c.sum().item<float>(), 2000.0f);
  EXPECT_FALSE(side.query());  // b's kernel still waits behind the gate

  held.open();
  side.synchronize();
  EXPECT_TRUE(side.query());
  EXPECT_EQ(b.device(), kGpu);
  EXPECT_EQ(b.cpu().sum().item<float>(), 2000.0f);
}

TEST_F(CudaStreams, WaitStreamOrdersAConsumerAfterAProducer) {
  const Tensor x = tiny::full({256}, 1.5, kGpu);
  tiny::cuda::synchronize(0);
  const Stream producer(0), consumer(0);
  ASSERT_NE(producer, consumer);

  HeldStream held(producer);
  Tensor y, z;
  {
    StreamGuard guard(producer);
    y = x * 2.0;  // 3.0, once the gate opens
  }
  {
    StreamGuard guard(consumer);
    consumer.wait_stream(producer);  // does not block the host
    z = y + 1.0;
    y.record_stream(consumer);  // y was allocated on the producer
  }
  EXPECT_FALSE(producer.query());
  EXPECT_FALSE(consumer.query());  // the consumer waits behind the producer's gate

  held.open();
  consumer.synchronize();
  EXPECT_TRUE(consumer.query());
  EXPECT_TRUE(producer.query());  // the consumer ran after the producer's work
  EXPECT_TRUE(tiny::equal(z.cpu(), tiny::full({256}, 4.0)));
}

TEST_F(CudaStreams, WithoutWaitStreamTheConsumerDoesNotWait) {
  const Stream producer(0), consumer(0);
  HeldStream held(producer);
  {
    StreamGuard guard(consumer);
    (void)tiny::ones({16}, kGpu);  // a kernel on the consumer: nothing orders it after the producer
  }
  consumer.synchronize();  // returns although the producer is still held
  EXPECT_TRUE(consumer.query());
  EXPECT_FALSE(producer.query());
}

TEST_F(CudaStreams, EventRecordQuerySynchronizeAndElapsedTime) {
  const Stream s(0);
  Event start(true), end(true);
  EXPECT_FALSE(start.is_recorded());
  EXPECT_EQ(start.device(), -1);
  EXPECT_TRUE(start.query());          // never recorded: nothing to wait for
  EXPECT_NO_THROW(start.synchronize());

  start.record(s);
  HeldStream held(s, [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });  // the timed "kernel"
  end.record(s);
  EXPECT_TRUE(end.is_recorded());
  EXPECT_EQ(end.device(), 0);
  EXPECT_FALSE(end.query());

  // Another stream waiting for the event is held too; the host is not.
  const Stream waiter(0);
  waiter.wait_event(end);
  EXPECT_FALSE(waiter.query());

  held.open();
  end.synchronize();
  EXPECT_TRUE(end.query());
  EXPECT_TRUE(start.query());
  waiter.synchronize();
  EXPECT_TRUE(waiter.query());
  const float ms = start.elapsed_time(end);
  EXPECT_GT(ms, 0.0f);
  EXPECT_LT(ms, 0.1f) << "events time the modelled GPU: the gated kernel slept 20 ms on this CPU, but a kernel "
                         "that declares no work costs the shortest kernel, microseconds";

  // Copies share one event.
  Event copy = end;
  EXPECT_EQ(copy, end);
  EXPECT_NE(copy, start);
  const Event recorded = s.record_event();
  recorded.synchronize();
  EXPECT_TRUE(recorded.is_recorded());
}

TEST_F(CudaStreams, EventMisuseIsReported) {
  const Stream s0(0), s1(1);
  Event untimed, timed(true);
  untimed.record(s0);
  timed.record(s0);
  timed.synchronize();
  EXPECT_THROW((void)untimed.elapsed_time(timed), tiny::Error);  // needs enable_timing on both
  Event never(true);
  EXPECT_THROW((void)timed.elapsed_time(never), tiny::Error);  // not recorded
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const tiny::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // Which of the two was never recorded, and the fix in the user's words.
  std::string m = message([&] { (void)timed.elapsed_time(never); });
  EXPECT_NE(m.find("the end event (the argument) was never recorded"), std::string::npos) << m;
  EXPECT_NE(m.find("end.record()"), std::string::npos) << m;
  m = message([&] { (void)never.elapsed_time(timed); });
  EXPECT_NE(m.find("the start event (the one elapsed_time is called on) was never recorded"), std::string::npos)
      << m;
  // Read before the work between them has finished (in modelled time, a
  // 1024^3 product outlasts its launch): the fix is end.synchronize().
  const Tensor a = tiny::ones({1024, 1024}).to(tiny::Device("cuda:0"));
  tiny::cuda::synchronize(0);
  Event start(true), end(true);
  start.record(s0);
  {
    StreamGuard guard(s0);
    (void)tiny::matmul(a, a);
  }
  end.record(s0);
  EXPECT_FALSE(end.query()) << "the modelled host is still before the product's end";
  m = message([&] { (void)start.elapsed_time(end); });
  EXPECT_NE(m.find("the end event has not completed yet"), std::string::npos) << m;
  EXPECT_NE(m.find("end.synchronize()"), std::string::npos) << m;
  end.synchronize();
  EXPECT_GT(start.elapsed_time(end), 0.0f);
  EXPECT_THROW(untimed.record(s1), tiny::DeviceError);         // recorded on cuda:0 before
  // Recording on the current stream, and waiting on it.
  Event e;
  e.record();
  EXPECT_EQ(e.device(), 0);
  e.wait();
  e.synchronize();
}

// A tensor allocated on stream A and used on stream B: without record_stream,
// A may reuse its block the moment the tensor is freed, while B's work still
// reads it. B's use here is a raw kernel that, like a CUDA kernel, holds only
// the block's address: tiny's own emulated kernels hold their tensors until
// they have run (backend/emulated/emulate.h), which would hide the hazard.
TEST_F(CudaStreams, RecordStreamKeepsABlockFromReuseUntilTheOtherStreamRan) {
  for (const bool record : {false, true}) {
    SCOPED_TRACE(record ? "with record_stream" : "without record_stream");
    tiny::cuda::empty_cache();  // A's pool starts empty: the addresses below are certain
    const Stream a(0), b(0);
    auto& allocator = gpu::device_allocator(0);
    auto seen_by_b = std::make_shared<float>(0.0f);
    void* first = nullptr;
    {
      StreamGuard guard(a);
      Tensor t = tiny::full({1024}, 1.0, kGpu);  // 4 KiB from A's pool, filled on A
      first = block_address(t);
      HeldStream held(b);
      b.wait_stream(a);
      const float* worker = static_cast<const float*>(emu().worker_address(first));
      emu().launch(native(b), [worker, seen_by_b] { *seen_by_b = worker[0]; }, "read_on_b");  // behind the gate
      if (record) tiny::cuda::record_stream(t, b);
      a.synchronize();  // A's fill has run (and let go of t)

      const gpu::MemoryStats before = allocator.stats();
      t = Tensor();  // freed while B's read has not run
      const gpu::MemoryStats after = allocator.stats();
      EXPECT_EQ(before.allocated_bytes[gpu::kAggregatePool].current - after.allocated_bytes[gpu::kAggregatePool].current,
                4096);
      // A block waiting for B's event stays "active".
      EXPECT_EQ(before.active_bytes[gpu::kAggregatePool].current - after.active_bytes[gpu::kAggregatePool].current,
                record ? 0 : 4096);

      const Tensor next = tiny::full({1024}, 7.0, kGpu);  // the same size, on A
      a.synchronize();
      if (record) {
        EXPECT_NE(block_address(next), first) << "A reused a block B's queued work still reads";
      } else {
        EXPECT_EQ(block_address(next), first) << "without record_stream, A reuses the block at once";
      }
      EXPECT_FALSE(b.query());
      held.open();
      b.synchronize();
      // Without record_stream B read A's new data: on a GPU, a race.
      EXPECT_EQ(*seen_by_b, record ? 1.0f : 7.0f);
    }
    {
      StreamGuard guard(a);
      const Tensor again = tiny::empty({1024}, kGpu);  // B's work ran: the block is back in A's pool
      EXPECT_EQ(block_address(again), first);
    }
  }
}

TEST_F(CudaStreams, RecordStreamRejectsCpuAndUndefinedTensors) {
  const Stream s(0);
  EXPECT_THROW(tiny::cuda::record_stream(tiny::ones({2}), s), tiny::DeviceError);
  EXPECT_THROW(tiny::cuda::record_stream(Tensor(), s), tiny::DeviceError);
  const Tensor t = tiny::ones({2}, kGpu);
  EXPECT_NO_THROW(tiny::cuda::record_stream(t, Stream::default_stream(0)));  // its own stream: nothing to do
}

TEST_F(CudaStreams, GuardsNestAndTheDefaultStreamIsBackAfterThem) {
  ASSERT_EQ(tiny::cuda::current_device(), 0);
  ASSERT_EQ(tiny::cuda::current_stream(), Stream::default_stream(0));
  const Stream s0(0), s1(1);
  {
    StreamGuard outer(s1);  // as torch.cuda.stream(s): also makes the stream's device current
    EXPECT_EQ(tiny::cuda::current_device(), 1);
    EXPECT_EQ(tiny::cuda::current_stream(), s1);
    EXPECT_EQ(tiny::cuda::current_stream(0), Stream::default_stream(0));
    EXPECT_EQ(tiny::zeros({2}, "cuda").device(), tiny::Device("cuda:1"));
    {
      StreamGuard inner(s0);
      EXPECT_EQ(tiny::cuda::current_device(), 0);
      EXPECT_EQ(tiny::cuda::current_stream(0), s0);
      EXPECT_EQ(tiny::cuda::current_stream(1), s1);  // per device
    }
    EXPECT_EQ(tiny::cuda::current_device(), 1);
    EXPECT_EQ(tiny::cuda::current_stream(0), Stream::default_stream(0));
    EXPECT_EQ(tiny::cuda::current_stream(1), s1);
  }
  EXPECT_EQ(tiny::cuda::current_device(), 0);
  EXPECT_EQ(tiny::cuda::current_stream(0), Stream::default_stream(0));
  EXPECT_EQ(tiny::cuda::current_stream(1), Stream::default_stream(1));
  EXPECT_EQ(gpu::current_stream(0).id, 0);

  tiny::cuda::set_stream(s0);
  EXPECT_EQ(tiny::cuda::current_stream(), s0);
  tiny::cuda::set_stream(Stream::default_stream(0));
  EXPECT_EQ(tiny::cuda::current_stream(), Stream::default_stream(0));
}

TEST_F(CudaStreams, TheCurrentStreamIsPerThread) {
  const Stream mine(0), theirs(0);
  StreamGuard guard(mine);
  Stream seen_at_start = mine, seen_after_set = mine;
  int64_t native_id = -1;
  std::thread other([&] {
    seen_at_start = tiny::cuda::current_stream(0);  // a new thread starts on the default stream
    native_id = gpu::current_stream(0).id;
    tiny::cuda::set_stream(theirs);
    seen_after_set = tiny::cuda::current_stream(0);
  });
  other.join();
  EXPECT_EQ(seen_at_start, Stream::default_stream(0));
  EXPECT_EQ(native_id, 0);
  EXPECT_EQ(seen_after_set, theirs);
  EXPECT_EQ(tiny::cuda::current_stream(0), mine);  // the other thread's set_stream changed nothing here
}

// A copy between two GPUs runs on the source's stream, into memory from the
// destination's caching allocator. That memory may have just been freed by a
// tensor that work queued on the destination's stream still reads: the copy
// must wait for that work (found by DataParallel training drifting).
TEST_F(CudaStreams, CopyBetweenGpusWaitsForTheDestinationsQueuedReaders) {
  const tiny::Device gpu1("cuda:1");
  const Tensor src = tiny::full({256}, 7.0f, tiny::TensorOptions().device(kGpu));
  Tensor target = tiny::zeros({256}, tiny::TensorOptions().device(gpu1));
  const Tensor host = tiny::full({256}, -1.0f).pin_memory();
  tiny::cuda::synchronize(0);
  tiny::cuda::synchronize(1);
  HeldStream held(tiny::cuda::current_stream(1));
  host.copy_(target, /*non_blocking=*/true);  // queued behind the gate: reads target's block later
  const void* block = target.unsafe_impl()->data();
  target = Tensor();  // stream-ordered: its block is reusable at once on cuda:1's stream
  std::thread opener([&held] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    held.open();
  });
  const Tensor moved = src.to(gpu1);  // lands in that block; must wait for the queued read
  opener.join();
  tiny::cuda::synchronize(1);
  ASSERT_EQ(moved.unsafe_impl()->data(), block) << "the test needs the copy to land in the freed block";
  EXPECT_EQ(host.sum().item<float>(), 0.0f) << "the copy overwrote the block before the queued read of it";
  EXPECT_EQ(moved.sum().item<float>(), 7.0f * 256);
}

}  // namespace

// As on CUDA: a tensor whose last handle goes while its kernels are still
// queued gives its block back at once (memory_allocated falls at once), and
// the next allocation on the same stream may take the block; the stream's
// order keeps the new user behind the old kernels, so results stay right.
TEST_F(CudaStreams, FreeingATensorWithQueuedKernelsReturnsItsBlockAtOnce) {
  const Stream side(0);
  const Tensor a = tiny::full({1024, 256}, 1.5f, tiny::TensorOptions().device(kGpu));
  tiny::cuda::synchronize(0);
  HeldStream held(side);
  Tensor sum;
  void* first = nullptr;
  size_t before = 0;
  {
    StreamGuard guard(side);
    before = tiny::cuda::memory_allocated(0);
    Tensor doubled = a * 2.0;  // 1 MiB, queued behind the gate
    first = block_address(doubled);
    sum = doubled.sum();
    EXPECT_GT(tiny::cuda::memory_allocated(0), before + (1u << 20) - 1);
  }  // `doubled` is dropped here, its kernels still queued
  EXPECT_FALSE(side.query());
  EXPECT_LT(tiny::cuda::memory_allocated(0), before + (1u << 20)) << "the block waited for the queued kernels";
  Tensor tripled;
  {
    StreamGuard guard(side);
    tripled = a * 3.0;  // the same stream may reuse the block: it runs after the kernels before it
  }
  EXPECT_EQ(block_address(tripled), first);
  held.open();
  side.synchronize();  // the reads below are queued on the default stream
  EXPECT_FLOAT_EQ(sum.item<float>(), 1024.0f * 256.0f * 3.0f);
  EXPECT_FLOAT_EQ(tripled.cpu().max().item<float>(), 4.5f);
}
