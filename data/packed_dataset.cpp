#include "data/packed_dataset.h"

#include <algorithm>

#include "core/error.h"

namespace retain {

PackedDataset::PackedDataset(const std::vector<fs::path>& shards, int64_t seq_len,
                             const std::string& tokenizer_sha256, int64_t vocab_size)
    : seq_len_(seq_len) {
  RETAIN_CHECK(seq_len > 1, "data: seq_len must be > 1, found ", seq_len);
  RETAIN_CHECK(!shards.empty(), "data: no shards");
  bool images = false;
  for (size_t s = 0; s < shards.size(); ++s) {
    shards_.push_back(std::make_unique<ShardReader>(shards[s], tokenizer_sha256, vocab_size));
    const ShardReader& shard = *shards_.back();
    if (shard.num_images() > 0) {
      RETAIN_CHECK(!images || (shard.meta().image_token_id == image_token_id_ &&
                               shard.meta().spatial_merge_size == spatial_merge_size_),
                   shard.path(), ": image_token_id ", shard.meta().image_token_id,
                   " / spatial_merge_size ", shard.meta().spatial_merge_size,
                   " differ from the other shards' (", image_token_id_, " / ", spatial_merge_size_,
                   ")");
      images = true;
      image_token_id_ = shard.meta().image_token_id;
      spatial_merge_size_ = shard.meta().spatial_merge_size;
    }
    const auto& offsets = shard.doc_offsets();
    for (size_t d = 0; d + 1 < offsets.size(); ++d) {
      docs_.push_back({static_cast<int64_t>(s), offsets[d], offsets[d + 1] - offsets[d],
                       total_tokens_, static_cast<int64_t>(d)});
      total_tokens_ += offsets[d + 1] - offsets[d];
    }
  }
  if (!images) {
    num_sequences_ = (total_tokens_ + seq_len - 1) / seq_len;
    return;
  }
  // Whole documents, in order: a sequence ends where the next document does not fit.
  int64_t used = 0;  // tokens in the last sequence
  for (size_t d = 0; d < docs_.size(); ++d) {
    const DocRef& doc = docs_[d];
    RETAIN_CHECK(doc.length <= seq_len, shards_[doc.shard]->path(), ": document ", doc.doc, " has ",
                 doc.length, " tokens, more than data.seq_len ", seq_len,
                 " (the shards hold images, so every document is packed whole: raise "
                 "data.seq_len, or use smaller images)");
    if (rows_.empty() || used + doc.length > seq_len) {
      rows_.push_back({d, d + 1});
      used = 0;
    } else {
      rows_.back().last = d + 1;
    }
    used += doc.length;
  }
  num_sequences_ = static_cast<int64_t>(rows_.size());
}

PackedBatch PackedDataset::batch(const std::vector<int64_t>& indices) const {
  const auto b = static_cast<int64_t>(indices.size());
  PackedBatch out;
  out.ids = at::zeros({b, seq_len_}, at::kLong);
  out.positions = at::zeros({b, seq_len_}, at::kLong);
  out.segments = at::full({b, seq_len_}, -1, at::kLong);
  out.loss_mask = at::zeros({b, seq_len_}, at::kBool);
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
  for (int64_t row = 0; row < b; ++row) {
    const int64_t index = indices[static_cast<size_t>(row)];
    RETAIN_CHECK(index >= 0 && index < num_sequences_, "data: sequence ", index, " out of range");
    if (whole_documents()) {
      whole_document_row(index, row, out);
      continue;
    }
    const int64_t start = index * seq_len_, stop = std::min(start + seq_len_, total_tokens_);
    // The first document overlapping [start, stop).
    auto it =
        std::upper_bound(docs_.begin(), docs_.end(), start,
                         [](int64_t value, const DocRef& d) { return value < d.stream_begin; });
    --it;
    auto ids = out.ids[row], pos = out.positions[row], seg = out.segments[row],
         keep = out.loss_mask[row];
    int64_t segment = 0;
    for (; it != docs_.end() && it->stream_begin < stop; ++it, ++segment) {
      const int64_t from = std::max(start, it->stream_begin),
                    to = std::min(stop, it->stream_begin + it->length);
      const int64_t n = to - from;
      tokens.resize(static_cast<size_t>(n));
      mask.resize(static_cast<size_t>(n));
      shards_[it->shard]->read(it->begin + (from - it->stream_begin), n, tokens.data(),
                               mask.data());
      const int64_t col = from - start;
      ids.narrow(0, col, n).copy_(at::from_blob(tokens.data(), {n}, at::kInt).to(at::kLong));
      keep.narrow(0, col, n).copy_(at::from_blob(mask.data(), {n}, at::kByte).to(at::kBool));
      pos.narrow(0, col, n).copy_(at::arange(n, at::kLong));
      seg.narrow(0, col, n).fill_(segment);
    }
  }
  return out;
}

void PackedDataset::whole_document_row(int64_t index, int64_t row, PackedBatch& out) const {
  out.image_token_id = image_token_id_;
  out.spatial_merge_size = spatial_merge_size_;
  const Row& r = rows_[static_cast<size_t>(index)];
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;
  int64_t col = 0;
  for (size_t d = r.first; d < r.last; ++d) {
    const DocRef& doc = docs_[d];
    const ShardReader& shard = *shards_[doc.shard];
    const int64_t n = doc.length;
    tokens.resize(static_cast<size_t>(n));
    mask.resize(static_cast<size_t>(n));
    shard.read(doc.begin, n, tokens.data(), mask.data());
    out.ids[row].narrow(0, col, n).copy_(at::from_blob(tokens.data(), {n}, at::kInt).to(at::kLong));
    out.loss_mask[row].narrow(0, col, n).copy_(
        at::from_blob(mask.data(), {n}, at::kByte).to(at::kBool));
    out.positions[row].narrow(0, col, n).copy_(at::arange(n, at::kLong));
    out.segments[row].narrow(0, col, n).fill_(static_cast<int64_t>(d - r.first));
    // The document's placeholders must be exactly its images' tokens (prep writes them so; a
    // shard that disagrees would put image features on the wrong tokens).
    int64_t placeholders = 0, image_tokens = 0, k = 0;
    for (int32_t id : tokens) placeholders += id == image_token_id_;
    for (auto& image :
         shard.num_images() > 0 ? shard.doc_images(doc.doc) : std::vector<ShardImage>{}) {
      image_tokens += image.t * (image.h / spatial_merge_size_) * (image.w / spatial_merge_size_);
      out.images.push_back({row, col, std::move(image),
                            str_cat(shard.path(), " document ", doc.doc, " image ", k++)});
    }
    RETAIN_CHECK(placeholders == image_tokens, shard.path(), ": document ", doc.doc, " has ",
                 placeholders, " image placeholder tokens (id ", image_token_id_,
                 ") but its images' grids make ", image_tokens);
    col += n;
  }
}

Sampler::Sampler(int64_t size, uint64_t seed, bool shuffle)
    : size_(size), seed_(seed), shuffle_(shuffle) {
  RETAIN_CHECK(size > 0, "sampler: the dataset is empty");
}

const std::vector<int64_t>& Sampler::order(int64_t epoch) {
  if (epoch == cached_epoch_) return cached_order_;
  cached_order_.resize(static_cast<size_t>(size_));
  for (int64_t i = 0; i < size_; ++i) cached_order_[static_cast<size_t>(i)] = i;
  if (shuffle_) {
    // Fisher-Yates with mt19937_64: the same permutation on every machine and library version.
    std::mt19937_64 rng(seed_ * 1000003ull + static_cast<uint64_t>(epoch));
    for (int64_t i = size_ - 1; i > 0; --i) {
      auto j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
      std::swap(cached_order_[static_cast<size_t>(i)], cached_order_[static_cast<size_t>(j)]);
    }
  }
  cached_epoch_ = epoch;
  return cached_order_;
}

std::vector<int64_t> Sampler::next(int64_t global_batch, int rank, int world,
                                   std::vector<int64_t>* epochs) {
  RETAIN_CHECK(world >= 1 && rank >= 0 && rank < world, "sampler: bad rank ", rank, " of ", world);
  RETAIN_CHECK(global_batch >= world && global_batch % world == 0, "sampler: the global batch ",
               global_batch, " must be a multiple of the world size ", world);
  std::vector<int64_t> mine;
  for (int64_t k = 0; k < global_batch; ++k) {
    if (state_.consumed >= size_) {
      state_.epoch += 1;
      state_.consumed = 0;
    }
    int64_t sample = order(state_.epoch)[static_cast<size_t>(state_.consumed)];
    state_.consumed += 1;
    if (k % world == rank) {
      mine.push_back(sample);
      if (epochs != nullptr) epochs->push_back(state_.epoch);
    }
  }
  return mine;
}

void Sampler::restore(const SamplerState& state) {
  RETAIN_CHECK(state.epoch >= 0 && state.consumed >= 0 && state.consumed <= size_,
               "sampler: cannot restore position ", state.consumed, " of epoch ", state.epoch,
               " on a dataset of ", size_, " sequences");
  state_ = state;
}

}  // namespace retain
