// init_process_group: where this rank is (environment, mpirun, SLURM), the
// rendezvous store named by the init method, the join (every rank publishes
// where it runs and waits for the others), then Gloo's full mesh.
#include <gloo/context.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#define HIREDIS_NESTED_INCLUDE 1  // Debian installs hiredis.h in include/hiredis/
#include <gloo/rendezvous/redis_store.h>
#include <gloo/transport/tcp/device.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "distributed/process_group.h"
#include "gpu/device_context.h"
#include "gpu/model/timeline.h"
#include "tiny/cuda.h"

namespace tiny::distributed {
namespace detail {
namespace {

std::unique_ptr<ProcessGroup> g_group;

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

int env_int(const char* name, int fallback) {
  const char* value = env(name);
  if (!value) return fallback;
  char* end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  TINY_CHECK(end && *end == '\0' && parsed >= 0 && parsed < (1 << 20), ValueError, "init_process_group: ", name,
             "='", value, "' is not a whole number >= 0");
  return static_cast<int>(parsed);
}

// The first of the names that is set, e.g. RANK, then mpirun's, then SLURM's.
int env_first(std::initializer_list<const char*> names, int fallback) {
  for (const char* name : names)
    if (env(name)) return env_int(name, fallback);
  return fallback;
}

// Gloo's FileStore with its protected check() made public: its own wait()
// sleeps a whole second between looks, which would add a second to every run.
class CheckableFileStore : public gloo::rendezvous::FileStore {
 public:
  using FileStore::check;
  using FileStore::FileStore;
};

// Gloo's Store with one timeout for every wait, keys under a prefix, and, when
// `poll`, waits that look every 2 ms (the TCP store's server waits by itself).
class TimedStore : public gloo::rendezvous::Store {
 public:
  using Check = std::function<bool(const std::vector<std::string>&)>;
  TimedStore(gloo::rendezvous::Store& inner, Check check, bool poll, std::string prefix,
             std::chrono::milliseconds timeout)
      : inner_(inner), check_(std::move(check)), poll_(poll), prefix_(std::move(prefix)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override { inner_.set(name(key), data); }
  std::vector<char> get(const std::string& key) override {
    wait({key}, timeout_);
    return inner_.get(name(key));
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> named;
    for (const auto& k : keys) named.push_back(name(k));
    if (!poll_) return inner_.wait(named, timeout);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!check_(named)) {
      TINY_CHECK(std::chrono::steady_clock::now() < deadline, distributed::DistributedError,
                 "rendezvous: timed out after ", timeout.count(), " ms waiting for ", keys.size(), " key(s)");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  bool has(const std::string& key) { return check_({name(key)}); }

 private:
  std::string name(std::string key) const {
    std::replace(key.begin(), key.end(), '/', '_');
    return prefix_ + key;
  }
  gloo::rendezvous::Store& inner_;
  Check check_;
  bool poll_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

// Gloo's RedisStore under one run's prefix. Keys stay in Redis after a job
// (and Gloo sets them with SETNX, so a key cannot be set twice): every job
// needs its own run id. One hiredis connection is not thread-safe, hence the lock.
class RedisRunStore : public gloo::rendezvous::Store {
 public:
  RedisRunStore(const std::string& host, int port, std::string prefix)
      : redis_(host, port), prefix_(std::move(prefix)), where_(host + ":" + std::to_string(port)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    std::lock_guard<std::mutex> lock(mutex_);
    answered([&] { redis_.set(prefix_ + key, data); });
  }
  std::vector<char> get(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<char> value;
    answered([&] { value = redis_.get(prefix_ + key); });
    return value;
  }
  // Waits are TimedStore's polls of check(); these are never reached.
  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!check(keys)) {
      TINY_CHECK(std::chrono::steady_clock::now() < deadline, distributed::DistributedError,
                 "rendezvous: timed out after ", timeout.count(), " ms waiting for ", keys.size(), " key(s) in Redis");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  bool check(const std::vector<std::string>& keys) {
    std::vector<std::string> named;
    for (const auto& k : keys) named.push_back(prefix_ + k);
    std::lock_guard<std::mutex> lock(mutex_);
    bool found = false;
    answered([&] { found = redis_.check(named); });
    return found;
  }

 private:
  // Runs one Redis command; a refusal (Gloo throws its own exceptions) becomes a DistributedError naming the server.
  template <typename F>
  void answered(F&& command) {
    try {
      command();
    } catch (const std::exception& e) {
      const std::string said = e.what();
      TINY_THROW(distributed::DistributedError, "rendezvous: the Redis server at ", where_, " refused a command: ",
                 said.substr(0, 200), said.size() > 200 ? "..." : "",
                 said.find("protected mode") != std::string::npos
                     ? " (a Redis server reached from other machines needs `--protected-mode no` or a password)"
                     : "");
    }
  }

  gloo::rendezvous::RedisStore redis_;
  std::string prefix_;
  std::string where_;
  std::mutex mutex_;
};

// The TCP store behind Gloo's Store interface.
class GlooTCPStore : public gloo::rendezvous::Store {
 public:
  explicit GlooTCPStore(std::shared_ptr<TCPStore> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& data) override { store_->set(key, data); }
  std::vector<char> get(const std::string& key) override { return store_->get(key); }
  void wait(const std::vector<std::string>& keys) override { store_->wait(keys, store_->timeout()); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  std::shared_ptr<TCPStore> store_;
};

struct Address {
  std::string host;
  int port = 0;
};

Address parse_host_port(const std::string& text, const std::string& what) {
  size_t colon = text.rfind(':');
  TINY_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < text.size(), ValueError,
             "init_process_group: expected HOST:PORT in ", what, ", got '", text, "'");
  Address a{text.substr(0, colon), 0};
  const std::string port = text.substr(colon + 1);
  TINY_CHECK(std::all_of(port.begin(), port.end(), ::isdigit) && port.size() <= 5, ValueError,
             "init_process_group: the port in ", what, " '", text, "' is not a number");
  a.port = std::stoi(port);
  return a;
}

// Backend "nccl" needs a real GPU behind tiny's `cuda` tensors and the NCCL
// library; both are checked before the rendezvous, so that a wrong backend
// fails at once on every rank instead of at the timeout of the others.
void check_nccl() {
  bool real_gpu = false;
  for (int i = 0; i < cuda::device_count(); ++i) real_gpu = real_gpu || !cuda::is_emulated(i);
  TINY_CHECK(real_gpu, distributed::DistributedError,
             "init_process_group: backend \"nccl\" needs real NVIDIA GPUs, but this machine has ",
             cuda::device_count() == 0 ? std::string("none") : std::string("only the emulated GPU"),
             "; use backend \"gloo\" (it runs on the CPU and on the emulated GPU)");
  (void)nccl_version();  // loads libnccl: a DistributedError naming the library and the fix
}

// The address this rank's Gloo device listens on: loopback when the
// rendezvous is on this machine (or is a directory and every rank is here, as
// LOCAL_WORLD_SIZE from tinyrun says), else the host's name.
std::string host_for_gloo(const std::string& master, int world_size) {
  if (const char* h = env("TINY_GLOO_HOSTNAME")) return h;
  const int local_world = env_first({"LOCAL_WORLD_SIZE"}, world_size);
  if (master.empty() ? local_world >= world_size : master == "localhost" || master.rfind("127.", 0) == 0)
    return "127.0.0.1";
  char name[256] = {0};
  ::gethostname(name, sizeof name - 1);
  return name;
}


// The backend's name in lower case; throws for one that is neither Gloo nor
// NCCL, or NCCL where it cannot run.
std::string checked_backend(const std::string& backend_name) {
  std::string backend = backend_name;
  std::transform(backend.begin(), backend.end(), backend.begin(), ::tolower);
  TINY_CHECK(backend == "gloo" || backend == "nccl", ValueError, "Invalid backend: '", backend_name,
             "' (use \"gloo\" for the CPU and the emulated GPU, \"nccl\" for real GPUs)");
  if (backend == "nccl") check_nccl();
  return backend;
}

// Gloo writes to its sockets with writev(): a peer that died would kill this
// process with SIGPIPE instead of giving an error that names it. Python
// ignores SIGPIPE, so PyTorch never meets this; a C++ program must.
void ignore_sigpipe() {
  struct sigaction previous {};
  if (::sigaction(SIGPIPE, nullptr, &previous) == 0 && previous.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
}

// The rank and world size not passed (-1), from the environment: tinyrun's,
// mpirun's or SLURM's.
void find_rank_and_size(int& rank, int& world_size) {
  if (rank < 0) rank = env_first({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}, -1);
  if (world_size < 0) world_size = env_first({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, -1);
  TINY_CHECK(rank >= 0 && world_size >= 1, ValueError, "init_process_group: rank ", rank, " and world_size ",
             world_size,
             " are not known: pass them, or set RANK and WORLD_SIZE (tinyrun does), or start under mpirun or srun");
  TINY_CHECK(rank < world_size, ValueError, "init_process_group: rank ", rank, " is not below world_size ",
             world_size);
}

// The rendezvous store the init method names, and what the join needs to know of it.
struct Rendezvous {
  std::string method;  // the init method, TINY_INIT_METHOD's for "env://" under tinyrun
  std::vector<std::shared_ptr<void>> keep_alive;
  std::shared_ptr<gloo::rendezvous::Store> base;
  std::shared_ptr<TCPStore> tcp;
  bool file_store = false;  // a store of files or Redis: waits poll check(), and an earlier run's keys stay
  std::string used_before;  // what the message says when this rank's key is already there
  TimedStore::Check check;
  std::string master;
};

// env:// (MASTER_ADDR, MASTER_PORT) or tcp://HOST:PORT: a TCP store that
// tinyrun or rank 0 serves.
void open_tcp_store(Rendezvous& rv, int rank, std::chrono::milliseconds timeout) {
  Address a;
  if (rv.method == "env://") {
    const char* addr = env("MASTER_ADDR");
    const char* port = env("MASTER_PORT");
    TINY_CHECK(addr && port, ValueError, "init_process_group(init_method=\"env://\"): MASTER_ADDR and MASTER_PORT ",
               "must be set (tinyrun sets them; by hand: MASTER_ADDR=127.0.0.1 MASTER_PORT=29500)");
    a = parse_host_port(std::string(addr) + ":" + port, "MASTER_ADDR:MASTER_PORT");
  } else {
    a = parse_host_port(rv.method.substr(6), "the init_method");
  }
  rv.master = a.host;
  // tinyrun serves the store (as torchrun's agent does); started by hand, rank 0 serves it.
  const char* agent = env("TINY_USE_AGENT_STORE");
  if (rank == 0 && !(agent && std::string(agent) == "1"))
    rv.keep_alive.push_back(std::make_shared<TCPStoreServer>("0.0.0.0", a.port));
  auto tcp = std::make_shared<TCPStore>(a.host, a.port, timeout);
  rv.tcp = tcp;
  tcp->register_rank(rank);
  rv.base = std::make_shared<GlooTCPStore>(tcp);
  rv.check = [tcp](const std::vector<std::string>& keys) { return tcp->check(keys); };
}

// file:///DIR: a directory every rank shares.
void open_file_store(Rendezvous& rv) {
  const std::string dir = rv.method.substr(7);
  TINY_CHECK(!dir.empty(), ValueError, "init_process_group: file:// needs a directory, e.g. file:///tmp/rdzv_run1");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  TINY_CHECK(std::filesystem::is_directory(dir), distributed::DistributedError, "init_process_group: cannot create the ",
             "rendezvous directory '", dir, "'");
  auto files = std::make_shared<CheckableFileStore>(dir);
  rv.check = [files](const std::vector<std::string>& keys) { return files->check(keys); };
  rv.base = files;
  rv.file_store = true;
  rv.used_before = "the rendezvous directory '" + dir + "'";
}

// redis://HOST[:PORT]/RUN_ID, served by a Redis server (Gloo's RedisStore).
void open_redis_store(Rendezvous& rv) {
  const std::string rest = rv.method.substr(8);
  const size_t slash = rest.find('/');
  TINY_CHECK(slash != std::string::npos && slash > 0 && slash + 1 < rest.size(), ValueError,
             "init_process_group: init_method '", rv.method, "' needs a host and a run id, "
             "redis://HOST[:PORT]/RUN_ID, e.g. redis://127.0.0.1:6379/job42 (a fresh run id for every job, as "
             "torchrun's --rdzv-id: the keys stay in Redis after a job)");
  const std::string hostport = rest.substr(0, slash);
  const std::string run_id = rest.substr(slash + 1);
  Address a = hostport.find(':') == std::string::npos ? Address{hostport, 6379}
                                                      : parse_host_port(hostport, "the init_method");
  std::shared_ptr<RedisRunStore> redis;
  try {
    redis = std::make_shared<RedisRunStore>(a.host, a.port, "tiny/" + run_id + "/");
  } catch (const std::exception& e) {
    TINY_THROW(distributed::DistributedError, "init_process_group: cannot reach Redis at ", a.host, ":", a.port,
               " (", e.what(), "): is redis-server running there? (init_method '", rv.method, "')");
  }
  rv.check = [redis](const std::vector<std::string>& keys) { return redis->check(keys); };
  rv.master = a.host;
  rv.base = redis;
  rv.file_store = true;  // polled waits, and keys that must be fresh
  rv.used_before = "Redis already holds run id '" + run_id + "'";
}

Rendezvous open_rendezvous(const std::string& init_method, int rank, std::chrono::milliseconds timeout) {
  Rendezvous rv;
  // tinyrun --rdzv redis://... or file://... hands its URL to "env://" this way.
  const char* agent_method = env("TINY_INIT_METHOD");
  rv.method = init_method == "env://" && agent_method && *agent_method ? agent_method : init_method;
  if (rv.method == "env://" || rv.method.rfind("tcp://", 0) == 0) {
    open_tcp_store(rv, rank, timeout);
  } else if (rv.method.rfind("file://", 0) == 0) {
    open_file_store(rv);
  } else if (rv.method.rfind("redis://", 0) == 0) {
    open_redis_store(rv);
  } else {
    TINY_THROW(ValueError, "init_process_group: unknown init_method '", rv.method,
               "' (use env://, tcp://HOST:PORT, file:///path/to/fresh/dir or redis://HOST:PORT)");
  }
  rv.keep_alive.push_back(rv.base);
  return rv;
}

// Waits until every rank has joined; throws naming those that did not within the timeout.
void wait_for_every_rank(TimedStore& store, int rank, int world_size, std::chrono::milliseconds timeout) {
  std::vector<std::string> missing;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    missing.clear();
    for (int r = 0; r < world_size; ++r)
      if (!store.has("join." + std::to_string(r))) missing.push_back(std::to_string(r));
    if (missing.empty() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!missing.empty()) {
    std::string names;
    for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
    TINY_THROW(distributed::DistributedError, "init_process_group: rank", missing.size() > 1 ? "s " : " ", names,
               missing.size() > 1 ? " never joined" : " never joined", " the process group of ", world_size,
               " within the timeout of ", timeout.count(), " ms (rank ", rank,
               " waited for it): did every process start, with the same WORLD_SIZE and rendezvous?");
  }
}

// The join: every rank publishes where it runs (its host and pid, which errors
// name later) and waits for the others; returns where each runs.
std::vector<PeerInfo> join(TimedStore& store, const Rendezvous& rv, int rank, int world_size,
                           std::chrono::milliseconds timeout) {
  const std::string my_key = "join." + std::to_string(rank);
  TINY_CHECK(!(rv.file_store && store.has(my_key)), distributed::DistributedError, "init_process_group: ",
             rv.used_before, " with the keys of an earlier run (rank ", rank, " already joined there): use a fresh ",
             rv.method.rfind("redis://", 0) == 0 ? "run id" : "directory", " for every run");
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  std::string me = std::string(host) + "\n" + std::to_string(::getpid());
  store.set(my_key, std::vector<char>(me.begin(), me.end()));
  wait_for_every_rank(store, rank, world_size, timeout);
  std::vector<PeerInfo> peers(world_size);
  for (int r = 0; r < world_size; ++r) {
    auto bytes = store.get("join." + std::to_string(r));
    std::string text(bytes.begin(), bytes.end());
    size_t nl = text.find('\n');
    peers[r].host = text.substr(0, nl);
    if (nl != std::string::npos) peers[r].pid = std::atol(text.c_str() + nl + 1);
  }
  return peers;
}

// Gloo's full mesh: a connection from every rank to every other.
std::shared_ptr<gloo::rendezvous::Context> connect_full_mesh(Rendezvous& rv, int rank, int world_size,
                                                             std::chrono::milliseconds timeout) {
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, world_size);
  context->setTimeout(timeout);
  gloo::transport::tcp::attr attr;
  if (const char* iface = env("GLOO_SOCKET_IFNAME"))
    attr.iface = iface;
  else
    attr.hostname = host_for_gloo(rv.master, world_size);
  try {
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto mesh_store = std::make_shared<TimedStore>(*rv.base, rv.check, rv.file_store, "gloo.", timeout);
    rv.keep_alive.push_back(mesh_store);
    context->connectFullMesh(*mesh_store, device);
  } catch (const distributed::DistributedError&) {
    throw;
  } catch (const std::exception& e) {
    TINY_THROW(distributed::DistributedError, "init_process_group: rank ", rank, " could not connect to its peers: ", e.what());
  }
  return context;
}

// NCCL's communicator: rank 0 makes the unique id and shares it through the
// same store; each rank joins on its current device (set_device(local_rank())
// is the caller's job, as in PyTorch).
void attach_nccl(ProcessGroup& group, TimedStore& store, int rank, int world_size, std::chrono::milliseconds timeout) {
  std::vector<char> id;
  if (rank == 0) {
    id = nccl_unique_id();
    store.set("nccl/unique_id", id);
  } else {
    id = store.get("nccl/unique_id");
  }
  NcclSetup setup;
  setup.rank = rank;
  setup.size = world_size;
  setup.device = cuda::current_device();
  setup.timeout = timeout;
  ProcessGroup* const named = &group;
  setup.lost_peers = [named] { return named->lost_peers(); };
  group.attach_nccl(nccl_create_group(id, setup));
}
}  // namespace

ProcessGroup& default_group() {
  TINY_CHECK(g_group, distributed::DistributedError,
             "Default process group has not been initialized, please make sure to call init_process_group.");
  return *g_group;
}

}  // namespace detail

std::chrono::milliseconds default_timeout() {
  if (const char* value = std::getenv("TINY_DIST_TIMEOUT")) {
    char* end = nullptr;
    double seconds = std::strtod(value, &end);
    TINY_CHECK(end && *end == '\0' && seconds > 0, ValueError, "TINY_DIST_TIMEOUT='", value,
               "' is not a positive number of seconds");
    return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  }
  return std::chrono::minutes(5);
}

int local_rank() {
  return detail::env_first({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}, 0);
}

void init_process_group(const std::string& backend_name, const std::string& init_method, int world_size, int rank,
                        std::chrono::milliseconds timeout) {
  using namespace detail;
  TINY_CHECK(!g_group, distributed::DistributedError, "trying to initialize the default process group twice!");
  reset_collective_counts();  // a new group counts its own collectives
  const std::string backend = checked_backend(backend_name);
  if (timeout.count() <= 0) timeout = default_timeout();
  ignore_sigpipe();
  find_rank_and_size(rank, world_size);

  Rendezvous rv = open_rendezvous(init_method, rank, timeout);
  TimedStore store(*rv.base, rv.check, rv.file_store, "tiny.", timeout);
  std::vector<PeerInfo> peers = join(store, rv, rank, world_size, timeout);
  auto context = connect_full_mesh(rv, rank, world_size, timeout);
  // A store barrier after the mesh (PyTorch's _store_based_barrier): no rank
  // may leave before every rank has finished connecting to it.
  store.set("ready." + std::to_string(rank), {'1'});
  std::vector<std::string> ready;
  for (int r = 0; r < world_size; ++r) ready.push_back("ready." + std::to_string(r));
  store.wait(ready, timeout);
  // Where the ranks compare their calls after a collective failed (see ProcessGroup::diagnose).
  auto call_store = std::make_shared<TimedStore>(*rv.base, rv.check, rv.file_store, "coll.", timeout);
  rv.keep_alive.push_back(call_store);
  auto group = std::make_unique<ProcessGroup>(context, std::move(peers), backend, timeout, rv.tcp, call_store,
                                              std::move(rv.keep_alive));
  if (backend == "nccl") attach_nccl(*group, store, rank, world_size, timeout);
  // The ranks' modelled clocks start together (DESIGN.md 4a, "Several
  // processes"): each process's clock began at 0 when it started, and a rank
  // that did more before joining is ahead; all take the latest. On a real GPU
  // there is no modelled clock to agree on, and the extra collective would
  // keep a rank that is done with the store waiting on one stuck in NCCL's set-up.
  if (!gpu::device_runtime_is_cuda()) gpu::model::host_wait_until(group->agree_on_time(gpu::model::host_now()));
  g_group = std::move(group);
}

bool is_initialized() { return detail::g_group != nullptr; }
int get_rank() { return detail::default_group().rank(); }
int get_world_size() { return detail::default_group().size(); }
std::string get_backend() { return detail::default_group().backend(); }

void destroy_process_group() {
  TINY_CHECK(detail::g_group, distributed::DistributedError,
             "destroy_process_group: there is no process group (init_process_group was not called, or it was "
             "destroyed already)");
  detail::g_group.reset();
}

}  // namespace tiny::distributed
