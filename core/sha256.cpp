#include "core/sha256.h"

#include <array>
#include <cstdio>
#include <fstream>

#include "core/error.h"

namespace retain {

namespace {

constexpr std::array<uint32_t, 64> kRound = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

class Sha256 {
 public:
  void update(const uint8_t* data, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      block_[fill_++] = data[i];
      if (fill_ == 64) {
        compress();
        fill_ = 0;
      }
    }
    bits_ += static_cast<uint64_t>(n) * 8;
  }
  std::string hex() {
    uint64_t bits = bits_;
    uint8_t pad = 0x80;
    update(&pad, 1);
    uint8_t zero = 0;
    while (fill_ != 56) update(&zero, 1);
    uint8_t length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
    update(length, 8);
    std::string out;
    char buf[9];
    for (uint32_t h : state_) {
      std::snprintf(buf, sizeof(buf), "%08x", h);
      out += buf;
    }
    return out;
  }

 private:
  void compress() {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = (uint32_t(block_[4 * i]) << 24) | (uint32_t(block_[4 * i + 1]) << 16) |
             (uint32_t(block_[4 * i + 2]) << 8) | uint32_t(block_[4 * i + 3]);
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    auto s = state_;
    for (int i = 0; i < 64; ++i) {
      uint32_t ch = (s[4] & s[5]) ^ (~s[4] & s[6]);
      uint32_t t1 =
          s[7] + (rotr(s[4], 6) ^ rotr(s[4], 11) ^ rotr(s[4], 25)) + ch + kRound[i] + w[i];
      uint32_t maj = (s[0] & s[1]) ^ (s[0] & s[2]) ^ (s[1] & s[2]);
      uint32_t t2 = (rotr(s[0], 2) ^ rotr(s[0], 13) ^ rotr(s[0], 22)) + maj;
      for (int k = 7; k > 0; --k) s[k] = s[k - 1];
      s[4] += t1;
      s[0] = t1 + t2;
    }
    for (int i = 0; i < 8; ++i) state_[i] += s[i];
  }
  std::array<uint32_t, 8> state_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<uint8_t, 64> block_{};
  size_t fill_ = 0;
  uint64_t bits_ = 0;
};

}  // namespace

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(reinterpret_cast<const uint8_t*>(data.data()), data.size());
  return h.hex();
}

std::string file_stamp(const fs::path& path) {
  constexpr uintmax_t kHashUpTo = uintmax_t{64} << 20;
  const uintmax_t size = fs::file_size(path);
  if (size <= kHashUpTo) return "sha256 " + sha256_file_hex(path);
  const auto modified = fs::last_write_time(path).time_since_epoch().count();
  return str_cat("size ", size, ", modified ", modified);
}

std::map<std::string, std::string> directory_stamps(const fs::path& dir) {
  std::map<std::string, std::string> stamps;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file())
      stamps[entry.path().filename().string()] = file_stamp(entry.path());
  return stamps;
}

std::string sha256_file_hex(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  RETAIN_CHECK(in.good(), path.string(), ": cannot open for hashing");
  Sha256 h;
  std::array<char, 1 << 16> buf;
  while (in) {
    in.read(buf.data(), buf.size());
    h.update(reinterpret_cast<const uint8_t*>(buf.data()), static_cast<size_t>(in.gcount()));
  }
  return h.hex();
}

}  // namespace retain
