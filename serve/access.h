// Who may use `retain serve`: API keys (--api-key, RETAIN_API_KEY) checked on every /v1 route
// (and /metrics unless --metrics-open) as OpenAI's and vLLM's servers check them, a Bearer token
// compared in constant time; and whether an address is this machine's loopback, so a server
// reachable from elsewhere without a key is warned about at start.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace retain {

// The keys of --api-key (repeatable) and RETAIN_API_KEY (several keys separated by commas); an
// empty key is an error naming where it came from.
std::vector<std::string> server_api_keys(const std::vector<std::string>& flag_keys,
                                         const char* environment_value);

// Whether an Authorization header's value is "Bearer KEY" for one of `keys`: every key is
// compared over its whole length whatever matched before, so the time taken does not tell how
// much of a guess was right.
bool authorized(std::string_view authorization, const std::vector<std::string>& keys);

// 127.0.0.0/8, ::1 and localhost: what only this machine reaches.
bool is_loopback_host(const std::string& host);

}  // namespace retain
