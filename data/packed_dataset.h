// Fixed-length training sequences packed from token shards, and the deterministic sampler that
// walks them.
//
// The documents of all shards, in order, form one token stream cut every `seq_len` tokens.
// Within a sequence each document (or the part of one that falls in it) is its own segment:
// positions restart at 0 and attention never crosses segments. The tail of the last sequence is
// padding (segment -1).
//
// Shards with images (vision-language documents) are packed whole instead: an image's tokens,
// its rotary positions and its vision-tower features only make sense with the whole document, so
// documents go into sequences in order, each whole, a new sequence starting when the next one
// does not fit (the rest of a sequence is padding); a document longer than seq_len is an error.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "data/shards.h"

namespace retain {

// An image of a packed batch: its row, the column its document starts at, and the image.
struct PackedImage {
  int64_t row = 0, doc_column = 0;
  ShardImage image;
  std::string where;  // "SHARD document D image K", for errors
};

struct PackedBatch {
  at::Tensor ids;        // (B, T) int64
  at::Tensor positions;  // (B, T) int64, position inside the segment
  at::Tensor segments;   // (B, T) int64, -1 = padding
  at::Tensor loss_mask;  // (B, T) bool
  // Vision-language batches: every image in the order of its tokens (row by row).
  std::vector<PackedImage> images;
  int64_t image_token_id = -1, spatial_merge_size = 0;
};

class PackedDataset {
 public:
  PackedDataset(const std::vector<fs::path>& shards, int64_t seq_len,
                const std::string& tokenizer_sha256, int64_t vocab_size);

  int64_t size() const { return num_sequences_; }
  int64_t seq_len() const { return seq_len_; }
  int64_t num_tokens() const { return total_tokens_; }
  // Whether documents are packed whole (the shards have images).
  bool whole_documents() const { return !rows_.empty(); }
  // The sequences `indices` as one batch.
  PackedBatch batch(const std::vector<int64_t>& indices) const;

 private:
  struct DocRef {
    int64_t shard, begin, length;  // token range inside the shard
    int64_t stream_begin;          // first token's index in the concatenated stream
    int64_t doc;                   // index inside its shard
  };
  // Whole-document packing: the documents [first, last) of each sequence.
  struct Row {
    size_t first, last;
  };
  std::vector<Row> rows_;
  void whole_document_row(int64_t index, int64_t row, PackedBatch& out) const;
  int64_t image_token_id_ = -1, spatial_merge_size_ = 0;
  std::vector<std::unique_ptr<ShardReader>> shards_;
  std::vector<DocRef> docs_;
  int64_t seq_len_;
  int64_t total_tokens_ = 0;
  int64_t num_sequences_ = 0;
};

// Where a sampler stands: `consumed` samples of epoch `epoch` have been handed out (counted
// across all ranks), so a restart on any number of ranks continues without repeating or skipping.
struct SamplerState {
  int64_t epoch = 0;
  int64_t consumed = 0;
};

class Sampler {
 public:
  // Epoch e visits a permutation of [0, size) drawn from (seed, e) when shuffle is on.
  Sampler(int64_t size, uint64_t seed, bool shuffle);

  // The next global batch of `global_batch` sample ids, of which this returns rank's share:
  // positions rank, rank + world, ... of the batch. Crosses into the next epoch as needed.
  // `epochs`, when given, receives the epoch of each returned sample.
  std::vector<int64_t> next(int64_t global_batch, int rank = 0, int world = 1,
                            std::vector<int64_t>* epochs = nullptr);

  SamplerState state() const { return state_; }
  void restore(const SamplerState& state);

 private:
  const std::vector<int64_t>& order(int64_t epoch);
  int64_t size_;
  uint64_t seed_;
  bool shuffle_;
  SamplerState state_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> cached_order_;
};

}  // namespace retain
