// The engine's and the HTTP front's figures in Prometheus' text exposition format (/metrics).
#pragma once

#include <string>

#include "serve/engine.h"

namespace retain {

// The HTTP front's figures (serve/http_server.h).
struct ConnectionStats {
  int64_t open = 0;     // connections being served
  int64_t refused = 0;  // answered 503 / 429 at connect (over --max-connections / per address)
};

std::string prometheus_text(const EngineStats& stats, int64_t kv_memory,
                            const ConnectionStats& connections = {});

}  // namespace retain
