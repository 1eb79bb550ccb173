// serve.
#include "cli/commands.h"
#include "cli/flags.h"
#include "core/error.h"
#include "serve/serve_command.h"

namespace retain::cli {

void register_serve_command(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<ServeCommandOptions>();
  auto* cmd = app.add_subcommand(
      "serve", "an OpenAI-compatible server with continuous batching over the budgeted cache");
  add_model_flags(cmd, o->model);
  cmd->add_option("--host", o->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", o->port, "port (0: any free port, see --port-file)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--port-file", o->port_file, "write the bound port to this file once listening");
  cmd->add_option("--served-model-name", o->served_name,
                  "the model id clients name (default: the model directory's name)");
  cmd->add_option("--policy", o->policy,
                  "default eviction policy, name:key=value,... (`retain policies`); requests may "
                  "choose their own with \"policy\" and \"budget\"")
      ->capture_default_str();
  cmd->add_option("--budget", o->budget,
                  "default KV entries per head (>= 1) or a fraction of the prompt (< 1)");
  cmd->add_option("--gates", o->gates, "gate file for trimkv / dbtrimkv");
  cmd->add_flag("--fixed-policy", o->fixed_policy,
                "requests may not choose their own policy or budget");
  cmd->add_option("--kv-memory", o->kv_memory,
                  "K/V bytes the running requests may reserve together, e.g. 2GiB (0: no bound); "
                  "requests wait for room")
      ->capture_default_str();
  cmd->add_option("--max-batch", o->max_batch, "requests running at once")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--chunk", o->chunk, "prefill chunk in tokens (interleaved with decode steps)")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--decode", o->decode,
                  "decode steps of the requests with --policy and --budget: auto (fixed rows "
                  "replayed as CUDA graphs where the device allows), eager or static (the rows "
                  "also on the CPU)")
      ->check(CLI::IsMember({"auto", "eager", "static"}))
      ->capture_default_str();
  cmd->add_option("--default-max-tokens", o->default_max_tokens,
                  "max_tokens of a request that gives none")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--http-timeout", o->http_timeout,
                  "seconds a request may take to arrive whole, and a reply's write to move a byte "
                  "(a client that stops reading its stream is cancelled)")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--max-connections", o->max_connections,
                  "connections served at once (a streaming client holds one); more are answered "
                  "503 with Retry-After")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--max-client-connections", o->max_client_connections,
                  "connections one client address may hold at once; more are answered 429")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--max-body", o->max_body,
                  "largest request body, e.g. 64MiB (K/M/G/KiB/MiB/GiB); larger ones are answered "
                  "413")
      ->capture_default_str();
  cmd->add_option("--max-queue", o->max_queue,
                  "requests waiting for room at once (0: no bound); more are answered 429 with "
                  "Retry-After")
      ->check(kNonNegative)
      ->capture_default_str();
  cmd->add_option("--api-key", o->api_keys,
                  "a key clients must send as 'Authorization: Bearer KEY' on every /v1 route "
                  "(repeatable; RETAIN_API_KEY adds comma-separated keys); 401 without it");
  cmd->add_flag("--metrics-open", o->metrics_open, "/metrics without a key when keys are set");
  cmd->add_option("--ssl-certfile", o->ssl_certfile, "PEM certificate: serve HTTPS");
  cmd->add_option("--ssl-keyfile", o->ssl_keyfile, "PEM private key of --ssl-certfile");
  cmd->add_option("--shutdown-grace", o->shutdown_grace,
                  "seconds in-flight requests may take to finish after SIGINT / SIGTERM")
      ->check(kNonNegative)
      ->capture_default_str();
  cmd->add_option("--chat-template", o->chat.chat_template,
                  "Jinja file or chatml, replacing the model's template for chat requests");
  cmd->add_flag("--no-thinking", o->chat.no_thinking, "qwen3's enable_thinking=false in chat");
#ifdef RETAIN_WITH_HTTP
  commands.add(cmd, [o] { return run_serve_command(*o); });
#else
  commands.add(cmd, []() -> int {
    throw Error(
        "serve: this build has no HTTP server (configured with -DRETAIN_SERVE=OFF); install "
        "libcpp-httplib-dev (scripts/setup.sh) and rebuild with RETAIN_SERVE on");
  });
#endif
}

}  // namespace retain::cli
