#include "serve/serve_command.h"

#include <httplib.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "model/chat_template.h"
#include "model/generate.h"
#include "model/tokenizers/incremental_detokenizer.h"
#include "serve/access.h"
#include "serve/byte_size.h"
#include "serve/engine.h"
#include "serve/http_server.h"
#include "serve/metrics_text.h"
#include "serve/openai_api.h"

namespace retain {

namespace {

std::atomic<int> g_signal{0};

void on_signal(int signal) { g_signal = signal; }

// A message may quote what a client sent (a JSON parse error's "last read" can end inside a
// character): invalid UTF-8 is written as U+FFFD rather than failing the answer.
std::string json_text(const Json& body) {
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void send_json(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(json_text(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status, error_body(e));
  // A full queue or a stopping server: the client may try again (vLLM and OpenAI say when).
  if (e.status == 429 || e.status == 503) res.set_header("Retry-After", "1");
}

std::string sse(const Json& event) { return "data: " + json_text(event) + "\n\n"; }

// The request's answer once the engine ended it.
void answer_whole(httplib::Response& res, const ApiRequest& r, const ApiContext& context,
                  const std::shared_ptr<RequestHandle>& handle) {
  // A client that closed its connection waits for nothing: the request is cancelled, as a
  // closed stream's is, and its rows are freed at the engine's next step.
  RequestEvent event;
  for (;;) {
    event = handle->wait(event.tokens.size(), std::chrono::milliseconds(100));
    if (event.finished) break;
    if (GuardedHttpServer::client_gone()) {
      handle->cancel();
      return;
    }
  }
  if (event.finish_reason == "error")
    return send_error(res, ApiError(500, "generation failed: " + event.error, "", "server_error"));
  if (event.finish_reason == "cancelled")
    return send_error(
        res, ApiError(503, "the server shut down before the request finished", "", "server_error"));
  const StreamText text = stream_text(
      reply_text(*context.loaded->tokenizer, event.tokens, r.engine.stop_ids, {}, r.skip_special),
      r.engine.stop_strings, true);
  send_json(res, 200,
            completion_response(r, context, text.text, event.finish_reason,
                                static_cast<int64_t>(event.tokens.size())));
}

// Server-sent events: a chunk per new piece of text, the finish reason, [DONE]. A closed stream
// cancels the request.
void answer_stream(httplib::Response& res, const ApiRequest& r, const ApiContext& context,
                   const std::shared_ptr<RequestHandle>& handle) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [r, &context, handle](
                                                            size_t, httplib::DataSink& sink) {
    size_t sent = 0;
    bool first = true;
    RequestEvent event;
    IncrementalDetokenizer detokenizer(text_decoder(*context.loaded->tokenizer, r.skip_special));
    size_t pushed = 0;  // tokens of the event given to the detokenizer or left out
    auto write = [&](const std::string& data) {
      if (!sink.is_writable() || !sink.write(data.data(), data.size())) {
        handle->cancel();
        return false;
      }
      return true;
    };
    for (;;) {
      event = handle->wait(event.tokens.size(), std::chrono::milliseconds(200));
      if (!sink.is_writable()) {
        handle->cancel();
        return false;
      }
      if (event.finished && event.finish_reason == "error") {
        write(sse(
            error_body(ApiError(500, "generation failed: " + event.error, "", "server_error"))));
        break;
      }
      // The stop token that ended the reply is not text (reply_text).
      for (; pushed < event.tokens.size(); ++pushed)
        if (!is_stop_token(event.tokens[pushed], r.engine.stop_ids))
          detokenizer.push(event.tokens[pushed]);
      if (event.finished) detokenizer.finish();
      const StreamText text =
          stream_text(detokenizer.text(), r.engine.stop_strings, event.finished);
      if (text.stable > sent || first) {
        const std::string delta =
            text.stable > sent ? text.text.substr(sent, text.stable - sent) : "";
        if (!write(sse(stream_chunk(r, context, delta, "", first)))) return false;
        sent = std::max(sent, text.stable);
        first = false;
      }
      if (event.finished) {
        const std::string reason =
            event.finish_reason == "cancelled" ? "abort" : event.finish_reason;
        if (!write(sse(stream_chunk(r, context, "", reason, false)))) return false;
        if (r.include_usage &&
            !write(sse(usage_chunk(r, context, static_cast<int64_t>(event.tokens.size())))))
          return false;
        break;
      }
    }
    write("data: [DONE]\n\n");
    sink.done();
    return true;
  });
}

}  // namespace

int run_serve_command(const ServeCommandOptions& o) {
  RETAIN_CHECK(o.model.tensor_parallel == 1, "serve: --tp is not supported yet (one process)");
  const int64_t kv_memory = parse_bytes(o.kv_memory, "--kv-memory");
  EvalModel loaded = load_eval_model(o.model, o.gates, /*with_tokenizer=*/true, {o.policy});
  const Decoder& model = *loaded.model;
  const Tokenizer& tokenizer = *loaded.tokenizer;

  ApiContext context;
  context.loaded = &loaded;
  context.model_name =
      !o.served_name.empty() ? o.served_name : fs::path(o.model.model_dir).filename().string();
  if (context.model_name.empty())
    context.model_name = fs::path(o.model.model_dir).parent_path().filename().string();
  if (has_chat_template(o.model.model_dir) || !o.chat.chat_template.empty())
    context.chat_template = std::make_shared<const ChatTemplate>(
        load_chat_template(o.model.model_dir, o.chat.chat_template));
  context.no_thinking = o.chat.no_thinking;
  context.policy = o.policy;
  context.budget = o.budget;
  context.request_policies = !o.fixed_policy;
  context.stop_ids = stop_ids(model.config(), &tokenizer);
  context.context_length = model.config().max_position_embeddings;
  context.default_max_tokens = o.default_max_tokens;
  // The server's own policy must work before any request comes.
  const PolicySpec spec = parse_policy(o.policy);
  RETAIN_CHECK(!spec.budgeted() || o.budget > 0, "serve: --policy ", spec.name(),
               " needs --budget");

  EngineOptions engine_options;
  engine_options.kv_memory = kv_memory;
  engine_options.max_batch = o.max_batch;
  engine_options.chunk = o.chunk;
  engine_options.decode = parse_decode_mode(o.decode);
  engine_options.slots = SlotPolicy{spec, o.budget, loaded.learned_for(spec)};
  engine_options.detokenize = text_decoder(tokenizer, /*skip_special=*/true);
  engine_options.max_waiting = o.max_queue;
  ServeEngine engine(model, engine_options);

  const std::vector<std::string> keys = server_api_keys(o.api_keys, std::getenv("RETAIN_API_KEY"));
  // HTTPS when a certificate is given (OpenSSL on the same connections), the same routes.
  const bool tls = !o.ssl_certfile.empty() || !o.ssl_keyfile.empty();
  for (const auto& file : {o.ssl_certfile, o.ssl_keyfile})
    RETAIN_CHECK(file.empty() || fs::is_regular_file(file), "serve: ", file,
                 " is not a readable file");
  HttpLimits limits;
  limits.timeout_s = o.http_timeout;
  limits.max_connections = o.max_connections;
  limits.max_client_connections = o.max_client_connections;
  const int64_t max_body = parse_bytes(o.max_body, "--max-body");
  RETAIN_CHECK(max_body >= 1, "serve: --max-body must be at least 1 byte, found ", o.max_body);
  GuardedHttpServer server(limits, o.ssl_certfile, o.ssl_keyfile);
  // Each connection is a file descriptor: the soft limit (often 1,024) goes up to the hard one,
  // as vLLM's server does, so --max-connections is what bounds them.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  // A client gone mid-write is an error return, not a signal that ends the server (TLS writes go
  // through OpenSSL's write(), which cannot pass MSG_NOSIGNAL).
  std::signal(SIGPIPE, SIG_IGN);
  if (keys.empty() && !is_loopback_host(o.host))
    log_warn("serve: listening on ", o.host,
             " without an API key: anyone who reaches this port can use the model (set "
             "--api-key or RETAIN_API_KEY)");
  // Keys guard every /v1 route, and /metrics unless --metrics-open; /health stays open for
  // load balancers.
  server.set_pre_routing_handler([&keys, &o](const httplib::Request& req, httplib::Response& res) {
    const bool guarded = req.path.starts_with("/v1") || (req.path == "/metrics" && !o.metrics_open);
    if (keys.empty() || !guarded || authorized(req.get_header_value("Authorization"), keys))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401,
                             "Incorrect API key provided: send 'Authorization: Bearer KEY' with "
                             "one of the server's --api-key / RETAIN_API_KEY keys",
                             "", "invalid_request_error", "invalid_api_key"));
    // Answered before the body is read: the connection cannot carry another request.
    res.set_header("Connection", "close");
    return httplib::Server::HandlerResponse::Handled;
  });
  server.set_payload_max_length(static_cast<size_t>(max_body));
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
        std::string what = "internal error";
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        send_error(res, ApiError(500, what, "", "server_error"));
      });
  server.set_error_handler([&o](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404)
      send_error(res, ApiError(404, "no route " + req.method + " " + req.path + " (see /v1/models)",
                               "", "invalid_request_error", "not_found"));
    else if (res.status == 413)
      send_error(res,
                 ApiError(413,
                          str_cat("the request body of ", req.get_header_value("Content-Length"),
                                  " bytes is over the server's --max-body of ", o.max_body),
                          "", "invalid_request_error", "request_too_large"));
    else if (res.status == 400)
      send_error(res, ApiError(400, str_cat("the request could not be read: malformed HTTP, or not "
                                            "whole within the server's --http-timeout of ",
                                            o.http_timeout, " s")));
    else
      send_error(res, ApiError(res.status, "HTTP error " + std::to_string(res.status)));
  });

  std::atomic<bool> stopping{false};
  server.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    send_json(res, stopping ? 503 : 200, {{"status", stopping ? "stopping" : "ok"}});
  });
  server.Get("/v1/models", [&](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200,
              {{"object", "list"},
               {"data", Json::array({{{"id", context.model_name},
                                      {"object", "model"},
                                      {"created", 0},
                                      {"owned_by", "retain"},
                                      {"max_model_len", context.context_length}}})}});
  });
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    const ConnectionStats connections{server.open_connections(), server.refused_connections()};
    res.set_content(prometheus_text(engine.stats(), kv_memory, connections),
                    "text/plain; version=0.0.4");
  });
  auto generate_route = [&](bool chat) {
    return [&, chat](const httplib::Request& req, httplib::Response& res) {
      try {
        ApiRequest r;
        try {
          r = parse_api_request(req.body, context, chat);
        } catch (const Error& e) {
          // What the request asked for failed a check on the way in (its prompt, its policy):
          // the client's error, never the server's.
          throw ApiError(400, e.what());
        }
        std::shared_ptr<RequestHandle> handle;
        try {
          handle = engine.submit(r.engine);
        } catch (const EngineRefusal& e) {
          throw e.stopping ? ApiError(503, e.what(), "", "server_error")
                           : ApiError(429, e.what(), "", "rate_limit_error", "rate_limit_exceeded");
        } catch (const Error& e) {
          throw ApiError(400, e.what());
        }
        if (r.stream)
          answer_stream(res, r, context, handle);
        else
          answer_whole(res, r, context, handle);
      } catch (const ApiError& e) {
        send_error(res, e);
      }
    };
  };
  server.Post("/v1/completions", generate_route(false));
  server.Post("/v1/chat/completions", generate_route(true));

  int port = o.port;
  if (port == 0) {
    port = server.bind_to_any_port(o.host);
    RETAIN_CHECK(port > 0, "serve: cannot bind ", o.host, " to any port");
  } else {
    RETAIN_CHECK(server.bind_to_port(o.host, port), "serve: cannot bind ", o.host, ":", port,
                 " (in use, or not an address of this machine)");
  }
  if (!o.port_file.empty()) {
    const std::string tmp = o.port_file + ".tmp";
    std::ofstream(tmp) << port << '\n';
    fs::rename(tmp, o.port_file);
  }
  log_info("serving ", context.model_name, " on ", tls ? "https://" : "http://", o.host, ":", port,
           keys.empty() ? "" : " (API key required)", " (policy ", o.policy,
           o.budget > 0 ? ", budget " + std::to_string(o.budget) : std::string(),
           kv_memory > 0 ? ", KV memory " + std::to_string(kv_memory) + " bytes" : std::string(),
           ", max batch ", o.max_batch, ", chunk ", o.chunk, ")");

  // SIGINT / SIGTERM: stop admitting, drain, close the port.
  g_signal = 0;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::thread watcher([&] {
    while (g_signal == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log_info("serve: signal ", g_signal.load(), ": finishing in-flight requests (up to ",
             o.shutdown_grace, " s), then closing the port");
    stopping = true;
    engine.stop(std::chrono::milliseconds(static_cast<int64_t>(o.shutdown_grace * 1000)));
    server.stop();
  });
  const bool listened = server.listen_after_bind();
  // Only the watcher stops the server, after a signal; anything else is a failure to report.
  const bool by_signal = g_signal != 0;
  if (!by_signal) g_signal = SIGTERM;  // let the watcher drain the engine and finish
  watcher.join();
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  RETAIN_CHECK(by_signal, "serve: the HTTP server stopped unexpectedly (",
               listened ? "it returned" : "it could not listen", ")");
  log_info("serve: stopped");
  return 0;
}

}  // namespace retain
