// core/: YAML config with overrides, JSON errors, UTF-8 validation, progress rendering, atomic
// writes, the OpenMP wait policy's reading of /proc/stat.
#include "core/base64.h"
#include "core/config.h"
#include "core/dir_lock.h"
#include "core/json.h"
#include "core/openmp_wait.h"
#include "core/progress.h"
#include "core/utf8.h"
#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

namespace retain {
namespace {

using testing::TempDir;

TEST(Config, OverridesCreateAndReplaceNestedKeys) {
  Config c = Config::parse("optim:\n  lr: 0.001\n  betas: [0.9, 0.95]\ntrain:\n  steps: 10\n",
                           "recipe.yaml");
  c.apply_override("optim.lr=2e-4");
  c.apply_override("train.resume=auto");
  c.apply_override("data.files=[a.h5, b.h5]");
  c.apply_override("gates.width=512");
  EXPECT_DOUBLE_EQ(c.get<double>("optim.lr"), 2e-4);
  EXPECT_EQ(c.get<std::string>("train.resume"), "auto");
  EXPECT_EQ(c.get<std::vector<std::string>>("data.files"),
            (std::vector<std::string>{"a.h5", "b.h5"}));
  EXPECT_EQ(c.get<int>("gates.width"), 512);
  EXPECT_EQ(c.get<int>("train.steps"), 10);
  EXPECT_EQ(c.get_or<int>("train.missing", 7), 7);
  EXPECT_NE(c.dump().find("resume: auto"), std::string::npos);
}

TEST(Config, Errors) {
  Config c = Config::parse("train:\n  steps: ten\n", "recipe.yaml");
  EXPECT_ERROR_CONTAINS(c.get<int>("train.steps"), "recipe.yaml: key 'train.steps' (line 2)");
  EXPECT_ERROR_CONTAINS(c.get("train.nope"), "missing key 'train.nope'");
  EXPECT_ERROR_CONTAINS(c.apply_override("train.steps.x=1"), "'steps' is not a section");
  EXPECT_ERROR_CONTAINS(c.apply_override("novalue"), "expected key.sub=value");
  EXPECT_ERROR_CONTAINS(c.apply_override("a..b=1"), "empty component");
  EXPECT_ERROR_CONTAINS(Config::parse("a: [1, 2\n", "bad.yaml"), "bad.yaml:");
  EXPECT_ERROR_CONTAINS(Config::parse("- 1\n- 2\n", "list.yaml"), "expected a mapping");
}

TEST(Config, ClosestName) {
  EXPECT_EQ(closest_name("optim.lrr", {"optim.lr", "optim.betas", "train.steps"}), "optim.lr");
  EXPECT_EQ(closest_name("stpes", {"steps", "seed"}), "steps");
}

TEST(Json, ErrorsNameFileAndKey) {
  TempDir dir;
  write_text_file_atomic(dir / "bad.json", "{\"a\": 1,}");
  EXPECT_ERROR_CONTAINS(read_json_file(dir / "bad.json"), "bad.json: invalid JSON");
  Json j = {{"n", "text"}};
  EXPECT_ERROR_CONTAINS(json_get<int>(j, "n", "cfg.json"), "cfg.json: key 'n' has the wrong type");
  EXPECT_ERROR_CONTAINS(json_get<int>(j, "m", "cfg.json"), "required key 'm' is missing");
  EXPECT_FALSE(json_get_optional<int>(j, "m", "cfg.json").has_value());
  EXPECT_ERROR_CONTAINS(read_json_file(dir / "absent.json"), "absent.json: cannot open");
}

// The fuzzer found 4.4e21 read as an int64 (undefined behaviour in nlohmann's cast): an integer key
// takes a whole number in the type's range, written as an integer or as a float.
TEST(Json, IntegerKeysHoldWholeNumbersInRange) {
  const Json j = Json::parse(
      R"({"a": 32, "b": 32.0, "c": 3.5, "d": 4.4e21, "e": -1, "f": 18446744073709551615,
          "g": 2147483648, "h": [1, 2.0], "i": [1, 2.5], "j": -9223372036854775808})");
  EXPECT_EQ(json_get<int64_t>(j, "a", "cfg.json"), 32);
  EXPECT_EQ(json_get<int64_t>(j, "b", "cfg.json"), 32);
  EXPECT_EQ(json_get<int64_t>(j, "j", "cfg.json"), std::numeric_limits<int64_t>::min());
  EXPECT_ERROR_CONTAINS(json_get<int64_t>(j, "c", "cfg.json"),
                        "cfg.json: key 'c' must be a whole number in range (found 3.5)");
  EXPECT_ERROR_CONTAINS(json_get<int64_t>(j, "d", "cfg.json"), "key 'd' must be a whole number");
  EXPECT_ERROR_CONTAINS(json_get<int64_t>(j, "f", "cfg.json"), "key 'f' must be a whole number");
  EXPECT_ERROR_CONTAINS(json_get<uint32_t>(j, "e", "cfg.json"), "key 'e' must be a whole number");
  EXPECT_ERROR_CONTAINS(json_get<int32_t>(j, "g", "cfg.json"), "key 'g' must be a whole number");
  EXPECT_EQ(json_get<uint64_t>(j, "f", "cfg.json"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(json_get<std::vector<int64_t>>(j, "h", "cfg.json"), (std::vector<int64_t>{1, 2}));
  EXPECT_ERROR_CONTAINS(json_get<std::vector<int64_t>>(j, "i", "cfg.json"), "key 'i' must be");
  EXPECT_ERROR_CONTAINS(json_get_optional<int64_t>(j, "c", "cfg.json"), "key 'c' must be");
  EXPECT_DOUBLE_EQ(json_get<double>(j, "c", "cfg.json"), 3.5);
}

TEST(Base64, Rfc4648VectorsAndStrictErrors) {
  // RFC 4648 section 10.
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    auto bytes = decode_base64(encoded);
    ASSERT_TRUE(bytes.has_value()) << encoded;
    EXPECT_EQ(std::string(bytes->begin(), bytes->end()), plain);
  }
  auto binary = decode_base64("/+8A");
  ASSERT_TRUE(binary.has_value());
  EXPECT_EQ(*binary, (std::vector<uint8_t>{0xff, 0xef, 0x00}));
  std::string error;
  EXPECT_FALSE(decode_base64("Zm9", &error));
  EXPECT_NE(error.find("not a multiple of 4"), std::string::npos);
  EXPECT_FALSE(decode_base64("Zm=v", &error));
  EXPECT_NE(error.find("character 2"), std::string::npos);
  EXPECT_FALSE(decode_base64("Zm9v Zg==", &error));
  EXPECT_FALSE(decode_base64("Zm-v", &error));
}

TEST(Utf8, Validation) {
  EXPECT_EQ(find_invalid_utf8("plain ascii"), std::string::npos);
  EXPECT_EQ(find_invalid_utf8("caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80"), std::string::npos);
  EXPECT_EQ(find_invalid_utf8("ab\xff"), 2u);
  EXPECT_EQ(find_invalid_utf8("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(find_invalid_utf8("x\xed\xa0\x80"), 1u);     // surrogate
  EXPECT_EQ(find_invalid_utf8("\xe4\xb8"), 0u);          // truncated
  EXPECT_EQ(find_invalid_utf8("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
}

TEST(Utf8, InvalidBytesBecomeReplacementCharacters) {
  EXPECT_EQ(valid_utf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(valid_utf8("ab\xC3"), "ab\xEF\xBF\xBD");  // a character cut at its end
  EXPECT_EQ(valid_utf8("\xFF\xFEx"), "\xEF\xBF\xBD\xEF\xBF\xBDx");
  EXPECT_EQ(find_invalid_utf8(valid_utf8("\xED\xA0\x80 \xC0\xAF")), std::string::npos);
}

TEST(DirLock, ASecondHolderIsRefusedNamingTheFirstUntilItEnds) {
  TempDir tmp;
  const fs::path dir = tmp / "out" / "nested";
  const std::string holder = str_cat("pid ", ::getpid());
  {
    DirLock first(dir, "eval x: --out");  // creates the directory
    EXPECT_TRUE(fs::is_directory(dir));
    EXPECT_NE(read_text_file(dir / ".retain.lock").find(holder), std::string::npos);
    // Another open of the file in this process conflicts as another process's would...
    EXPECT_ERROR_CONTAINS(
        DirLock(dir, "eval x: --out"),
        "eval x: --out: " + dir.string() + " is in use by another retain command (host ");
    EXPECT_ERROR_CONTAINS(DirLock(dir, "eval x: --out"), holder);
    // ...and another process's does.
    const pid_t child = ::fork();
    if (child == 0) {
      try {
        DirLock second(dir, "child");
        ::_exit(1);
      } catch (const Error& e) {
        ::_exit(std::string(e.what()).find(holder) != std::string::npos ? 0 : 2);
      }
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  // Released with its holder: the next command takes it.
  DirLock again(dir, "eval x: --out");
  EXPECT_NE(read_text_file(dir / ".retain.lock").find(holder), std::string::npos);
}

TEST(Progress, RendersCountRateAndEta) {
  ProgressBar bar("prefill", 100, "tok");
  bar.update(25);
  bar.set_postfix("loss=2.31");
  std::string line = bar.render();
  EXPECT_NE(line.find("prefill 25%|"), std::string::npos) << line;
  EXPECT_NE(line.find("25/100 ["), std::string::npos) << line;
  EXPECT_NE(line.find("tok/s]"), std::string::npos) << line;
  EXPECT_NE(line.find("loss=2.31"), std::string::npos) << line;
  EXPECT_EQ(format_duration(3725), "01:02:05");
  EXPECT_EQ(format_duration(65), "01:05");
}

TEST(Progress, ResumedWorkFillsTheBarButNotTheRate) {
  ProgressBar bar("train", 200, "step");
  bar.skip(60);  // a resumed run: 60 steps were done before
  EXPECT_NE(bar.render_at(10.0).find("60/200 [00:10<?, 0.00 step/s]"), std::string::npos)
      << bar.render_at(10.0);
  bar.update(2);  // 2 steps in 40 s: 0.05 step/s, 138 left -> 46 min
  const std::string line = bar.render_at(40.0);
  EXPECT_NE(line.find("31%|"), std::string::npos) << line;
  EXPECT_NE(line.find("62/200 [00:40<46:00, 0.05 step/s]"), std::string::npos) << line;
}

TEST(Fs, AtomicWriteKeepsOldContentOnFailure) {
  TempDir dir;
  write_text_file_atomic(dir / "f.txt", "old");
  EXPECT_ANY_THROW(write_file_atomic(dir / "f.txt", [](const fs::path& tmp) {
    write_text_file_atomic(tmp, "partial");
    throw Error("boom");
  }));
  EXPECT_EQ(read_text_file(dir / "f.txt"), "old");
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1);
}

}  // namespace
}  // namespace retain

namespace retain {
namespace {

TEST(OpenMpWait, ReadsTheRunnableProcessesFromProcStat) {
  const std::string stat =
      "cpu  1 2 3 4\ncpu0 1 2 3 4\nintr 5 6\nctxt 7\nbtime 8\nprocesses 9\nprocs_running 3\n"
      "procs_blocked 0\n";
  EXPECT_EQ(runnable_processes(stat), 3);
  EXPECT_EQ(runnable_processes("cpu 1 2\nprocs_blocked 1\n"), -1);
  EXPECT_EQ(runnable_processes(""), -1);
}

}  // namespace
}  // namespace retain
