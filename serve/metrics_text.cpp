#include "serve/metrics_text.h"

#include <sstream>

namespace retain {

namespace {

void metric(std::ostringstream& out, const std::string& name, const std::string& type,
            const std::string& help, double value) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n'
      << name << ' ' << value << '\n';
}

void summary(std::ostringstream& out, const std::string& name, const std::string& help,
             const LatencySummary& s) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " summary\n";
  out << name << "{quantile=\"0.5\"} " << s.p50 << '\n'
      << name << "{quantile=\"0.9\"} " << s.p90 << '\n'
      << name << "{quantile=\"0.99\"} " << s.p99 << '\n'
      << name << "_sum " << s.sum << '\n'
      << name << "_count " << s.count << '\n';
}

}  // namespace

std::string prometheus_text(const EngineStats& s, int64_t kv_memory,
                            const ConnectionStats& connections) {
  std::ostringstream out;
  out.precision(10);
  metric(out, "retain_requests_waiting", "gauge", "Requests queued for admission.",
         static_cast<double>(s.waiting));
  metric(out, "retain_requests_running", "gauge", "Requests in the running batch.",
         static_cast<double>(s.running));
  metric(out, "retain_kv_live_bytes", "gauge", "K/V bytes the running requests' caches hold.",
         static_cast<double>(s.live_kv_bytes));
  metric(out, "retain_kv_budget_bytes", "gauge",
         "K/V bytes of exactly the running requests' budgets.",
         static_cast<double>(s.budget_kv_bytes));
  metric(out, "retain_kv_reserved_bytes", "gauge",
         "K/V bytes the running requests reserved at admission, and the static decode rows'.",
         static_cast<double>(s.reserved_kv_bytes));
  metric(out, "retain_static_rows", "gauge",
         "Rows of the static decode batch (0: every request decodes eagerly).",
         static_cast<double>(s.static_rows));
  metric(out, "retain_static_rows_occupied", "gauge", "Static decode rows holding a request.",
         static_cast<double>(s.static_rows_occupied));
  metric(out, "retain_static_rows_joined_total", "counter",
         "Requests that decoded in a static decode row.",
         static_cast<double>(s.static_rows_joined));
  metric(out, "retain_kv_memory_bytes", "gauge", "The --kv-memory bound (0: none).",
         static_cast<double>(kv_memory));
  metric(out, "retain_requests_finished_total", "counter", "Requests that ended by stop or length.",
         static_cast<double>(s.requests_finished));
  metric(out, "retain_requests_cancelled_total", "counter",
         "Requests cancelled (closed streams, shutdown).",
         static_cast<double>(s.requests_cancelled));
  metric(out, "retain_requests_failed_total", "counter", "Requests that failed in the engine.",
         static_cast<double>(s.requests_failed));
  metric(out, "retain_prompt_tokens_total", "counter", "Prompt tokens admitted.",
         static_cast<double>(s.prompt_tokens));
  metric(out, "retain_generation_tokens_total", "counter", "Tokens generated.",
         static_cast<double>(s.generated_tokens));
  metric(out, "retain_decode_steps_total", "counter", "Batched decode steps.",
         static_cast<double>(s.steps));
  metric(out, "retain_generation_tokens_per_second", "gauge",
         "Tokens generated per second over the last 10 seconds.", s.tokens_per_second);
  summary(out, "retain_time_to_first_token_seconds",
          "From a request's arrival to its first token (latest 2048 requests).",
          s.time_to_first_token);
  summary(out, "retain_inter_token_latency_seconds",
          "Between a request's successive tokens (latest 2048 gaps).", s.inter_token);
  metric(out, "retain_http_connections", "gauge", "HTTP connections being served.",
         static_cast<double>(connections.open));
  metric(out, "retain_http_connections_refused_total", "counter",
         "Connections answered 503 or 429 at connect (--max-connections, "
         "--max-client-connections).",
         static_cast<double>(connections.refused));
  return out.str();
}

}  // namespace retain
