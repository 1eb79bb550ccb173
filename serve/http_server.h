// retain serve's connections. cpp-httplib parses the requests and routes them (its protected
// `process_request`); this server owns each connection around that, because cpp-httplib 0.11's
// own loop has per-read timeouts only (a client sending a byte every few seconds holds a thread
// forever), a fixed thread pool behind which a few stalled uploads queue every other client, and
// no way to refuse a connection. Here:
// - each connection has a thread at once, from a pool that grows up to the connection bound;
// - a request must arrive whole (line, headers, body) within `timeout` of its first byte, and a
//   write that moves no byte for `timeout` ends the connection (a client that stops reading its
//   stream: the request is cancelled as for a closed stream);
// - connections beyond `max_connections` are answered 503, beyond `max_client_connections` from
//   one address 429, both with Retry-After, and closed;
// - `client_gone()` tells a handler whether its client closed the connection (or half-closed it:
//   an HTTP client that stops sending is treated as gone), so a whole (non-streamed) reply stops
//   generating when nobody waits for it;
// - HTTPS is OpenSSL's, on the same loop (the certificate and key are PEM files).
// Closing ends the writing side first and reads what the client still sends for a moment, so a
// reply sent before a body was read (401, 413, the refusals) reaches the client instead of a reset.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

typedef struct ssl_ctx_st SSL_CTX;

namespace retain {

struct HttpLimits {
  double timeout_s = 30;                // a request's whole arrival; a write's progress
  double keep_alive_s = 5;              // an idle connection waits this long for a next request
  int64_t max_connections = 512;        // served at once; more are answered 503
  int64_t max_client_connections = 64;  // from one address; more are answered 429
};

class GuardedHttpServer : public httplib::Server {
 public:
  // HTTPS when `certfile` and `keyfile` are given (PEM); throws retain::Error naming the file
  // OpenSSL refused.
  GuardedHttpServer(HttpLimits limits, const std::string& certfile = "",
                    const std::string& keyfile = "");
  ~GuardedHttpServer() override;
  GuardedHttpServer(const GuardedHttpServer&) = delete;
  GuardedHttpServer& operator=(const GuardedHttpServer&) = delete;

  bool tls() const { return ctx_ != nullptr; }
  // Connections being served now (refused ones not counted).
  int64_t open_connections() const;
  // Connections refused at connect so far.
  int64_t refused_connections() const;
  // Whether the client of the request the calling thread handles has closed (or half-closed) its
  // connection; false outside a handler.
  static bool client_gone();

 private:
  // cpp-httplib calls it on a pool thread for each accepted socket (a private virtual of
  // httplib::Server, overridden as httplib::SSLServer does).
  bool process_and_close_socket(socket_t sock) override;
  // Counts the connection in, or says why it is refused ("" when admitted).
  std::string admit(const std::string& address, int& status);
  void release(const std::string& address);

  HttpLimits limits_;
  SSL_CTX* ctx_ = nullptr;
  mutable std::mutex mutex_;
  int64_t open_ = 0, refused_ = 0;              // guarded by mutex_
  std::map<std::string, int64_t> per_address_;  // guarded by mutex_
};

}  // namespace retain
