// The CPU caching allocator: where CPU tensor storage comes from.
//
// Why cache: a training step allocates the same sizes every step. glibc hands
// large freed blocks back to the kernel, so every step pays again for the page
// faults of fresh memory (PyTorch 1.13 on the CPU loses much of its step time
// this way). Here freed blocks are kept and handed out again for requests of
// the same size class, so after the first step the memory is already mapped.
//
// Size classes (the bytes a request really reserves; see cpu_round_size):
//   up to 4 KiB         multiples of 64 bytes            (at most 63 bytes wasted)
//   above 4 KiB         4 classes per power of two:
//                       2^k + j * 2^(k-2), j = 1..4      (at most 25% wasted)
// e.g. 100 B -> 128 B, 5000 B -> 5 KiB, 1 MiB -> 1 MiB, 1 MiB + 1 B -> 1.25 MiB.
// Only blocks of exactly the same class are reused; blocks are never split.
// The waste is mostly virtual: pages of a large block that a tensor never
// writes are never given physical memory.
//
// Blocks of 1 MiB and more come straight from mmap (so that giving them back
// really returns them to the system); smaller ones from posix_memalign.
// Every block is 64-byte aligned (a cache line; AVX-512 loads).
//
// The cache holds at most TINY_CPU_CACHE_LIMIT bytes (default 1 GiB; for
// example "512MiB", "2GiB", "0" to turn caching off). A freed block that would
// go past the limit pushes the longest-unused cached blocks back to the system
// first; a block larger than the limit goes straight back.
//
// Statistics count size-class bytes, as PyTorch's memory_allocated() counts
// its rounded blocks: allocated + cached is what the allocator holds.
//
// Thread-safe (one mutex); a block may be freed on another thread than the
// one that allocated it. The allocator is never destroyed, so tensors freed
// during program exit are safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tiny::runtime {

// Returns a 64-byte aligned block of at least nbytes (nullptr for 0). Never
// touches the memory. Throws tiny::Error "CPU out of memory: tried to allocate
// ..." when the system has none, after emptying the cache and retrying. The
// first call reads TINY_CPU_CACHE_LIMIT; a bad value throws tiny::ValueError.
void* cpu_malloc(size_t nbytes);

// Gives back a block from cpu_malloc. nbytes must be the size passed to
// cpu_malloc (it picks the size class). nullptr is a no-op.
void cpu_free(void* ptr, size_t nbytes);

// Returns every cached (free) block to the system.
void cpu_empty_cache();

struct CpuAllocatorStats {
  size_t allocated_bytes;       // in blocks handed out and not yet freed
  size_t peak_allocated_bytes;  // highest allocated_bytes since start or cpu_reset_peak_stats()
  size_t cached_bytes;          // in free blocks kept for reuse
  uint64_t num_allocs;          // successful cpu_malloc calls with nbytes > 0
  uint64_t num_cache_hits;      // ... served from the cache
  uint64_t num_system_allocs;   // ... that had to ask the system
};

CpuAllocatorStats cpu_allocator_stats();

// Sets peak_allocated_bytes to the current allocated_bytes.
void cpu_reset_peak_stats();

// The bytes cpu_malloc(nbytes) really reserves: its size class.
size_t cpu_round_size(size_t nbytes);

// The cap on cached bytes (TINY_CPU_CACHE_LIMIT, default 1 GiB).
size_t cpu_cache_limit();

// Changes the cap; cached blocks past the new cap go back to the system now.
void cpu_set_cache_limit(size_t bytes);

// "512 bytes", "1.50 KiB", "2.00 GiB": sizes as PyTorch's messages print them.
std::string format_bytes(uint64_t bytes);

// Reads a size such as "2GiB", "512 MiB", "1.5G" or "4096": a number and an
// optional unit among B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB (all powers of
// 1024, as most tools read them; case ignored). `variable` names the setting
// in the tiny::ValueError thrown for anything else.
size_t parse_byte_size(const std::string& variable, const std::string& value);

}  // namespace tiny::runtime
