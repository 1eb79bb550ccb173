#include "data/parquet_table.h"

#include "core/error.h"

#if RETAIN_ARROW
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#endif

namespace retain {

#if RETAIN_ARROW

struct ParquetTable::Impl {
  std::shared_ptr<arrow::Table> table;
};

namespace {

template <typename T>
T value_or_fail(arrow::Result<T> result, const fs::path& path, const char* what) {
  RETAIN_CHECK(result.ok(), path.string(), ": cannot ", what,
               " as parquet: ", result.status().ToString());
  return std::move(result).ValueOrDie();
}

}  // namespace

bool ParquetTable::available() { return true; }

ParquetTable::ParquetTable(const fs::path& path) : path_(path), impl_(std::make_unique<Impl>()) {
  RETAIN_CHECK(fs::is_regular_file(path), path.string(),
               ": no such file (expected a parquet file)");
  auto file = value_or_fail(arrow::io::ReadableFile::Open(path.string()), path, "open");
  // A file that is not parquet fails here (parquet throws, rather than returning a Status, when
  // the footer's magic bytes are wrong).
  try {
    auto reader =
        value_or_fail(parquet::arrow::OpenFile(file, arrow::default_memory_pool()), path, "read");
    impl_->table = value_or_fail(reader->ReadTable(), path, "read the table");
  } catch (const parquet::ParquetException& e) {
    fail(path.string(), ": not a readable parquet file: ", e.what());
  }
}

int64_t ParquetTable::rows() const { return impl_->table->num_rows(); }

std::vector<std::string> ParquetTable::column_names() const {
  return impl_->table->schema()->field_names();
}

bool ParquetTable::has_column(const std::string& name) const {
  return impl_->table->schema()->GetFieldIndex(name) >= 0;
}

std::string ParquetTable::column_type(const std::string& name) const {
  auto field = impl_->table->schema()->GetFieldByName(name);
  RETAIN_CHECK(field != nullptr, path_.string(), ": no column '", name, "'");
  return field->type()->ToString();
}

namespace {

std::shared_ptr<arrow::ChunkedArray> column_or_fail(const arrow::Table& table, const fs::path& path,
                                                    const std::string& name, const char* expected) {
  auto column = table.GetColumnByName(name);
  if (column == nullptr) {
    std::string names;
    for (const auto& n : table.schema()->field_names()) names += (names.empty() ? "" : ", ") + n;
    fail(path.string(), ": no column '", name, "' (expected ", expected, "; the file has ", names,
         ")");
  }
  return column;
}

// A text cell from a string, large_string or binary array; nullopt for a null.
template <typename Array>
void append_text(const arrow::Array& chunk, std::vector<std::optional<std::string>>& out) {
  const auto& a = static_cast<const Array&>(chunk);
  for (int64_t i = 0; i < a.length(); ++i)
    out.push_back(a.IsNull(i) ? std::nullopt : std::optional<std::string>(a.GetString(i)));
}

bool append_text_chunk(const arrow::Array& chunk, std::vector<std::optional<std::string>>& out) {
  switch (chunk.type_id()) {
    case arrow::Type::STRING:
      append_text<arrow::StringArray>(chunk, out);
      return true;
    case arrow::Type::LARGE_STRING:
      append_text<arrow::LargeStringArray>(chunk, out);
      return true;
    case arrow::Type::BINARY:
      append_text<arrow::BinaryArray>(chunk, out);
      return true;
    case arrow::Type::LARGE_BINARY:
      append_text<arrow::LargeBinaryArray>(chunk, out);
      return true;
    case arrow::Type::STRING_VIEW:
      append_text<arrow::StringViewArray>(chunk, out);
      return true;
    case arrow::Type::BINARY_VIEW:
      append_text<arrow::BinaryViewArray>(chunk, out);
      return true;
    default:
      return false;
  }
}

}  // namespace

std::vector<std::optional<std::string>> ParquetTable::text_column(const std::string& name) const {
  auto column = column_or_fail(*impl_->table, path_, name, "a string column");
  std::vector<std::optional<std::string>> out;
  out.reserve(static_cast<size_t>(column->length()));
  for (const auto& chunk : column->chunks())
    RETAIN_CHECK(append_text_chunk(*chunk, out), path_.string(), ": column '", name, "' is ",
                 column->type()->ToString(), "; expected a string column");
  return out;
}

namespace {

template <typename Array>
void append_integers(const arrow::Array& chunk, std::vector<std::optional<int64_t>>& out) {
  const auto& a = static_cast<const Array&>(chunk);
  for (int64_t i = 0; i < a.length(); ++i)
    out.push_back(a.IsNull(i) ? std::nullopt
                              : std::optional<int64_t>(static_cast<int64_t>(a.Value(i))));
}

bool append_integer_chunk(const arrow::Array& chunk, std::vector<std::optional<int64_t>>& out) {
  switch (chunk.type_id()) {
    case arrow::Type::INT8:
      append_integers<arrow::Int8Array>(chunk, out);
      return true;
    case arrow::Type::INT16:
      append_integers<arrow::Int16Array>(chunk, out);
      return true;
    case arrow::Type::INT32:
      append_integers<arrow::Int32Array>(chunk, out);
      return true;
    case arrow::Type::INT64:
      append_integers<arrow::Int64Array>(chunk, out);
      return true;
    case arrow::Type::UINT8:
      append_integers<arrow::UInt8Array>(chunk, out);
      return true;
    case arrow::Type::UINT16:
      append_integers<arrow::UInt16Array>(chunk, out);
      return true;
    case arrow::Type::UINT32:
      append_integers<arrow::UInt32Array>(chunk, out);
      return true;
    default:
      return false;  // uint64 may not fit; no benchmark stores one
  }
}

}  // namespace

std::vector<std::optional<int64_t>> ParquetTable::integer_column(const std::string& name) const {
  auto column = column_or_fail(*impl_->table, path_, name, "an integer column");
  std::vector<std::optional<int64_t>> out;
  for (const auto& chunk : column->chunks())
    RETAIN_CHECK(append_integer_chunk(*chunk, out), path_.string(), ": column '", name, "' is ",
                 column->type()->ToString(), "; expected an integer column");
  return out;
}

namespace {

template <typename Scalar>
Json number(const arrow::Scalar& s) {
  return static_cast<const Scalar&>(s).value;
}

// One cell as JSON: what `datasets` stores for text corpora (strings, numbers, booleans, and
// lists and structs of them, e.g. OpenR1-Math's messages: list<struct<content, role>>).
Json scalar_json(const arrow::Scalar& s, const std::string& where) {
  if (!s.is_valid) return nullptr;
  switch (s.type->id()) {
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
    case arrow::Type::STRING_VIEW: {
      const auto& text = static_cast<const arrow::BaseBinaryScalar&>(s);
      return std::string(reinterpret_cast<const char*>(text.value->data()),
                         static_cast<size_t>(text.value->size()));
    }
    case arrow::Type::BOOL:
      return number<arrow::BooleanScalar>(s);
    case arrow::Type::INT8:
      return number<arrow::Int8Scalar>(s);
    case arrow::Type::INT16:
      return number<arrow::Int16Scalar>(s);
    case arrow::Type::INT32:
      return number<arrow::Int32Scalar>(s);
    case arrow::Type::INT64:
      return number<arrow::Int64Scalar>(s);
    case arrow::Type::UINT8:
      return number<arrow::UInt8Scalar>(s);
    case arrow::Type::UINT16:
      return number<arrow::UInt16Scalar>(s);
    case arrow::Type::UINT32:
      return number<arrow::UInt32Scalar>(s);
    case arrow::Type::UINT64:
      return number<arrow::UInt64Scalar>(s);
    case arrow::Type::FLOAT:
      return number<arrow::FloatScalar>(s);
    case arrow::Type::DOUBLE:
      return number<arrow::DoubleScalar>(s);
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST: {
      const auto& values = *static_cast<const arrow::BaseListScalar&>(s).value;
      Json out = Json::array();
      for (int64_t k = 0; k < values.length(); ++k)
        out.push_back(scalar_json(*values.GetScalar(k).ValueOrDie(), where));
      return out;
    }
    case arrow::Type::STRUCT: {
      const auto& record = static_cast<const arrow::StructScalar&>(s);
      Json out = Json::object();
      for (int k = 0; k < s.type->num_fields(); ++k)
        out[s.type->field(k)->name()] = scalar_json(*record.value[static_cast<size_t>(k)], where);
      return out;
    }
    default:
      fail(where, ": a cell of type ", s.type->ToString(),
           " (expected strings, numbers, booleans, lists or structs of them)");
  }
}

}  // namespace

std::vector<Json> ParquetTable::json_column(const std::string& name) const {
  auto column = column_or_fail(*impl_->table, path_, name, "a column");
  const std::string where = str_cat(path_.string(), ": column '", name, "'");
  std::vector<Json> out;
  out.reserve(static_cast<size_t>(column->length()));
  for (const auto& chunk : column->chunks())
    for (int64_t i = 0; i < chunk->length(); ++i)
      out.push_back(scalar_json(*chunk->GetScalar(i).ValueOrDie(), where));
  return out;
}

std::vector<std::optional<ParquetImage>> ParquetTable::image_column(const std::string& name) const {
  const char* expected = "an image column, struct<bytes: binary, path: string>";
  auto column = column_or_fail(*impl_->table, path_, name, expected);
  const auto type = column->type();
  const auto* struct_type = dynamic_cast<const arrow::StructType*>(type.get());
  const bool is_image = struct_type != nullptr && struct_type->GetFieldIndex("bytes") >= 0 &&
                        struct_type->GetFieldIndex("path") >= 0;
  RETAIN_CHECK(is_image, path_.string(), ": column '", name, "' is ", type->ToString(),
               "; expected ", expected);
  std::vector<std::optional<ParquetImage>> out;
  for (const auto& chunk : column->chunks()) {
    const auto& s = static_cast<const arrow::StructArray&>(*chunk);
    std::vector<std::optional<std::string>> bytes, paths;
    RETAIN_CHECK(append_text_chunk(*s.GetFieldByName("bytes"), bytes) &&
                     append_text_chunk(*s.GetFieldByName("path"), paths),
                 path_.string(), ": column '", name, "' is ", type->ToString(), "; expected ",
                 expected);
    for (int64_t i = 0; i < s.length(); ++i) {
      if (s.IsNull(i) || (!bytes[i] && !paths[i])) {
        out.emplace_back(std::nullopt);
        continue;
      }
      ParquetImage image;
      if (bytes[i]) image.bytes.assign(bytes[i]->begin(), bytes[i]->end());
      if (paths[i]) image.path = *paths[i];
      out.emplace_back(std::move(image));
    }
  }
  return out;
}

#else  // built without Arrow

struct ParquetTable::Impl {};

bool ParquetTable::available() { return false; }

ParquetTable::ParquetTable(const fs::path& path) : path_(path) {
  fail(path.string(),
       ": this build of retain reads no parquet (pyarrow was not found when it was configured; "
       "`make setup` installs it). Convert the data to the JSONL layout, or rebuild.");
}

int64_t ParquetTable::rows() const { return 0; }
std::vector<std::string> ParquetTable::column_names() const { return {}; }
bool ParquetTable::has_column(const std::string&) const { return false; }
std::string ParquetTable::column_type(const std::string&) const { return {}; }
std::vector<std::optional<std::string>> ParquetTable::text_column(const std::string&) const {
  return {};
}
std::vector<std::optional<int64_t>> ParquetTable::integer_column(const std::string&) const {
  return {};
}
std::vector<std::optional<ParquetImage>> ParquetTable::image_column(const std::string&) const {
  return {};
}
std::vector<Json> ParquetTable::json_column(const std::string&) const { return {}; }

#endif

ParquetTable::~ParquetTable() = default;
ParquetTable::ParquetTable(ParquetTable&&) noexcept = default;
ParquetTable& ParquetTable::operator=(ParquetTable&&) noexcept = default;

}  // namespace retain
