#include "checkpoints/learned_file_info.h"

#include <cmath>

#include "core/error.h"
#include "core/json.h"

namespace retain {

namespace {

// metadata[key]; a missing key means the file is not of `kind`.
const std::string& entry(const FileMetadata& metadata, const char* key, const std::string& where,
                         const char* kind) {
  auto it = metadata.find(key);
  RETAIN_CHECK(it != metadata.end(), where, ": not a retain ", kind, " file (metadata '", key,
               "' is missing)");
  return it->second;
}

void check_format(const FileMetadata& metadata, const char* format, const std::string& where,
                  const char* kind) {
  const std::string& found = entry(metadata, "format", where, kind);
  const char* other = found == kGateFileFormat     ? "; it is a gate file, for trimkv / dbtrimkv"
                      : found == kScorerFileFormat ? "; it is a scorer file, for locret / kvzap"
                                                   : "";
  RETAIN_CHECK(found == format, where, ": not a retain ", kind, " file (format '", found, "'",
               other, ")");
  const std::string& version = entry(metadata, "format_version", where, kind);
  RETAIN_CHECK(version == std::to_string(kLearnedFileFormatVersion), where, ": ", kind,
               " file format_version ", version, " is not supported");
}

}  // namespace

GateFileInfo gate_file_info(const FileMetadata& metadata, const std::string& where) {
  check_format(metadata, kGateFileFormat, where, "gate");
  GateFileInfo info;
  info.config = GateConfig::from_json(
      parse_json(entry(metadata, "gate_config", where, "gate"), where + ": gate_config"), where);
  info.base_fingerprint = entry(metadata, "base_fingerprint", where, "gate");
  const Json budget =
      parse_json(entry(metadata, "budget", where, "gate"), where + ": metadata 'budget'");
  RETAIN_CHECK(budget.is_number() && budget.get<double>() >= 0, where,
               ": metadata 'budget' must be a number >= 0, found ", budget.dump());
  info.budget = budget.get<double>();
  info.capacity = entry(metadata, "capacity", where, "gate");
  info.recipe_sha256 = entry(metadata, "recipe_sha256", where, "gate");
  return info;
}

ScorerFileInfo scorer_file_info(const FileMetadata& metadata, const std::string& where) {
  check_format(metadata, kScorerFileFormat, where, "scorer");
  ScorerFileInfo info;
  info.config = ScorerConfig::from_json(
      parse_json(entry(metadata, "scorer_config", where, "scorer"), where + ": scorer_config"),
      where);
  info.base_fingerprint = entry(metadata, "base_fingerprint", where, "scorer");
  info.recipe_sha256 = entry(metadata, "recipe_sha256", where, "scorer");
  return info;
}

}  // namespace retain
