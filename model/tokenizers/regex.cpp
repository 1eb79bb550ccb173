#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/tokenizers/regex.h"

#include <pcre2.h>

#include "core/error.h"

namespace retain {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  ~Impl() {
    if (code != nullptr) pcre2_code_free(code);
  }
};

Regex::Regex(const std::string& pattern, const std::string& where)
    : impl_(std::make_unique<Impl>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (impl_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    fail(where, ": regex does not compile at offset ", offset, ": ",
         reinterpret_cast<const char*>(message), " (pattern: ", pattern, ")");
  }
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
}

Regex::~Regex() = default;

namespace {

// One match-data block per thread: tokenizers are used from several threads at once.
pcre2_match_data* thread_match_data() {
  thread_local std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create(4, nullptr), &pcre2_match_data_free);
  return data.get();
}

}  // namespace

bool Regex::matches_at_start(std::string_view text) const {
  int rc = pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
                       PCRE2_NO_UTF_CHECK | PCRE2_ANCHORED, thread_match_data(), nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  RETAIN_CHECK(rc >= 0, "regex match failed with PCRE2 error ", rc);
  return true;
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  pcre2_match_data* data = thread_match_data();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    // The subject is valid UTF-8 (checked once by the tokenizer), so skip PCRE2's re-check.
    int rc =
        pcre2_match(impl_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    RETAIN_CHECK(rc >= 0, "regex match failed with PCRE2 error ", rc);
    PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    size_t begin = ovector[0], end = ovector[1];
    if (end > begin) out.emplace_back(begin, end);
    if (end > start) {
      start = end;
    } else {
      // Empty match: step over one UTF-8 character.
      start = end + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80)
        ++start;
    }
  }
  return out;
}

}  // namespace retain
