// A parquet file read whole through Apache Arrow's C++ parquet reader (pyarrow's libparquet; see
// cmake/arrow.cmake), column by column, for the benchmarks released as parquet (MMMU, MMStar).
// The columns retain reads are text (string, large_string, binary) and the HF `datasets` Image
// feature (struct<bytes: binary, path: string>). Every error names the file and the column, and
// says which type was expected and which was found.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/json.h"

namespace retain {

// HF datasets' Image feature: the encoded file's bytes (or, when they are absent, a path the
// dataset stored instead).
struct ParquetImage {
  std::vector<uint8_t> bytes;
  std::string path;
};

class ParquetTable {
 public:
  // False when this build has no Arrow (pyarrow was not found at configure time).
  static bool available();

  explicit ParquetTable(const fs::path& path);
  ~ParquetTable();
  ParquetTable(ParquetTable&&) noexcept;
  ParquetTable& operator=(ParquetTable&&) noexcept;

  const fs::path& path() const { return path_; }
  int64_t rows() const;
  std::vector<std::string> column_names() const;
  bool has_column(const std::string& name) const;
  // The column's Arrow type, as Arrow prints it ("string", "struct<bytes: binary, path: string>").
  std::string column_type(const std::string& name) const;

  // Null cells are nullopt.
  std::vector<std::optional<std::string>> text_column(const std::string& name) const;
  std::vector<std::optional<int64_t>> integer_column(const std::string& name) const;
  std::vector<std::optional<ParquetImage>> image_column(const std::string& name) const;
  // Any column of strings, numbers, booleans, and lists and structs of them, a cell per row as
  // JSON (null cells null; a struct an object by field name): text corpora's nested columns, e.g.
  // OpenR1-Math's messages, list<struct<content: string, role: string>>.
  std::vector<Json> json_column(const std::string& name) const;

 private:
  struct Impl;
  fs::path path_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace retain
