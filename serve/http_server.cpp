#include "serve/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "core/error.h"
#include "serve/openai_api.h"

namespace retain {

namespace {

using Clock = std::chrono::steady_clock;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Waits until `fd` has one of `events` (or an error / hang-up, which the next read or write then
// reports) or `deadline` passes; false when it passed.
bool poll_until(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, INT_MAX)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return true;  // let the read or write say what is wrong
  }
}

bool address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  const int r = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                     : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (r != 0) return false;
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    port = ntohs(a->sin6_port);
  } else {
    return false;
  }
  ip = text;
  return true;
}

std::string openssl_error() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof(text));
    out += out.empty() ? text : std::string("; ") + text;
  }
  return out.empty() ? "no detail from OpenSSL" : out;
}

// One connection's bytes, plain or TLS, on a non-blocking socket: reads end at the request's
// deadline, writes when no byte moves for the timeout.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int fd, SSL* ssl, Clock::duration timeout)
      : fd_(fd), ssl_(ssl), timeout_(timeout), read_deadline_(Clock::now() + timeout) {}

  // The request that starts now must arrive whole within the timeout.
  void start_request() { read_deadline_ = Clock::now() + timeout_; }

  // Bytes (or a buffered TLS record) within `wait`.
  bool wait_readable(Clock::duration wait) const {
    if (ssl_ != nullptr && SSL_pending(ssl_) > 0) return true;
    return poll_until(fd_, POLLIN, Clock::now() + wait);
  }

  // The client closed the connection or its sending side (or it broke).
  bool peer_closed() const {
    pollfd p{fd_, POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  }

  bool is_readable() const override {
    return (ssl_ != nullptr && SSL_pending(ssl_) > 0) || poll_until(fd_, POLLIN, read_deadline_);
  }
  bool is_writable() const override {
    return !peer_closed() && poll_until(fd_, POLLOUT, Clock::now() + timeout_);
  }

  ssize_t read(char* ptr, size_t size) override {
    const int n = static_cast<int>(std::min<size_t>(size, INT_MAX));
    for (;;) {
      if (ssl_ != nullptr) {
        const int got = SSL_read(ssl_, ptr, n);
        if (got > 0) return got;
        const int err = SSL_get_error(ssl_, got);
        if (err == SSL_ERROR_ZERO_RETURN) return 0;
        if (!wait_for(err, read_deadline_)) return -1;
        continue;
      }
      const ssize_t got = ::recv(fd_, ptr, static_cast<size_t>(n), 0);
      if (got >= 0) return got;
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || !poll_until(fd_, POLLIN, read_deadline_))
        return -1;
    }
  }

  ssize_t write(const char* ptr, size_t size) override {
    const int n = static_cast<int>(std::min<size_t>(size, INT_MAX));
    const auto deadline = Clock::now() + timeout_;
    for (;;) {
      if (ssl_ != nullptr) {
        const int put = SSL_write(ssl_, ptr, n);
        if (put > 0) return put;
        if (!wait_for(SSL_get_error(ssl_, put), deadline)) return -1;
        continue;
      }
      const ssize_t put = ::send(fd_, ptr, static_cast<size_t>(n), MSG_NOSIGNAL);
      if (put >= 0) return put;
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || !poll_until(fd_, POLLOUT, deadline))
        return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address_of(fd_, /*peer=*/true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address_of(fd_, /*peer=*/false, ip, port);
  }
  socket_t socket() const override { return fd_; }

  // TLS: the handshake, within the timeout.
  bool accept_tls() {
    const auto deadline = Clock::now() + timeout_;
    for (;;) {
      const int r = SSL_accept(ssl_);
      if (r == 1) return true;
      if (!wait_for(SSL_get_error(ssl_, r), deadline)) {
        ERR_clear_error();
        return false;
      }
    }
  }

 private:
  // After an OpenSSL call that could not finish: wait for what it wants, false on a real error
  // or at the deadline.
  bool wait_for(int ssl_error, Clock::time_point deadline) const {
    if (ssl_error == SSL_ERROR_WANT_READ) return poll_until(fd_, POLLIN, deadline);
    if (ssl_error == SSL_ERROR_WANT_WRITE) return poll_until(fd_, POLLOUT, deadline);
    ERR_clear_error();
    return false;
  }

  int fd_;
  SSL* ssl_;
  Clock::duration timeout_;
  Clock::time_point read_deadline_;
};

thread_local const ConnectionStream* current_connection = nullptr;

// A thread for each connection at once, up to a bound (then connections wait for one): threads
// are kept for the next connections, so a burst costs its threads once.
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(int64_t max_threads) : max_threads_(max_threads) {}

  void enqueue(std::function<void()> job) override {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
    // More jobs than sleeping workers to take them: one more worker, within the bound.
    if (static_cast<int64_t>(jobs_.size()) > idle_ &&
        static_cast<int64_t>(threads_.size()) < max_threads_)
      threads_.emplace_back([this] { work(); });
    else
      changed_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (!jobs_.empty()) {
        std::function<void()> job = std::move(jobs_.front());
        jobs_.pop_front();
        lock.unlock();
        job();
        lock.lock();
        continue;
      }
      if (stopping_) return;
      ++idle_;
      changed_.wait(lock, [&] { return !jobs_.empty() || stopping_; });
      --idle_;
    }
  }

  const int64_t max_threads_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> jobs_;  // guarded by mutex_
  std::vector<std::thread> threads_;        // guarded by mutex_ (joined after stopping_)
  int64_t idle_ = 0;                        // guarded by mutex_
  bool stopping_ = false;                   // guarded by mutex_
};

std::string refusal_response(int status, const std::string& message) {
  const bool overloaded = status == 503;
  const Json body =
      error_body(ApiError(status, message, "", overloaded ? "server_error" : "rate_limit_error",
                          overloaded ? "server_overloaded" : "rate_limit_exceeded"));
  const std::string text = body.dump(-1, ' ', false, Json::error_handler_t::replace);
  return std::string("HTTP/1.1 ") + std::to_string(status) +
         (overloaded ? " Service Unavailable" : " Too Many Requests") +
         "\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n"
         "Content-Length: " +
         std::to_string(text.size()) + "\r\n\r\n" + text;
}

// Ends the connection: the writing side first, then what the client still sends is read for a
// moment (at most 64 KiB, 0.5 s), so that unread bytes do not make the kernel answer with a
// reset that can destroy the reply before the client reads it.
void close_connection(int fd, SSL* ssl) {
  if (ssl != nullptr) {
    SSL_shutdown(ssl);  // one try: sends close_notify, does not wait for the client's
    SSL_free(ssl);
    ERR_clear_error();
  }
  ::shutdown(fd, SHUT_WR);
  const auto deadline = Clock::now() + std::chrono::milliseconds(500);
  char sink[4096];
  for (size_t drained = 0; drained < (64u << 10) && poll_until(fd, POLLIN, deadline);) {
    const ssize_t got = ::recv(fd, sink, sizeof(sink), 0);
    if (got <= 0 && !(got < 0 && (errno == EAGAIN || errno == EINTR))) break;
    if (got > 0) drained += static_cast<size_t>(got);
  }
  ::close(fd);
}

}  // namespace

GuardedHttpServer::GuardedHttpServer(HttpLimits limits, const std::string& certfile,
                                     const std::string& keyfile)
    : limits_(limits) {
  RETAIN_CHECK(limits_.timeout_s > 0, "serve: --http-timeout must be > 0 seconds, found ",
               limits_.timeout_s);
  RETAIN_CHECK(limits_.max_connections >= 1, "serve: --max-connections must be >= 1");
  RETAIN_CHECK(limits_.max_client_connections >= 1, "serve: --max-client-connections must be >= 1");
  if (!certfile.empty() || !keyfile.empty()) {
    RETAIN_CHECK(!certfile.empty() && !keyfile.empty(),
                 "serve: --ssl-certfile and --ssl-keyfile go together (HTTPS needs both)");
    ctx_ = SSL_CTX_new(TLS_server_method());
    RETAIN_CHECK(ctx_ != nullptr, "serve: OpenSSL could not make a TLS context: ", openssl_error());
    SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx_, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    const auto refuse = [&](const std::string& what) {
      const std::string why = openssl_error();
      SSL_CTX_free(ctx_);
      ctx_ = nullptr;
      fail("serve: OpenSSL refused ", what, ": ", why);
    };
    if (SSL_CTX_use_certificate_chain_file(ctx_, certfile.c_str()) != 1)
      refuse("the certificate " + certfile + " (expected a PEM certificate chain)");
    if (SSL_CTX_use_PrivateKey_file(ctx_, keyfile.c_str(), SSL_FILETYPE_PEM) != 1)
      refuse("the key " + keyfile + " with the certificate " + certfile +
             " (expected the certificate's PEM private key, without a passphrase)");
    if (SSL_CTX_check_private_key(ctx_) != 1)
      refuse("the key " + keyfile + " with the certificate " + certfile +
             " (the key is not the certificate's)");
  }
  // Refused connections finish at once; the bound keeps a flood from making threads without end.
  const int64_t max_threads = limits_.max_connections + 64;
  new_task_queue = [max_threads] { return new ConnectionThreads(max_threads); };
  set_keep_alive_timeout(static_cast<time_t>(limits_.keep_alive_s));
}

GuardedHttpServer::~GuardedHttpServer() {
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

int64_t GuardedHttpServer::open_connections() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return open_;
}

int64_t GuardedHttpServer::refused_connections() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return refused_;
}

bool GuardedHttpServer::client_gone() {
  return current_connection != nullptr && current_connection->peer_closed();
}

std::string GuardedHttpServer::admit(const std::string& address, int& status) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (open_ >= limits_.max_connections) {
    ++refused_;
    status = 503;
    return str_cat("the server is serving ", open_,
                   " connections, its --max-connections; retry in a moment");
  }
  const auto it = per_address_.find(address);
  if (it != per_address_.end() && it->second >= limits_.max_client_connections) {
    ++refused_;
    status = 429;
    return str_cat("your address ", address, " has ", it->second,
                   " connections open, the server's --max-client-connections; close one or retry "
                   "in a moment");
  }
  ++per_address_[address];
  ++open_;
  return "";
}

void GuardedHttpServer::release(const std::string& address) {
  std::lock_guard<std::mutex> lock(mutex_);
  --open_;
  const auto it = per_address_.find(address);
  if (it != per_address_.end() && --it->second <= 0) per_address_.erase(it);
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  const int flags = fcntl(sock, F_GETFL, 0);
  fcntl(sock, F_SETFL, flags | O_NONBLOCK);
  std::string address;
  int port = 0;
  if (!address_of(sock, /*peer=*/true, address, port)) address = "?";
  SSL* ssl = nullptr;
  if (ctx_ != nullptr) {
    ssl = SSL_new(ctx_);
    if (ssl == nullptr || SSL_set_fd(ssl, sock) != 1) {
      if (ssl != nullptr) SSL_free(ssl);
      ERR_clear_error();
      close_connection(sock, nullptr);
      return false;
    }
  }
  // Counted before the handshake, so slow handshakes count against their address too.
  int status = 0;
  const std::string refused = admit(address, status);
  ConnectionStream stream(sock, ssl, seconds(limits_.timeout_s));
  if (ssl != nullptr && !stream.accept_tls()) {
    SSL_free(ssl);
    close_connection(sock, nullptr);
    if (refused.empty()) release(address);
    return false;
  }
  if (!refused.empty()) {
    const std::string reply = refusal_response(status, refused);
    for (size_t sent = 0; sent < reply.size();) {
      const ssize_t put = stream.write(reply.data() + sent, reply.size() - sent);
      if (put <= 0) break;
      sent += static_cast<size_t>(put);
    }
    close_connection(sock, ssl);
    return false;
  }
  current_connection = &stream;
  bool ok = true;
  // As cpp-httplib's own loop: up to its keep-alive count of requests, each after waiting for
  // the next one's first byte for the keep-alive timeout.
  for (size_t left = keep_alive_max_count_; left > 0 && is_running(); --left) {
    if (!stream.wait_readable(seconds(limits_.keep_alive_s))) break;
    stream.start_request();
    bool closed = false;
    ok = process_request(stream, /*close_connection=*/left == 1 || !is_running(), closed,
                         [](httplib::Request&) {});
    if (!ok || closed) break;
  }
  current_connection = nullptr;
  close_connection(sock, ssl);
  release(address);
  return ok;
}

}  // namespace retain
