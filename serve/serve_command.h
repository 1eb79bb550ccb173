// `retain serve`: an OpenAI-compatible HTTP server (cpp-httplib) over the continuous-batching
// engine (serve/engine.h): /v1/completions and /v1/chat/completions (server-sent events when
// streamed), /v1/models, /health and /metrics (Prometheus text). SIGINT / SIGTERM stop admitting,
// let in-flight requests finish for --shutdown-grace seconds, cancel the rest and close the port.
// With API keys every /v1 route (and /metrics unless --metrics-open) answers 401 without one
// (serve/access.h); with a certificate and key it speaks HTTPS. Connections, request arrival,
// body size and the queue are bounded (serve/http_server.h): a client cannot hold the server.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/sweep.h"
#include "model/prompt.h"

namespace retain {

struct ServeCommandOptions {
  ModelFlags model;
  ChatFlags chat;  // --chat-template and --no-thinking apply to /v1/chat/completions
  std::string host = "127.0.0.1";
  int port = 8000;          // 0: any free port (written to --port-file)
  std::string port_file;    // the bound port, written once the server listens
  std::string served_name;  // the model id requests name (default: the directory's name)
  std::string policy = "full";
  double budget = 0;
  std::string gates;
  bool fixed_policy = false;    // requests may not choose their policy and budget
  std::string kv_memory = "0";  // bytes (K/M/G/KiB/MiB/GiB suffixes); 0: no bound
  int64_t max_batch = 16;
  int64_t chunk = 512;
  std::string decode = "auto";  // static decode rows for --policy's requests: auto|eager|static
  int64_t default_max_tokens = 256;
  // serve/http_server.h: a request arrives whole within --http-timeout seconds and a write moves
  // within it; connections at once, from one address; bytes of a request body; requests queued.
  double http_timeout = 30;
  int64_t max_connections = 512;
  int64_t max_client_connections = 64;
  std::string max_body = "64MiB";
  int64_t max_queue = 1024;
  std::vector<std::string> api_keys;      // --api-key (repeatable), with RETAIN_API_KEY's
  bool metrics_open = false;              // /metrics without a key when keys are set
  std::string ssl_certfile, ssl_keyfile;  // PEM files: HTTPS (OpenSSL through cpp-httplib)
  double shutdown_grace = 30;             // seconds
};

int run_serve_command(const ServeCommandOptions& options);

}  // namespace retain
