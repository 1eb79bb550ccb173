// libFuzzer target: an HDF5 token shard that may have been corrupted after retain prep wrote it.
// The input is written as the shard, next to the checksum of a pristine shard (the seed
// plain.h5): every input that differs from it must be refused with retain::Error before libhdf5
// opens it (libhdf5 1.10 overflows its own buffers on some corrupt files, which this gate exists
// for), and the pristine shard itself must open and read back whole.
#include <cstdio>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "core/sha256.h"
#include "data/shards.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retain;
  static const std::string pristine = read_text_file(RETAIN_FUZZ_PRISTINE_SHARD);
  const fs::path path = fuzz::write_input("shard-00000.h5", data, size);
  static const bool checksum_written = [&] {
    write_text_file_atomic(shard_checksum_path(path), sha256_hex(pristine) + "\n");
    return true;
  }();
  (void)checksum_written;
  const bool is_pristine = fuzz::as_text(data, size) == pristine;
  try {
    ShardReader reader(path);
    if (!is_pristine) __builtin_trap();  // a modified file got past the checksum
    const auto& offsets = reader.doc_offsets();
    std::vector<int32_t> tokens;
    std::vector<uint8_t> mask;
    for (int64_t d = 0; d < reader.num_docs(); ++d) {
      const int64_t n = offsets[d + 1] - offsets[d];
      tokens.resize(static_cast<size_t>(n));
      mask.resize(static_cast<size_t>(n));
      reader.read(offsets[d], n, tokens.data(), mask.data());
    }
  } catch (const Error& e) {
    if (is_pristine) {  // the shard retain prep wrote must read
      fprintf(stderr, "the pristine shard was refused: %s\n", e.what());
      __builtin_trap();
    }
  }
  return 0;
}
