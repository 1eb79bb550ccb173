#include "serve/access.h"

#include <sstream>

#include "core/error.h"

namespace retain {

std::vector<std::string> server_api_keys(const std::vector<std::string>& flag_keys,
                                         const char* environment_value) {
  std::vector<std::string> keys;
  for (const auto& key : flag_keys) {
    RETAIN_CHECK(!key.empty(), "serve: --api-key must not be empty");
    keys.push_back(key);
  }
  if (environment_value != nullptr && *environment_value != '\0') {
    std::istringstream in(environment_value);
    for (std::string key; std::getline(in, key, ',');) {
      RETAIN_CHECK(!key.empty(), "serve: RETAIN_API_KEY holds an empty key (keys are separated by ",
                   "commas, none empty)");
      keys.push_back(key);
    }
  }
  return keys;
}

namespace {

// Equal in time proportional to the key's length, whatever the guess holds.
bool same_key(std::string_view guess, const std::string& key) {
  unsigned char differ = guess.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < key.size(); ++i)
    differ |= static_cast<unsigned char>(key[i] ^ (i < guess.size() ? guess[i] : 0));
  return differ == 0;
}

}  // namespace

bool authorized(std::string_view authorization, const std::vector<std::string>& keys) {
  constexpr std::string_view kBearer = "Bearer ";
  if (!authorization.starts_with(kBearer)) return false;
  const std::string_view guess = authorization.substr(kBearer.size());
  bool any = false;
  for (const auto& key : keys) any |= same_key(guess, key);  // no early exit
  return any;
}

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.starts_with("127.");
}

}  // namespace retain
