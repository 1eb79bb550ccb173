// Helpers shared by the GoogleTest suites: temp dirs, fixture paths, and error-message checks.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fs.h"

namespace retain::testing {

// A fresh directory under the build tree's tmp, removed at destruction.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ =
        fs::temp_directory_path() / str_cat("retain-test-", info ? info->test_suite_name() : "x",
                                            "-", info ? info->name() : "x", "-", ::getpid());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

// A fixture directory (hf, sp, ...) under $RETAIN_FIXTURES, which ctest sets.
// The models tests/fixtures/make_hf_models.py writes: every family, GQA 1 and 4, tied and untied
// embeddings, every RoPE scaling type, biases, q/k-norm, head_dim != hidden/heads, sliding window.
inline const std::vector<std::string>& hf_fixture_cases() {
  static const std::vector<std::string> cases = {
      "llama_tied_mha",  "llama_gqa4_llama3", "mistral_gqa4", "mistral_swa",
      "qwen2_bias_yarn", "qwen2_linear",      "qwen3_qknorm", "qwen3_dynamic"};
  return cases;
}

inline fs::path fixture_dir(const std::string& name) {
  const char* root = std::getenv("RETAIN_FIXTURES");
  if (root == nullptr)
    throw Error("environment variable RETAIN_FIXTURES is not set (run through ctest)");
  return fs::path(root) / name;
}

// Why a fixture generator skipped its fixture (scripts/gpu-run.sh sets RETAIN_SKIP_VL_FIXTURES=1
// on a machine without Pillow / pyarrow), or empty when the fixture was built.
inline std::string fixture_skipped(const std::string& name) {
  const fs::path dir = fixture_dir(name);
  if (!fs::exists(dir / ".skipped") || fs::exists(dir / ".complete")) return "";
  return "fixture " + name + " not built here: " + read_text_file(dir / ".skipped");
}

}  // namespace retain::testing

// Expects `statement` to throw retain::Error (or c10::Error) whose message contains `needle`.
#define EXPECT_ERROR_CONTAINS(statement, needle)                                      \
  do {                                                                                \
    try {                                                                             \
      statement;                                                                      \
      ADD_FAILURE() << "expected an error containing '" << (needle) << "', got none"; \
    } catch (const std::exception& e) {                                               \
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)                \
          << "message was: " << e.what();                                             \
    }                                                                                 \
  } while (false)
