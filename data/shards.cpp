#include "data/shards.h"

#include <hdf5.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/sha256.h"

namespace retain {

namespace {

// HDF5 prints error stacks on stderr by default; retain reports its own errors instead.
void silence_hdf5() {
  static const bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

// The most specific message on HDF5's error stack (for a failed write, the system's reason:
// "... errno = 28, error message = 'No space left on device' ..."), or "no detail from HDF5".
std::string hdf5_reason() {
  std::string reason;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        auto* out = static_cast<std::string*>(data);
        if (out->empty() && e->desc != nullptr) *out = e->desc;
        return 0;
      },
      &reason);
  // A system call's failure carries the system's words: "... error message = 'File too large'".
  const std::string marker = "error message = '";
  const size_t at = reason.find(marker);
  if (at != std::string::npos) {
    const size_t from = at + marker.size(), to = reason.find('\'', from);
    return reason.substr(from, to == std::string::npos ? std::string::npos : to - from);
  }
  std::replace(reason.begin(), reason.end(), '\n', ' ');
  return reason.empty() ? "no detail from HDF5" : reason;
}

// Closes an HDF5 handle with the right function when it goes out of scope.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void write_dataset(hid_t file, const char* name, hid_t type, const void* data, hsize_t n,
                   const std::string& where) {
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (n > 0) {
    hsize_t chunk = std::min<hsize_t>(n, 1 << 16);
    H5Pset_chunk(props.get(), 1, &chunk);
  }
  Handle set(H5Dcreate2(file, name, type, space.get(), H5P_DEFAULT, props.get(), H5P_DEFAULT),
             H5Dclose);
  RETAIN_CHECK(set.ok(), where, ": cannot create dataset '", name, "'");
  if (n > 0)
    RETAIN_CHECK(H5Dwrite(set.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0, where,
                 ": writing '", name, "' failed (", hdf5_reason(), ")");
}

void write_string_attribute(hid_t file, const char* name, const std::string& value,
                            const std::string& where) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), std::max<size_t>(value.size(), 1));
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(file, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  RETAIN_CHECK(attr.ok() && H5Awrite(attr.get(), type.get(), value.c_str()) >= 0, where,
               ": writing attribute '", name, "' failed (", hdf5_reason(), ")");
}

void write_int_attribute(hid_t file, const char* name, int64_t value, const std::string& where) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(file, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose);
  RETAIN_CHECK(attr.ok() && H5Awrite(attr.get(), H5T_NATIVE_INT64, &value) >= 0, where,
               ": writing attribute '", name, "' failed (", hdf5_reason(), ")");
}

std::string read_string_attribute(hid_t file, const char* name, const std::string& where) {
  RETAIN_CHECK(H5Aexists(file, name) > 0, where, ": attribute '", name, "' is missing");
  Handle attr(H5Aopen(file, name, H5P_DEFAULT), H5Aclose);
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  RETAIN_CHECK(H5Tget_class(type.get()) == H5T_STRING && H5Tis_variable_str(type.get()) == 0, where,
               ": attribute '", name, "' must be a fixed-length string");
  std::string value(H5Tget_size(type.get()), '\0');
  RETAIN_CHECK(H5Aread(attr.get(), type.get(), value.data()) >= 0, where, ": reading attribute '",
               name, "' failed");
  value.resize(std::strlen(value.c_str()));
  return value;
}

int64_t read_int_attribute(hid_t file, const char* name, const std::string& where) {
  RETAIN_CHECK(H5Aexists(file, name) > 0, where, ": attribute '", name, "' is missing");
  Handle attr(H5Aopen(file, name, H5P_DEFAULT), H5Aclose);
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  RETAIN_CHECK(H5Tget_class(type.get()) == H5T_INTEGER, where, ": attribute '", name,
               "' must be an integer");
  int64_t value = 0;
  RETAIN_CHECK(H5Aread(attr.get(), H5T_NATIVE_INT64, &value) >= 0, where, ": reading attribute '",
               name, "' failed");
  return value;
}

// Opens a 1-D dataset and checks its element class and size; returns its length.
int64_t open_1d(hid_t file, const char* name, H5T_class_t cls, size_t bytes, bool is_signed,
                const std::string& where, hid_t* out) {
  RETAIN_CHECK(H5Lexists(file, name, H5P_DEFAULT) > 0, where, ": dataset '", name, "' is missing");
  hid_t set = H5Dopen2(file, name, H5P_DEFAULT);
  RETAIN_CHECK(set >= 0, where, ": cannot open dataset '", name, "'");
  Handle type(H5Dget_type(set), H5Tclose);
  bool sign_ok = H5Tget_sign(type.get()) == (is_signed ? H5T_SGN_2 : H5T_SGN_NONE);
  if (H5Tget_class(type.get()) != cls || H5Tget_size(type.get()) != bytes || !sign_ok) {
    H5Dclose(set);
    fail(where, ": dataset '", name, "' has the wrong type (expected ", is_signed ? "int" : "uint",
         bytes * 8, ")");
  }
  Handle space(H5Dget_space(set), H5Sclose);
  if (H5Sget_simple_extent_ndims(space.get()) != 1) {
    H5Dclose(set);
    fail(where, ": dataset '", name, "' must be 1-D");
  }
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.get(), &n, nullptr);
  if (n == 0) {  // nothing to read (an empty dataset is written without chunks)
    *out = set;
    return 0;
  }
  // retain prep writes chunked datasets only: any other layout is not a shard of ours.
  Handle create(H5Dget_create_plist(set), H5Pclose);
  if (H5Pget_layout(create.get()) != H5D_CHUNKED) {
    H5Dclose(set);
    fail(where, ": dataset '", name, "' is not chunked (retain prep writes chunked datasets)");
  }
  // Every chunk stored whole and unfiltered, as retain prep writes them: libhdf5 1.10 copies a
  // chunk by its declared extent, past the bytes a corrupt file stores for it.
  hsize_t chunk = 0, chunks = 0;
  bool whole = H5Pget_nfilters(create.get()) == 0 && H5Pget_chunk(create.get(), 1, &chunk) == 1 &&
               chunk > 0 && H5Dget_num_chunks(set, space.get(), &chunks) >= 0 &&
               chunks == (n + chunk - 1) / chunk;
  for (hsize_t i = 0; whole && i < chunks; ++i) {
    hsize_t offset = 0, size = 0;
    haddr_t address = 0;
    unsigned filters = 0;
    whole = H5Dget_chunk_info(set, space.get(), i, &offset, &filters, &address, &size) >= 0 &&
            filters == 0 && size == chunk * bytes && offset % chunk == 0 && offset < n;
  }
  if (!whole) {
    H5Dclose(set);
    fail(where, ": dataset '", name, "' has missing, filtered or truncated chunks (corrupt file?)");
  }
  *out = set;
  return static_cast<int64_t>(n);
}

void read_range(hid_t set, hid_t mem_type, int64_t begin, int64_t count, void* out,
                const std::string& where, const char* name) {
  if (count == 0) return;
  Handle file_space(H5Dget_space(set), H5Sclose);
  hsize_t start = static_cast<hsize_t>(begin), n = static_cast<hsize_t>(count);
  H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &n, nullptr);
  Handle mem_space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  RETAIN_CHECK(H5Dread(set, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, out) >= 0,
               where, ": reading '", name, "' [", begin, ", ", begin + count,
               ") failed (corrupt file?)");
}

}  // namespace

void write_shard(const fs::path& path, const ShardContents& c, const ShardMeta& meta) {
  silence_hdf5();
  const std::string where = path.string();
  RETAIN_CHECK(!c.doc_offsets.empty() && c.doc_offsets.front() == 0 &&
                   c.doc_offsets.back() == static_cast<int64_t>(c.tokens.size()),
               where, ": doc_offsets must run from 0 to the token count");
  RETAIN_CHECK(c.loss_mask.empty() || c.loss_mask.size() == c.tokens.size(), where,
               ": loss_mask length mismatch");
  const bool images = c.images() > 0;
  RETAIN_CHECK(c.image_offsets.size() == c.image_docs.size() + 1 &&
                   c.image_grids.size() == 3 * c.image_docs.size() &&
                   c.image_offsets.back() == static_cast<int64_t>(c.image_bytes.size()),
               where, ": image datasets of inconsistent lengths");
  RETAIN_CHECK(!images || (meta.image_token_id >= 0 && meta.spatial_merge_size > 0), where,
               ": a shard with images needs image_token_id and spatial_merge_size");
  write_file_atomic(path, [&](const fs::path& tmp) {
    Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    RETAIN_CHECK(file.ok(), tmp.string(), ": cannot create HDF5 file");
    write_dataset(file.get(), "tokens", H5T_NATIVE_INT32, c.tokens.data(), c.tokens.size(), where);
    write_dataset(file.get(), "doc_offsets", H5T_NATIVE_INT64, c.doc_offsets.data(),
                  c.doc_offsets.size(), where);
    if (!c.loss_mask.empty())
      write_dataset(file.get(), "loss_mask", H5T_NATIVE_UINT8, c.loss_mask.data(),
                    c.loss_mask.size(), where);
    if (images) {
      write_dataset(file.get(), "image_bytes", H5T_NATIVE_UINT8, c.image_bytes.data(),
                    c.image_bytes.size(), where);
      write_dataset(file.get(), "image_offsets", H5T_NATIVE_INT64, c.image_offsets.data(),
                    c.image_offsets.size(), where);
      write_dataset(file.get(), "image_grids", H5T_NATIVE_INT64, c.image_grids.data(),
                    c.image_grids.size(), where);
      write_dataset(file.get(), "image_docs", H5T_NATIVE_INT64, c.image_docs.data(),
                    c.image_docs.size(), where);
      write_int_attribute(file.get(), "image_token_id", meta.image_token_id, where);
      write_int_attribute(file.get(), "spatial_merge_size", meta.spatial_merge_size, where);
    }
    write_string_attribute(file.get(), "tokenizer_sha256", meta.tokenizer_sha256, where);
    write_int_attribute(file.get(), "vocab_size", meta.vocab_size, where);
    // An older build that knows no images refuses version 2 instead of training on the
    // placeholders as text.
    write_int_attribute(file.get(), "format_version",
                        images ? kImageShardFormatVersion : meta.format_version, where);
    RETAIN_CHECK(H5Fflush(file.get(), H5F_SCOPE_GLOBAL) >= 0, where, ": flush failed (",
                 hdf5_reason(), ")");
  });
  write_text_file_atomic(shard_checksum_path(path), sha256_file_hex(path) + "\n");
}

fs::path shard_checksum_path(const fs::path& shard) { return shard.string() + ".sha256"; }

ShardReader::ShardReader(const fs::path& path, const std::string& expect_sha, int64_t expect_vocab)
    : path_(path.string()) {
  silence_hdf5();
  RETAIN_CHECK(fs::exists(path), path_, ": shard does not exist");
  RETAIN_CHECK(H5Fis_hdf5(path_.c_str()) > 0, path_,
               ": not a valid HDF5 file (corrupt or truncated?)");
  // libhdf5 1.10 reads past its own buffers on some corrupt files (heap overflows in its object
  // header and chunk code, found by fuzz/hdf5_shard_fuzz within seconds), so a file that is not
  // byte for byte what retain prep wrote never reaches it.
  const fs::path checksum = shard_checksum_path(path);
  RETAIN_CHECK(fs::exists(checksum), path_, ": no checksum (", checksum.string(),
               "); retain prep writes one next to every shard: re-run retain prep");
  std::string expected = read_text_file(checksum);
  expected = expected.substr(0, expected.find_first_of(" \r\n"));
  RETAIN_CHECK(sha256_file_hex(path) == expected, path_, ": does not match its checksum ",
               checksum.string(), " (corrupt, truncated or modified after retain prep)");
  file_ = H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  RETAIN_CHECK(file_ >= 0, path_, ": cannot open as HDF5 (corrupt or truncated?)");
  try {
    meta_.format_version = read_int_attribute(file_, "format_version", path_);
    RETAIN_CHECK(meta_.format_version == kShardFormatVersion ||
                     meta_.format_version == kImageShardFormatVersion,
                 path_, ": format_version ", meta_.format_version,
                 " is not supported (this build reads versions ", kShardFormatVersion, " and ",
                 kImageShardFormatVersion, ")");
    meta_.tokenizer_sha256 = read_string_attribute(file_, "tokenizer_sha256", path_);
    meta_.vocab_size = read_int_attribute(file_, "vocab_size", path_);
    RETAIN_CHECK(expect_sha.empty() || meta_.tokenizer_sha256 == expect_sha, path_,
                 ": was tokenized with a different tokenizer (tokenizer_sha256 ",
                 meta_.tokenizer_sha256.substr(0, 12), "... but the model's is ",
                 expect_sha.substr(0, 12), "...); re-run retain prep with this model");
    RETAIN_CHECK(expect_vocab == 0 || meta_.vocab_size <= expect_vocab, path_, ": vocab_size ",
                 meta_.vocab_size, " exceeds the model's ", expect_vocab);

    hid_t tokens = -1, offsets = -1;
    int64_t n_tokens = open_1d(file_, "tokens", H5T_INTEGER, 4, true, path_, &tokens);
    Handle tokens_handle(tokens, H5Dclose);
    int64_t n_offsets = open_1d(file_, "doc_offsets", H5T_INTEGER, 8, true, path_, &offsets);
    Handle offsets_handle(offsets, H5Dclose);
    RETAIN_CHECK(n_offsets >= 2, path_, ": the shard holds no document (doc_offsets has ",
                 n_offsets, " entries)");
    doc_offsets_.resize(static_cast<size_t>(n_offsets));
    read_range(offsets, H5T_NATIVE_INT64, 0, n_offsets, doc_offsets_.data(), path_, "doc_offsets");
    RETAIN_CHECK(doc_offsets_.front() == 0 && doc_offsets_.back() == n_tokens, path_,
                 ": doc_offsets must run from 0 to ", n_tokens, " (the token count), found ",
                 doc_offsets_.front(), " .. ", doc_offsets_.back());
    for (size_t i = 1; i < doc_offsets_.size(); ++i)
      RETAIN_CHECK(doc_offsets_[i] > doc_offsets_[i - 1], path_,
                   ": doc_offsets must increase strictly (document ", i - 1,
                   " is empty or negative)");
    if (H5Lexists(file_, "loss_mask", H5P_DEFAULT) > 0) {
      hid_t mask = -1;
      int64_t n_mask = open_1d(file_, "loss_mask", H5T_INTEGER, 1, false, path_, &mask);
      Handle mask_handle(mask, H5Dclose);
      RETAIN_CHECK(n_mask == n_tokens, path_, ": loss_mask has ", n_mask, " entries for ", n_tokens,
                   " tokens");
      has_mask_ = true;
    }
    if (meta_.format_version == kImageShardFormatVersion) read_image_index();
  } catch (...) {
    H5Fclose(file_);
    throw;
  }
}

void ShardReader::read_image_index() {
  meta_.image_token_id = read_int_attribute(file_, "image_token_id", path_);
  meta_.spatial_merge_size = read_int_attribute(file_, "spatial_merge_size", path_);
  RETAIN_CHECK(meta_.image_token_id >= 0 && meta_.image_token_id < meta_.vocab_size &&
                   meta_.spatial_merge_size > 0,
               path_, ": image_token_id ", meta_.image_token_id, " / spatial_merge_size ",
               meta_.spatial_merge_size, " out of range");
  auto read_all = [&](const char* name, std::vector<int64_t>& out) {
    hid_t set = -1;
    const int64_t n = open_1d(file_, name, H5T_INTEGER, 8, true, path_, &set);
    Handle handle(set, H5Dclose);
    out.resize(static_cast<size_t>(n));
    read_range(set, H5T_NATIVE_INT64, 0, n, out.data(), path_, name);
  };
  read_all("image_offsets", image_offsets_);
  read_all("image_grids", image_grids_);
  read_all("image_docs", image_docs_);
  hid_t bytes = -1;
  const int64_t n_bytes = open_1d(file_, "image_bytes", H5T_INTEGER, 1, false, path_, &bytes);
  Handle bytes_handle(bytes, H5Dclose);
  const auto images = static_cast<int64_t>(image_docs_.size());
  RETAIN_CHECK(images > 0 && static_cast<int64_t>(image_offsets_.size()) == images + 1 &&
                   static_cast<int64_t>(image_grids_.size()) == 3 * images,
               path_, ": image_offsets (", image_offsets_.size(), "), image_grids (",
               image_grids_.size(), ") and image_docs (", images,
               ") must hold images + 1, 3 x images and images entries");
  RETAIN_CHECK(image_offsets_.front() == 0 && image_offsets_.back() == n_bytes, path_,
               ": image_offsets must run from 0 to ", n_bytes, " (the image bytes)");
  for (int64_t i = 0; i < images; ++i) {
    const auto k = static_cast<size_t>(i);
    RETAIN_CHECK(image_offsets_[k + 1] > image_offsets_[k], path_, ": image ", i, " is empty");
    const int64_t t = image_grids_[3 * k], h = image_grids_[3 * k + 1], w = image_grids_[3 * k + 2];
    RETAIN_CHECK(t >= 1 && h > 0 && w > 0 && h % meta_.spatial_merge_size == 0 &&
                     w % meta_.spatial_merge_size == 0,
                 path_, ": image ", i, "'s grid ", t, "x", h, "x", w,
                 " is not positive or not a multiple of spatial_merge_size ",
                 meta_.spatial_merge_size);
    RETAIN_CHECK(image_docs_[k] >= 0 && image_docs_[k] < num_docs() &&
                     (k == 0 || image_docs_[k] >= image_docs_[k - 1]),
                 path_, ": image ", i, "'s document ", image_docs_[k],
                 " is out of range or out of order");
  }
}

std::vector<ShardImage> ShardReader::doc_images(int64_t doc) const {
  std::vector<ShardImage> out;
  auto first = std::lower_bound(image_docs_.begin(), image_docs_.end(), doc);
  Handle set(first != image_docs_.end() && *first == doc
                 ? H5Dopen2(file_, "image_bytes", H5P_DEFAULT)
                 : -1,
             H5Dclose);
  for (auto it = first; it != image_docs_.end() && *it == doc; ++it) {
    const auto k = static_cast<size_t>(it - image_docs_.begin());
    ShardImage image;
    image.doc = doc;
    image.t = image_grids_[3 * k];
    image.h = image_grids_[3 * k + 1];
    image.w = image_grids_[3 * k + 2];
    image.bytes.resize(static_cast<size_t>(image_offsets_[k + 1] - image_offsets_[k]));
    read_range(set.get(), H5T_NATIVE_UINT8, image_offsets_[k],
               static_cast<int64_t>(image.bytes.size()), image.bytes.data(), path_, "image_bytes");
    out.push_back(std::move(image));
  }
  return out;
}

ShardReader::~ShardReader() {
  if (file_ >= 0) H5Fclose(file_);
}

void ShardReader::read(int64_t begin, int64_t count, int32_t* tokens, uint8_t* mask) const {
  RETAIN_CHECK(begin >= 0 && count >= 0 && begin + count <= num_tokens(), path_, ": read [", begin,
               ", ", begin + count, ") out of range");
  Handle set(H5Dopen2(file_, "tokens", H5P_DEFAULT), H5Dclose);
  read_range(set.get(), H5T_NATIVE_INT32, begin, count, tokens, path_, "tokens");
  if (mask == nullptr) return;
  if (!has_mask_) {
    std::fill(mask, mask + count, uint8_t{1});
    return;
  }
  Handle m(H5Dopen2(file_, "loss_mask", H5P_DEFAULT), H5Dclose);
  read_range(m.get(), H5T_NATIVE_UINT8, begin, count, mask, path_, "loss_mask");
}

std::vector<fs::path> list_shards(const fs::path& dir) {
  RETAIN_CHECK(fs::is_directory(dir), dir.string(), ": shard directory does not exist");
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    auto name = e.path().filename().string();
    if (name.rfind("shard-", 0) == 0 && e.path().extension() == ".h5") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  RETAIN_CHECK(!out.empty(), dir.string(), ": no shard-*.h5 files (run retain prep first)");
  return out;
}

}  // namespace retain
