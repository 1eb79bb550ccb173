// Token shards in HDF5 (DESIGN.md §4): one file per shard with
//   tokens       1-D int32, chunked
//   doc_offsets  1-D int64, documents + 1 entries (document d is tokens[off[d], off[d+1]))
//   loss_mask    1-D uint8, optional (1 = the token's label counts; chat data: assistant tokens)
// and attributes tokenizer_sha256 (string), vocab_size (int64), format_version (int64); next to
// it, shard-NNNNN.h5.sha256 holds the file's SHA-256 (hex).
// Readers validate everything against the model they feed, and every error names the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/fs.h"

namespace retain {

constexpr int64_t kShardFormatVersion = 1;

struct ShardMeta {
  std::string tokenizer_sha256;
  int64_t vocab_size = 0;
  int64_t format_version = kShardFormatVersion;
};

struct ShardContents {
  std::vector<int32_t> tokens;
  std::vector<int64_t> doc_offsets{0};
  std::vector<uint8_t> loss_mask;  // empty: every label counts
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
  // Reads tokens [begin, begin + count) (and the mask, 1s without one) from the file.
  void read(int64_t begin, int64_t count, int32_t* tokens, uint8_t* mask) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int64_t file_ = -1;
  ShardMeta meta_;
  std::vector<int64_t> doc_offsets_;
  bool has_mask_ = false;
};

// The shards of a directory (shard-*.h5, sorted); an error when there are none.
std::vector<fs::path> list_shards(const fs::path& dir);

}  // namespace retain
