// Token shards in HDF5 (DESIGN.md §4): one file per shard with
//   tokens       1-D int32, chunked
//   doc_offsets  1-D int64, documents + 1 entries (document d is tokens[off[d], off[d+1]))
//   loss_mask    1-D uint8, optional (1 = the token's label counts; chat data: assistant tokens)
// and attributes tokenizer_sha256 (string), vocab_size (int64), format_version (int64); next to
// it, shard-NNNNN.h5.sha256 holds the file's SHA-256 (hex).
// Vision-language shards (format_version 2) add the documents' images, each kept whole with its
// document:
//   image_bytes    1-D uint8, every image's encoded file (JPEG/PNG/WebP) concatenated
//   image_offsets  1-D int64, images + 1 entries (image i is image_bytes[off[i], off[i+1]))
//   image_grids    1-D int64, 3 per image: its patch grid (t, h, w) as the processor made it
//   image_docs     1-D int64, the document of each image (non-decreasing); a document's images
//                  are its runs of image_token_id, in order, each grid.tokens(merge) long
// and attributes image_token_id and spatial_merge_size.
// Readers validate everything against the model they feed, and every error names the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/fs.h"

namespace retain {

constexpr int64_t kShardFormatVersion = 1;       // text
constexpr int64_t kImageShardFormatVersion = 2;  // with images

struct ShardMeta {
  std::string tokenizer_sha256;
  int64_t vocab_size = 0;
  int64_t format_version = kShardFormatVersion;  // written as 2 when the shard has images
  int64_t image_token_id = -1;                   // with images
  int64_t spatial_merge_size = 0;
};

struct ShardContents {
  std::vector<int32_t> tokens;
  std::vector<int64_t> doc_offsets{0};
  std::vector<uint8_t> loss_mask;  // empty: every label counts
  std::vector<uint8_t> image_bytes;
  std::vector<int64_t> image_offsets{0};
  std::vector<int64_t> image_grids;  // t, h, w per image
  std::vector<int64_t> image_docs;
  int64_t images() const { return static_cast<int64_t>(image_docs.size()); }
};

// One image of a shard.
struct ShardImage {
  std::vector<uint8_t> bytes;
  int64_t t = 1, h = 0, w = 0;  // the patch grid
  int64_t doc = 0;
};

// Writes a shard atomically (temp file + rename), then its SHA-256 next to it
// (shard_checksum_path), which readers check before libhdf5 opens the file.
void write_shard(const fs::path& path, const ShardContents& contents, const ShardMeta& meta);
fs::path shard_checksum_path(const fs::path& shard);

class ShardReader {
 public:
  // Opens and validates a shard: datasets present with the right types and ranks, offsets
  // monotone from 0 to the token count, mask length, format version, and (when given) the
  // tokenizer hash and vocabulary size expected by the model.
  explicit ShardReader(const fs::path& path, const std::string& expect_tokenizer_sha256 = "",
                       int64_t expect_vocab_size = 0);
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  const ShardMeta& meta() const { return meta_; }
  int64_t num_docs() const { return static_cast<int64_t>(doc_offsets_.size()) - 1; }
  int64_t num_tokens() const { return doc_offsets_.back(); }
  const std::vector<int64_t>& doc_offsets() const { return doc_offsets_; }
  bool has_loss_mask() const { return has_mask_; }
  int64_t num_images() const { return static_cast<int64_t>(image_docs_.size()); }
  // The images of document `doc`, in order (read from the file).
  std::vector<ShardImage> doc_images(int64_t doc) const;
  // Reads tokens [begin, begin + count) (and the mask, 1s without one) from the file.
  void read(int64_t begin, int64_t count, int32_t* tokens, uint8_t* mask) const;
  const std::string& path() const { return path_; }

 private:
  void read_image_index();

  std::string path_;
  int64_t file_ = -1;
  ShardMeta meta_;
  std::vector<int64_t> doc_offsets_;
  bool has_mask_ = false;
  std::vector<int64_t> image_offsets_, image_grids_, image_docs_;
};

// The shards of a directory (shard-*.h5, sorted); an error when there are none.
std::vector<fs::path> list_shards(const fs::path& dir);

}  // namespace retain
