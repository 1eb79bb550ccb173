// The engine's figures in Prometheus' text exposition format (/metrics).
#pragma once

#include <string>

#include "serve/engine.h"

namespace retain {

std::string prometheus_text(const EngineStats& stats, int64_t kv_memory);

}  // namespace retain
