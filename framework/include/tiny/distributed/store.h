/// @file distributed/store.h
/// @brief A small TCP key-value store for the rendezvous of a process group (PyTorch's `TCPStore`).
///
/// Every rank writes how to reach it under a key and waits for the others'
/// keys: that is the whole rendezvous. Debian's Gloo ships a FileStore and a
/// RedisStore but no TCP store, so `tiny` has this one: one server (hosted by
/// `tinyrun`, as torchrun hosts c10d's, or by rank 0 when the processes are
/// started by hand) and one client per rank. Gets and waits block on the
/// server until the keys exist or the timeout passes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tiny/error.h"

namespace tiny::distributed {

/// @brief A failure of a collective or of the rendezvous: a peer gone, a timeout (PyTorch's `DistBackendError`).
class DistributedError : public Error {
 public:
  using Error::Error;
};

/// @brief The server side of the TCP store: holds the keys, answers every client (PyTorch's `TCPStore(is_master=True)`).
///
/// Serves from background threads until destroyed. It also notices when a
/// client that said which rank it is disconnects, so a rank that died can be named.
class TCPStoreServer {
 public:
  /// @brief Listens on `host`:`port` (port 0: a free port, see port()).
  ///
  /// Throws DistributedError when the address cannot be bound (the port is in use).
  explicit TCPStoreServer(const std::string& host = "0.0.0.0", int port = 0);
  /// @brief Stops serving and closes every connection.
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;
  /// @brief The port it listens on.
  int port() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

/// @brief A client of a TCPStoreServer (PyTorch's `TCPStore(is_master=False)`).
///
/// Thread-safe: one request at a time goes over its connection.
class TCPStore {
 public:
  /// @brief Connects to `host`:`port`, retrying until `timeout` (the server may start later).
  ///
  /// Throws DistributedError naming the address when no server answers in time.
  TCPStore(const std::string& host, int port, std::chrono::milliseconds timeout);
  /// @brief Closes the connection.
  ~TCPStore();
  TCPStore(const TCPStore&) = delete;
  TCPStore& operator=(const TCPStore&) = delete;
  /// @brief Stores `value` under `key`, replacing any earlier value.
  void set(const std::string& key, const std::vector<char>& value);
  /// @brief The value of `key`, waiting up to the timeout for it to be set.
  std::vector<char> get(const std::string& key);
  /// @brief Adds `delta` to the integer under `key` (0 when unset) and returns the sum (PyTorch's `store.add`).
  int64_t add(const std::string& key, int64_t delta);
  /// @brief True when every key in `keys` is set, without waiting (PyTorch's `store.check`).
  bool check(const std::vector<std::string>& keys);
  /// @brief Waits until every key in `keys` is set; throws DistributedError naming the missing keys after `timeout`.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  /// @brief Tells the server that this connection belongs to `rank`, so its loss can be reported.
  void register_rank(int rank);
  /// @brief The ranks whose registered connection to the server has closed (their process is gone).
  std::vector<int> lost_ranks();
  /// @brief The timeout of get() and of the connection.
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  std::vector<char> request(char op, const std::vector<std::string>& strings, int64_t number);
  int fd_ = -1;
  std::string address_;
  std::chrono::milliseconds timeout_;
  struct Lock;
  std::unique_ptr<Lock> lock_;
};

}  // namespace tiny::distributed
