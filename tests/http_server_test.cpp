// serve/http_server.h on loopback with raw sockets: what the model-level test
// (tests/serve_limits.py) cannot show without megabytes of replies: a client that never reads is
// cut off by the write timeout; a handler sees its client leave; OpenSSL's refusal of a file.
#include "serve/http_server.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "core/error.h"
#include "test_util.h"

namespace retain {
namespace {

using Clock = std::chrono::steady_clock;

// A server listening on a free loopback port in its own thread, stopped on destruction.
struct RunningServer {
  explicit RunningServer(HttpLimits limits) : server(limits) {}
  void start() {
    port = server.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port, 0);
    thread = std::thread([this] { server.listen_after_bind(); });
    while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~RunningServer() {
    server.stop();
    if (thread.joinable()) thread.join();
  }
  GuardedHttpServer server;
  int port = 0;
  std::thread thread;
};

// A connected loopback socket; `receive_buffer` > 0 shrinks its receive window.
int connect_to(int port, int receive_buffer = 0) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (receive_buffer > 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

void send_text(int fd, const std::string& text) {
  ASSERT_EQ(::send(fd, text.data(), text.size(), MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
}

TEST(GuardedHttpServer, AWriteThatMovesNothingForTheTimeoutEndsTheReply) {
  HttpLimits limits;
  limits.timeout_s = 1;
  RunningServer running(limits);
  std::atomic<int64_t> written{0};
  std::atomic<bool> failed{false};
  Clock::time_point stalled_since{};
  running.server.Get("/endless", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("text/plain", [&](size_t, httplib::DataSink& sink) {
      const std::string block(64 << 10, 'x');
      for (;;) {
        const auto before = Clock::now();
        if (!sink.write(block.data(), block.size())) {
          stalled_since = before;
          failed = true;
          return false;
        }
        written += static_cast<int64_t>(block.size());
      }
    });
  });
  running.start();
  const int fd = connect_to(running.port, 4096);
  send_text(fd, "GET /endless HTTP/1.1\r\nHost: x\r\n\r\n");
  const auto start = Clock::now();
  while (!failed && Clock::now() - start < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // The client never read a byte and never closed: the server gave up on its own, a timeout after
  // its buffers filled.
  ASSERT_TRUE(failed) << "the reply was still being written after 30 s (" << written << " bytes)";
  const double gave_up_after = std::chrono::duration<double>(Clock::now() - stalled_since).count();
  EXPECT_GT(written, 0);
  EXPECT_LT(gave_up_after, 5.0);
  ::close(fd);
}

TEST(GuardedHttpServer, AHandlerSeesItsClientLeave) {
  RunningServer running(HttpLimits{});
  std::atomic<bool> done{false}, saw_gone{false};
  std::atomic<double> seen_after{-1};
  running.server.Post("/wait", [&](const httplib::Request&, httplib::Response& res) {
    const auto start = Clock::now();
    while (Clock::now() - start < std::chrono::seconds(10)) {
      if (GuardedHttpServer::client_gone()) {
        saw_gone = true;
        seen_after = std::chrono::duration<double>(Clock::now() - start).count();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    res.set_content("late", "text/plain");
    done = true;
  });
  running.start();
  EXPECT_FALSE(GuardedHttpServer::client_gone());  // outside a handler
  const int fd = connect_to(running.port);
  send_text(fd, "POST /wait HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::close(fd);
  const auto start = Clock::now();
  while (!done && Clock::now() - start < std::chrono::seconds(15))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(done);
  EXPECT_TRUE(saw_gone) << "the handler waited its 10 s without seeing the client leave";
  EXPECT_LT(seen_after.load(), 2.0);
}

TEST(GuardedHttpServer, ACertificateOpenSslRefusesIsAnErrorNamingTheFile) {
  const auto dir = std::filesystem::temp_directory_path() / "retain_http_server_test";
  std::filesystem::create_directories(dir);
  const std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  std::ofstream(cert) << "not a certificate\n";
  std::ofstream(key) << "not a key\n";
  EXPECT_ERROR_CONTAINS(GuardedHttpServer refused(HttpLimits{}, cert, key),
                        "OpenSSL refused the certificate " + cert);
  EXPECT_ERROR_CONTAINS(GuardedHttpServer half(HttpLimits{}, cert, ""), "go together");
  HttpLimits zero;
  zero.timeout_s = 0;
  EXPECT_ERROR_CONTAINS(GuardedHttpServer no_time(zero), "--http-timeout");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace retain
