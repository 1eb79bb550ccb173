// Gate and scorer file metadata (checkpoints/learned_file_info.h): what a file says about itself is
// checked key by key, each error naming the file and what was found.
#include "checkpoints/learned_file_info.h"
#include "test_util.h"

namespace retain {
namespace {

FileMetadata gate_metadata() {
  return {{"format", "retain-gates"},
          {"format_version", "1"},
          {"gate_config", R"({"arch":"mlp3","width":512,"tie_projection":true})"},
          {"base_fingerprint", "llama-x-v100"},
          {"budget", "1024.0"},
          {"capacity", "local"},
          {"recipe_sha256", "ab"}};
}

FileMetadata with(FileMetadata m, const std::string& key, const std::string& value) {
  m[key] = value;
  return m;
}

TEST(LearnedFileInfo, GateMetadataIsCheckedKeyByKey) {
  const GateFileInfo info = gate_file_info(gate_metadata(), "g.safetensors");
  EXPECT_EQ(info.config.arch, GateArch::kMlp3);
  EXPECT_EQ(info.config.width, 512);
  EXPECT_EQ(info.config.bias_init, GateConfig{}.bias_init);  // files before the key: the default
  EXPECT_EQ(info.budget, 1024.0);
  EXPECT_EQ(info.capacity, "local");
  FileMetadata missing = gate_metadata();
  missing.erase("capacity");
  EXPECT_ERROR_CONTAINS(gate_file_info(missing, "g.safetensors"),
                        "g.safetensors: not a retain gate file (metadata 'capacity' is missing)");
  EXPECT_ERROR_CONTAINS(gate_file_info(with(gate_metadata(), "format", "retain-scorer"), "g"),
                        "format 'retain-scorer'; it is a scorer file, for locret / kvzap");
  EXPECT_ERROR_CONTAINS(gate_file_info(with(gate_metadata(), "format_version", "2"), "g"),
                        "gate file format_version 2 is not supported");
  EXPECT_ERROR_CONTAINS(gate_file_info(with(gate_metadata(), "budget", R"("many")"), "g"),
                        "metadata 'budget' must be a number >= 0, found \"many\"");
  EXPECT_ERROR_CONTAINS(gate_file_info(with(gate_metadata(), "budget", "-1"), "g"),
                        "must be a number >= 0, found -1");
  EXPECT_ERROR_CONTAINS(gate_file_info(with(gate_metadata(), "gate_config", "[1]"), "g"),
                        "required key 'arch' is missing");
  EXPECT_ERROR_CONTAINS(
      gate_file_info(with(gate_metadata(), "gate_config",
                          R"({"arch":"mlp2","width":1e12,"tie_projection":false})"),
                     "g"),
      "gates.width must be in [1, 1048576], found 1000000000000");
  EXPECT_ERROR_CONTAINS(
      gate_file_info(with(gate_metadata(), "gate_config", R"({"arch":"mlp4"})"), "g"),
      "gates.arch 'mlp4' is not supported (expected mlp2 or mlp3)");
}

TEST(LearnedFileInfo, ScorerMetadataIsCheckedAndAGateFileIsNamedAsSuch) {
  const FileMetadata scorer = {{"format", "retain-scorer"},
                               {"format_version", "1"},
                               {"scorer_config", R"({"kind":"kvzap","width":64})"},
                               {"base_fingerprint", "q"},
                               {"recipe_sha256", "cd"}};
  const ScorerFileInfo info = scorer_file_info(scorer, "s");
  EXPECT_EQ(info.config.kind, ScorerKind::kKvzap);
  EXPECT_EQ(info.config.width, 64);
  EXPECT_ERROR_CONTAINS(scorer_file_info(gate_metadata(), "s"),
                        "s: not a retain scorer file (format 'retain-gates'; it is a gate file, "
                        "for trimkv / dbtrimkv)");
  EXPECT_ERROR_CONTAINS(scorer_file_info(with(scorer, "scorer_config", "{oops"), "s"),
                        "s: scorer_config");
  EXPECT_ERROR_CONTAINS(
      scorer_file_info(with(scorer, "scorer_config", R"({"kind":"kvzap","width":0})"), "s"),
      "scorer width must be in [1, 1048576], found 0");
}

}  // namespace
}  // namespace retain
