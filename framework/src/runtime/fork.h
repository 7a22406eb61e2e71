// Which process generation this is: how many times fork() has made a child
// since the program started, counted in the child. A thread pool or an
// emulated GPU made in generation g belongs to that process; seeing another
// generation means the calling process is a child of the one that made it,
// which has none of its threads.
//
// Why not getpid(): glibc no longer caches it, so each call is a system call,
// and the emulated GPU asks on every kernel launch.
#pragma once

#include <cstdint>

namespace tiny::runtime {

// The current generation (a pthread_atfork child handler bumps it; the first
// call registers the handler, so call it before the first fork that matters:
// at the creation of whatever compares generations).
uint64_t fork_generation();

}  // namespace tiny::runtime
