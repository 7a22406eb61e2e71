// tinyrun: starts the ranks of a distributed run, as PyTorch's torchrun does.
//
//   tinyrun --nproc-per-node 2 ./train --epochs 3
//   tinyrun --nproc-per-node 4 --nnodes 2 --node-rank 0 --rdzv tcp://10.0.0.1:29500 ./train
//   tinyrun --nproc-per-node 4 --nnodes 2 --node-rank 1 --rdzv redis://10.0.0.9/job42 ./train
//   tinyrun --nproc-per-node 4 --nnodes 2 --node-rank 1 --rdzv file:///shared/rdzv/job42 ./train
//
// Each rank gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE and GROUP_RANK.
// With tcp:// (and with no --rdzv) node 0's tinyrun serves the rendezvous
// store, and the ranks get MASTER_ADDR and MASTER_PORT (TINY_USE_AGENT_STORE=1
// tells them not to serve one themselves). With redis:// or file:// the
// ranks meet in that Redis server or shared directory: they get the URL as
// TINY_INIT_METHOD, which init_process_group's "env://" then uses. Every
// output line is prefixed with its rank. When a rank fails, the others get a
// moment to report, then are stopped, and tinyrun exits non-zero naming the
// first rank that failed, with its last lines of error output. A rank that
// exits with status 0 while others still run is not stopped for: its peers'
// next collective fails (at once when its sockets close, at the latest after
// the collective timeout), and the report then names the rank that left early.
// --timeout sets that collective timeout; tinyrun has no overall deadline.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tiny/distributed/store.h"

extern char** environ;

namespace {

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

struct Stream {
  int fd = -1;
  std::string partial;
  FILE* out = nullptr;
};

struct Rank {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  Stream streams[2];
  std::deque<std::string> last_errors;  // the last lines it wrote to stderr
};

// "rank 0", "ranks 0, 2": the ranks in `ranks` that were still running.
std::string running_names(const std::vector<int>& ranks) {
  std::string names;
  for (int r : ranks) names += (names.empty() ? "" : ", ") + std::to_string(r);
  return (ranks.size() == 1 ? "rank " : "ranks ") + names + (ranks.size() == 1 ? " was" : " were");
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return std::string("was killed by signal ") + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

void emit(Rank& r, int which, const std::string& line) {
  std::fprintf(r.streams[which].out, "[rank%d]: %s\n", r.rank, line.c_str());
  std::fflush(r.streams[which].out);
  if (which == 1) {
    r.last_errors.push_back(line);
    if (r.last_errors.size() > 10) r.last_errors.pop_front();
  }
}

// Reads what is available; false at end of stream.
bool pump(Rank& r, int which) {
  Stream& s = r.streams[which];
  char buffer[4096];
  ssize_t n = ::read(s.fd, buffer, sizeof buffer);
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) {
    if (!s.partial.empty()) emit(r, which, s.partial);
    s.partial.clear();
    ::close(s.fd);
    s.fd = -1;
    return false;
  }
  s.partial.append(buffer, static_cast<size_t>(n));
  size_t nl;
  while ((nl = s.partial.find('\n')) != std::string::npos) {
    emit(r, which, s.partial.substr(0, nl));
    s.partial.erase(0, nl + 1);
  }
  return true;
}

struct Options {
  int nproc = 0, nnodes = 1, node_rank = 0;
  std::string rdzv;
  double timeout = 0, grace = 2.0;
  std::vector<std::string> command;  // the program and its arguments
};

void add_options(CLI::App& app, Options& o) {
  app.add_option("--nproc-per-node,--nproc_per_node", o.nproc, "processes (ranks) on this machine")
      ->required()
      ->check(CLI::Range(1, 1024));
  app.add_option("--nnodes", o.nnodes, "machines in the run")->check(CLI::Range(1, 4096));
  app.add_option("--node-rank,--node_rank", o.node_rank, "this machine's index, 0..nnodes-1")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rdzv,--rdzv-endpoint", o.rdzv,
                 "where the ranks meet (needed with --nnodes > 1): tcp://HOST:PORT of node 0, whose tinyrun serves the "
                 "store there; redis://HOST[:PORT]/RUN_ID, a Redis server; or file:///DIR, a directory every node "
                 "shares (a fresh RUN_ID or DIR for every run)");
  app.add_option("--timeout", o.timeout,
                 "seconds every collective and the rendezvous may wait (sets TINY_DIST_TIMEOUT; not a deadline for "
                 "the whole run)")
      ->check(CLI::PositiveNumber);
  app.add_option("--stop-grace", o.grace, "seconds the other ranks get to report after one failed, before being stopped")
      ->check(CLI::NonNegativeNumber);
  app.prefix_command();
}

// The checks CLI11 cannot make: they involve several options.
bool options_fit_together(const Options& o) {
  if (o.command.empty()) {
    std::cerr << "tinyrun: no program given: tinyrun --nproc-per-node N program [args...]\n";
    return false;
  }
  if (o.node_rank >= o.nnodes) {
    std::cerr << "tinyrun: --node-rank " << o.node_rank << " must be below --nnodes " << o.nnodes << "\n";
    return false;
  }
  if (o.nnodes > 1 && o.rdzv.empty()) {
    std::cerr << "tinyrun: --nnodes " << o.nnodes
              << " needs --rdzv: tcp://HOST:PORT (node 0's address), redis://HOST[:PORT]/RUN_ID or file:///SHARED/DIR\n";
    return false;
  }
  return true;
}

// The rendezvous: with tcp://, node 0 serves the store and every rank
// connects to it; redis:// and file:// stores are there already.
struct Rendezvous {
  bool external_store = false;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
};

// Parses --rdzv into `rv`; false (having said why) when it is not one of the three forms.
bool parse_rendezvous(const std::string& rdzv, Rendezvous& rv) {
  rv.external_store = rdzv.rfind("redis://", 0) == 0 || rdzv.rfind("file://", 0) == 0;
  if (rdzv.find("://") != std::string::npos && !rv.external_store && rdzv.rfind("tcp://", 0) != 0) {
    std::cerr << "tinyrun: --rdzv '" << rdzv
              << "' has an unknown scheme: use tcp://HOST:PORT, redis://HOST[:PORT]/RUN_ID or file:///SHARED/DIR\n";
    return false;
  }
  if ((rdzv.rfind("file://", 0) == 0 && rdzv.size() == 7) ||
      (rdzv.rfind("redis://", 0) == 0 && rdzv.find('/', 8) == std::string::npos)) {
    std::cerr << "tinyrun: --rdzv '" << rdzv
              << "' is incomplete: redis://HOST[:PORT]/RUN_ID needs a run id, file:///DIR a directory\n";
    return false;
  }
  if (!rdzv.empty() && !rv.external_store) {
    std::string hostport = rdzv.rfind("tcp://", 0) == 0 ? rdzv.substr(6) : rdzv;
    size_t colon = hostport.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      std::cerr << "tinyrun: --rdzv '" << rdzv << "' is not tcp://HOST:PORT\n";
      return false;
    }
    rv.master_addr = hostport.substr(0, colon);
    rv.master_port = std::atoi(hostport.c_str() + colon + 1);
  }
  return true;
}

// This process's environment less the variables tinyrun sets, plus those for
// rank `r`.
std::vector<std::string> rank_environment(const Options& o, const Rendezvous& rv, const Rank& r) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    for (const char* ours : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
                             "MASTER_PORT", "TINY_USE_AGENT_STORE", "TINY_INIT_METHOD"})
      if (name == ours) name.clear();
    if (o.timeout > 0 && name == "TINY_DIST_TIMEOUT") name.clear();
    if (!name.empty()) env_strings.push_back(entry);
  }
  auto set = [&](const char* name, const std::string& value) { env_strings.push_back(std::string(name) + "=" + value); };
  set("RANK", std::to_string(r.rank));
  set("LOCAL_RANK", std::to_string(r.local_rank));
  set("WORLD_SIZE", std::to_string(o.nproc * o.nnodes));
  set("LOCAL_WORLD_SIZE", std::to_string(o.nproc));
  set("GROUP_RANK", std::to_string(o.node_rank));
  if (rv.external_store) {
    set("TINY_INIT_METHOD", o.rdzv);
  } else {
    set("MASTER_ADDR", rv.master_addr);
    set("MASTER_PORT", std::to_string(rv.master_port));
    set("TINY_USE_AGENT_STORE", "1");
  }
  if (o.timeout > 0) set("TINY_DIST_TIMEOUT", std::to_string(o.timeout));
  // As torchrun sets OMP_NUM_THREADS: the ranks of one machine share its cores.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (!std::getenv("TINY_NUM_THREADS")) set("TINY_NUM_THREADS", std::to_string(std::max(1u, cores / o.nproc)));
  return env_strings;
}

// Forks and execs `command` as rank `r`, its stdout and stderr into pipes
// that r.streams read; false (having said why) when the pipes cannot be made.
bool start_rank(Rank& r, std::vector<std::string> command, std::vector<std::string> env_strings) {
  // Everything the child needs is built before fork(): the store's threads
  // run in this process, so the child may only exec.
  std::vector<char*> envp, args;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  for (auto& a : command) args.push_back(a.data());
  args.push_back(nullptr);
  std::string exec_error = "tinyrun: cannot start '" + command[0] + "'\n";

  int pipes[2][2];
  if (::pipe2(pipes[0], O_CLOEXEC) != 0 || ::pipe2(pipes[1], O_CLOEXEC) != 0) {
    std::perror("tinyrun: pipe");
    return false;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipes[0][1], 1);
    ::dup2(pipes[1][1], 2);
    ::execvpe(args[0], args.data(), envp.data());
    (void)!::write(2, exec_error.data(), exec_error.size());
    ::_exit(127);
  }
  ::close(pipes[0][1]);
  ::close(pipes[1][1]);
  r.pid = pid;
  r.running = true;
  r.streams[0] = {pipes[0][0], "", stdout};
  r.streams[1] = {pipes[1][0], "", stderr};
  return true;
}

using Clock = std::chrono::steady_clock;

// What the supervision of the ranks has seen so far, and when it stops them.
struct Supervision {
  int failed = -1;  // index of the first rank that failed
  int left_early = -1;  // index of the first rank that exited with status 0 while others still ran
  std::vector<int> left_while;  // the ranks still running when it did
  Clock::time_point term_at{}, kill_at{};
  bool termed = false, killed = false;
  int forwarded = 0;  // the signal last forwarded to the ranks
};

// Waits up to 50 ms for output and passes on what came; false once every
// stream is closed and every rank has ended.
bool pump_output(std::vector<Rank>& ranks) {
  std::vector<pollfd> fds;
  std::vector<std::pair<int, int>> owners;
  for (size_t i = 0; i < ranks.size(); ++i)
    for (int w = 0; w < 2; ++w)
      if (ranks[i].streams[w].fd >= 0) {
        fds.push_back({ranks[i].streams[w].fd, POLLIN, 0});
        owners.emplace_back(static_cast<int>(i), w);
      }
  bool any_running = false;
  for (auto& r : ranks) any_running = any_running || r.running;
  if (fds.empty() && !any_running) return false;
  int ready = fds.empty() ? 0 : ::poll(fds.data(), fds.size(), 50);
  if (fds.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (size_t k = 0; ready > 0 && k < fds.size(); ++k)
    if (fds[k].revents) pump(ranks[owners[k].first], owners[k].second);
  return true;
}

// Notes the ranks that ended since the last look: the first to fail (whose
// peers get `grace` seconds before being stopped) and the first to leave early.
void reap(std::vector<Rank>& ranks, Supervision& s, double grace) {
  // Reap first, then judge: of the ranks that ended since the last look, the
  // ones that succeeded most likely ended first (the others failed on it).
  std::vector<int> ended;
  for (size_t i = 0; i < ranks.size(); ++i) {
    Rank& r = ranks[i];
    if (r.running && ::waitpid(r.pid, &r.status, WNOHANG) == r.pid) ended.push_back(static_cast<int>(i));
  }
  auto succeeded = [&](int i) { return WIFEXITED(ranks[i].status) && WEXITSTATUS(ranks[i].status) == 0; };
  std::stable_partition(ended.begin(), ended.end(), succeeded);
  for (int i : ended) {
    ranks[i].running = false;
    if (succeeded(i) && s.left_early < 0 && s.failed < 0 && !s.termed) {
      for (auto& other : ranks)
        if (other.running) s.left_while.push_back(other.rank);
      if (!s.left_while.empty()) s.left_early = i;
    }
    if (!succeeded(i) && s.failed < 0 && !s.termed) {
      s.failed = i;
      s.term_at = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(grace * 1000));
    }
  }
}

// Passes a signal tinyrun got on to the ranks; after a failure's grace period
// sends them SIGTERM, and SIGKILL 3 s after either.
void stop_ranks_when_due(std::vector<Rank>& ranks, Supervision& s) {
  if (g_signal && s.forwarded != g_signal) {
    s.forwarded = g_signal;
    for (auto& r : ranks)
      if (r.running) ::kill(r.pid, g_signal);
    if (!s.termed) {
      s.termed = true;
      s.kill_at = Clock::now() + std::chrono::seconds(3);
    }
  }
  if (s.failed >= 0 && !s.termed && Clock::now() >= s.term_at) {
    s.termed = true;
    for (auto& r : ranks)
      if (r.running) ::kill(r.pid, SIGTERM);
    s.kill_at = Clock::now() + std::chrono::seconds(3);
  }
  if (s.termed && !s.killed && Clock::now() >= s.kill_at) {
    s.killed = true;
    for (auto& r : ranks)
      if (r.running) ::kill(r.pid, SIGKILL);
  }
}

// Names the rank that failed first, why, and its last error output.
void report_failure(const std::vector<Rank>& ranks, const Supervision& s) {
  const Rank& r = ranks[s.failed];
  if (s.left_early >= 0) {
    // The usual cause of the failure: ranks that run different numbers of collectives.
    const Rank& early = ranks[s.left_early];
    std::fprintf(stderr,
                 "tinyrun: rank %d exited (status 0) while %s still running; rank %d then failed%s%s\n"
                 "tinyrun: every rank must call the same collectives (do all ranks run the same number of "
                 "steps and batches?)\n",
                 early.rank, running_names(s.left_while).c_str(), r.rank, r.last_errors.empty() ? "" : ": ",
                 r.last_errors.empty() ? "" : r.last_errors.back().c_str());
  }
  std::fprintf(stderr, "tinyrun: rank %d (local rank %d, pid %d) %s: it failed first%s\n", r.rank, r.local_rank,
               static_cast<int>(r.pid), describe(r.status).c_str(), s.termed ? "; the other ranks were stopped" : "");
  if (!r.last_errors.empty()) {
    std::fprintf(stderr, "tinyrun: the last error output of rank %d:\n", r.rank);
    for (const auto& line : r.last_errors) std::fprintf(stderr, "  %s\n", line.c_str());
  }
  for (auto& other : ranks)
    if (&other != &r && !(WIFEXITED(other.status) && WEXITSTATUS(other.status) == 0))
      std::fprintf(stderr, "tinyrun: rank %d %s\n", other.rank, describe(other.status).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tinyrun: start the ranks of a distributed tiny program (like torchrun)"};
  Options o;
  add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  o.command = app.remaining();
  Rendezvous rv;
  if (!options_fit_together(o) || !parse_rendezvous(o.rdzv, rv)) return 2;
  std::unique_ptr<tiny::distributed::TCPStoreServer> server;
  if (o.node_rank == 0 && !rv.external_store) {
    try {
      server = std::make_unique<tiny::distributed::TCPStoreServer>("0.0.0.0", rv.master_port);
    } catch (const std::exception& e) {
      std::cerr << "tinyrun: " << e.what() << "\n";
      return 1;
    }
    rv.master_port = server->port();
  }

  struct sigaction action {};
  action.sa_handler = on_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  std::vector<Rank> ranks(o.nproc);
  for (int local = 0; local < o.nproc; ++local) {
    Rank& r = ranks[local];
    r.local_rank = local;
    r.rank = o.node_rank * o.nproc + local;
    if (!start_rank(r, o.command, rank_environment(o, rv, r))) return 1;
  }

  Supervision s;
  while (pump_output(ranks)) {
    reap(ranks, s, o.grace);
    stop_ranks_when_due(ranks, s);
  }

  if (s.failed >= 0) {
    report_failure(ranks, s);
    return 1;
  }
  if (g_signal) {
    std::fprintf(stderr, "tinyrun: interrupted by signal %d; the ranks were stopped\n", static_cast<int>(g_signal));
    return 128 + g_signal;
  }
  return 0;
}
