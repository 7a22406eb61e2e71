// The TCP key-value store: a server with one thread per client and a blocking
// client. Wire format, both ways little-endian on the hosts we run on:
//   request:  op (1 byte) | number (int64) | count (uint32) | count x (len uint32 | bytes)
//   response: status (1 byte: 0 ok, 1 missing/timeout) | len (uint32) | bytes
#include "tiny/distributed/store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace tiny::distributed {
namespace {

bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool read_string(int fd, std::string& out) {
  uint32_t len = 0;
  if (!read_all(fd, &len, sizeof len) || len > (64u << 20)) return false;
  out.resize(len);
  return len == 0 || read_all(fd, out.data(), len);
}

bool send_response(int fd, char status, const std::string& payload) {
  std::string msg(1, status);
  uint32_t len = static_cast<uint32_t>(payload.size());
  msg.append(reinterpret_cast<const char*>(&len), sizeof len);
  msg += payload;
  return write_all(fd, msg.data(), msg.size());
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

}  // namespace

// ---- server ------------------------------------------------------------------

struct TCPStoreServer::State {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, std::string> data;
  std::set<int> lost;  // ranks whose registered connection closed
  bool stopping = false;
  int listen_fd = -1;
  int wake[2] = {-1, -1};
  int port = 0;
  std::vector<int> clients;
  std::vector<std::thread> threads;
  std::thread acceptor;

  std::vector<std::string> missing(const std::vector<std::string>& keys) {
    std::vector<std::string> out;
    for (const auto& k : keys)
      if (!data.count(k)) out.push_back(k);
    return out;
  }

  void serve(int fd) {
    int rank = -1;
    for (;;) {
      char op = 0;
      int64_t number = 0;
      uint32_t count = 0;
      if (!read_all(fd, &op, 1) || !read_all(fd, &number, sizeof number) || !read_all(fd, &count, sizeof count) ||
          count > 1u << 20)
        break;
      std::vector<std::string> strings(count);
      bool ok = true;
      for (auto& s : strings) ok = ok && read_string(fd, s);
      if (!ok) break;
      char status = 0;
      std::string payload;
      std::unique_lock<std::mutex> lock(mutex);
      switch (op) {
        case 'S':
          if (strings.size() == 2) data[strings[0]] = strings[1];
          changed.notify_all();
          break;
        case 'G':
        case 'W': {
          auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(number);
          changed.wait_until(lock, deadline, [&] { return stopping || missing(strings).empty(); });
          auto absent = missing(strings);
          if (!absent.empty()) {
            status = 1;
            payload = join(absent, "\n");
          } else if (op == 'G' && !strings.empty()) {
            payload = data[strings[0]];
          }
          break;
        }
        case 'A': {
          int64_t value = 0;
          if (!strings.empty()) {
            auto it = data.find(strings[0]);
            if (it != data.end()) value = std::stoll(it->second);
            value += number;
            data[strings[0]] = std::to_string(value);
            changed.notify_all();
          }
          payload.assign(reinterpret_cast<const char*>(&value), sizeof value);
          break;
        }
        case 'C':
          status = missing(strings).empty() ? 0 : 1;
          break;
        case 'R':
          rank = static_cast<int>(number);
          lost.erase(rank);
          break;
        case 'L': {
          std::vector<std::string> ranks;
          for (int r : lost) ranks.push_back(std::to_string(r));
          payload = join(ranks, ",");
          break;
        }
        default:
          status = 2;
      }
      lock.unlock();
      if (!send_response(fd, status, payload)) break;
    }
    std::lock_guard<std::mutex> lock(mutex);
    if (rank >= 0 && !stopping) lost.insert(rank);
    changed.notify_all();
  }

  void accept_loop() {
    for (;;) {
      pollfd fds[2] = {{listen_fd, POLLIN, 0}, {wake[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents) return;
      int fd = ::accept(listen_fd, nullptr, nullptr);
      if (fd < 0) continue;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::lock_guard<std::mutex> lock(mutex);
      if (stopping) {
        ::close(fd);
        return;
      }
      clients.push_back(fd);
      threads.emplace_back([this, fd] { serve(fd); });
    }
  }
};

TCPStoreServer::TCPStoreServer(const std::string& host, int port) : state_(std::make_shared<State>()) {
  TINY_CHECK(port >= 0 && port < 65536, ValueError, "TCPStoreServer: port ", port, " is not in 0..65535");
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  TINY_CHECK(rc == 0 && found, distributed::DistributedError, "TCPStoreServer: cannot resolve host '", host,
             "': ", ::gai_strerror(rc));
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  rc = ::bind(fd, found->ai_addr, found->ai_addrlen);
  int err = errno;
  ::freeaddrinfo(found);
  if (rc != 0 || ::listen(fd, 128) != 0) {
    ::close(fd);
    TINY_THROW(distributed::DistributedError, "TCPStoreServer: cannot listen on ", host, ":", port, ": ", std::strerror(err),
               " (is another run using this port? pick another MASTER_PORT)");
  }
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  state_->listen_fd = fd;
  state_->port = ntohs(bound.sin_port);
  TINY_CHECK(::pipe2(state_->wake, O_CLOEXEC) == 0, distributed::DistributedError, "TCPStoreServer: pipe failed");
  State* s = state_.get();
  state_->acceptor = std::thread([s] { s->accept_loop(); });
}

TCPStoreServer::~TCPStoreServer() {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stopping = true;
    for (int fd : s.clients) ::shutdown(fd, SHUT_RDWR);
    s.changed.notify_all();
  }
  char byte = 1;
  (void)!::write(s.wake[1], &byte, 1);
  s.acceptor.join();
  for (auto& t : s.threads) t.join();
  for (int fd : s.clients) ::close(fd);
  ::close(s.listen_fd);
  ::close(s.wake[0]);
  ::close(s.wake[1]);
}

int TCPStoreServer::port() const { return state_->port; }

// ---- client ------------------------------------------------------------------

struct TCPStore::Lock {
  std::mutex mutex;
};

TCPStore::TCPStore(const std::string& host, int port, std::chrono::milliseconds timeout)
    : address_(host + ":" + std::to_string(port)), timeout_(timeout), lock_(std::make_unique<Lock>()) {
  TINY_CHECK(port > 0 && port < 65536, ValueError, "TCPStore: port ", port,
             " is not in 1..65535 (set MASTER_PORT to a free port, e.g. 29500)");
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last_error = "no answer";
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (rc != 0) {
      last_error = ::gai_strerror(rc);
    } else {
      int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
        ::freeaddrinfo(found);
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fd_ = fd;
        return;
      }
      last_error = std::strerror(errno);
      ::close(fd);
      ::freeaddrinfo(found);
    }
    if (std::chrono::steady_clock::now() + pause > deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
  TINY_THROW(distributed::DistributedError, "TCPStore: could not reach the rendezvous store at ", address_, " within ",
             timeout.count(), " ms (", last_error,
             "): is MASTER_ADDR/MASTER_PORT right, and is rank 0 (or tinyrun) running?");
}

TCPStore::~TCPStore() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<char> TCPStore::request(char op, const std::vector<std::string>& strings, int64_t number) {
  std::lock_guard<std::mutex> lock(lock_->mutex);
  std::string msg(1, op);
  msg.append(reinterpret_cast<const char*>(&number), sizeof number);
  uint32_t count = static_cast<uint32_t>(strings.size());
  msg.append(reinterpret_cast<const char*>(&count), sizeof count);
  for (const auto& s : strings) {
    uint32_t len = static_cast<uint32_t>(s.size());
    msg.append(reinterpret_cast<const char*>(&len), sizeof len);
    msg += s;
  }
  char status = 0;
  std::string payload;
  bool ok = write_all(fd_, msg.data(), msg.size()) && read_all(fd_, &status, 1) && read_string(fd_, payload);
  TINY_CHECK(ok, distributed::DistributedError, "TCPStore: lost the connection to the rendezvous store at ", address_,
             " (the launcher or rank 0 that serves it has exited)");
  std::vector<char> out(1 + payload.size());
  out[0] = status;
  if (!payload.empty()) std::memcpy(out.data() + 1, payload.data(), payload.size());
  return out;
}

void TCPStore::set(const std::string& key, const std::vector<char>& value) {
  request('S', {key, std::string(value.begin(), value.end())}, 0);
}

std::vector<char> TCPStore::get(const std::string& key) {
  auto reply = request('G', {key}, timeout_.count());
  TINY_CHECK(reply[0] == 0, distributed::DistributedError, "TCPStore: key '", key, "' was not set within ", timeout_.count(),
             " ms");
  return std::vector<char>(reply.begin() + 1, reply.end());
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  auto reply = request('A', {key}, delta);
  int64_t value = 0;
  if (reply.size() == 1 + sizeof value) std::memcpy(&value, reply.data() + 1, sizeof value);
  return value;
}

bool TCPStore::check(const std::vector<std::string>& keys) { return request('C', keys, 0)[0] == 0; }

void TCPStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  auto reply = request('W', keys, timeout.count());
  TINY_CHECK(reply[0] == 0, distributed::DistributedError, "TCPStore: timed out after ", timeout.count(),
             " ms waiting for keys: ", std::string(reply.begin() + 1, reply.end()));
}

void TCPStore::register_rank(int rank) { request('R', {}, rank); }

std::vector<int> TCPStore::lost_ranks() {
  auto reply = request('L', {}, 0);
  std::vector<int> out;
  std::string text(reply.begin() + 1, reply.end());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    out.push_back(std::stoi(text.substr(pos, comma - pos)));
    pos = comma + 1;
  }
  return out;
}

}  // namespace tiny::distributed
