#include "core/safetensors.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json.h"

namespace retain {

at::ScalarType st_to_scalar_type(StDtype dtype) {
  switch (dtype) {
    case StDtype::F64:
      return at::kDouble;
    case StDtype::F32:
      return at::kFloat;
    case StDtype::F16:
      return at::kHalf;
    case StDtype::BF16:
      return at::kBFloat16;
    case StDtype::I64:
      return at::kLong;
    case StDtype::I32:
      return at::kInt;
    case StDtype::I16:
      return at::kShort;
    case StDtype::I8:
      return at::kChar;
    case StDtype::U8:
      return at::kByte;
    case StDtype::BOOL:
      return at::kBool;
  }
  fail("internal: unknown StDtype");
}

StDtype st_from_scalar_type(at::ScalarType type) {
  switch (type) {
    case at::kDouble:
      return StDtype::F64;
    case at::kFloat:
      return StDtype::F32;
    case at::kHalf:
      return StDtype::F16;
    case at::kBFloat16:
      return StDtype::BF16;
    case at::kLong:
      return StDtype::I64;
    case at::kInt:
      return StDtype::I32;
    case at::kShort:
      return StDtype::I16;
    case at::kChar:
      return StDtype::I8;
    case at::kByte:
      return StDtype::U8;
    case at::kBool:
      return StDtype::BOOL;
    default:
      fail("safetensors: cannot store dtype ", c10::toString(type));
  }
}

SafetensorsFile::SafetensorsFile(std::shared_ptr<MappedFile> file, StHeader header)
    : file_(std::move(file)), header_(std::move(header)) {
  for (size_t i = 0; i < header_.tensors.size(); ++i) index_[header_.tensors[i].name] = i;
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const fs::path& path) {
  auto file = MappedFile::open(path.string());
  StHeader header = parse_safetensors_header(file->data(), file->size(), path.string());
  return std::shared_ptr<SafetensorsFile>(new SafetensorsFile(std::move(file), std::move(header)));
}

const StTensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = index_.find(name);
  RETAIN_CHECK(it != index_.end(), path(), ": tensor '", name, "' not found");
  return header_.tensors[it->second];
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(header_.tensors.size());
  for (const auto& t : header_.tensors) out.push_back(t.name);
  return out;
}

at::Tensor SafetensorsFile::tensor(const std::string& name) const {
  const StTensorInfo& t = info(name);
  auto type = st_to_scalar_type(t.dtype);
  const uint8_t* ptr = file_->data() + header_.data_start + t.begin;
  auto options = at::TensorOptions().dtype(type).device(at::kCPU);
  if (t.end == t.begin) return at::empty(t.shape, options);
  if (reinterpret_cast<uintptr_t>(ptr) % st_dtype_size(t.dtype) == 0) {
    auto keep_alive = file_;
    return at::from_blob(
        const_cast<uint8_t*>(ptr), t.shape, [keep_alive](void*) mutable { keep_alive.reset(); },
        options);
  }
  auto out = at::empty(t.shape, options);
  std::memcpy(out.data_ptr(), ptr, t.end - t.begin);
  return out;
}

SafetensorsCheckpoint SafetensorsCheckpoint::open_dir(const fs::path& dir) {
  SafetensorsCheckpoint ckpt;
  fs::path single = dir / "model.safetensors";
  fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    ckpt.where_ = index.string();
    Json j = read_json_file(index);
    RETAIN_CHECK(j.contains("weight_map") && j["weight_map"].is_object(), index.string(),
                 ": expected an object 'weight_map' {tensor name: shard file}");
    std::map<std::string, size_t> shard_of_file;
    for (const auto& [name, file] : j["weight_map"].items()) {
      RETAIN_CHECK(file.is_string(), index.string(), ": weight_map['", name,
                   "'] must be a file name");
      auto shard = file.get<std::string>();
      auto [it, inserted] = shard_of_file.emplace(shard, ckpt.files_.size());
      if (inserted) {
        fs::path shard_path = dir / shard;
        RETAIN_CHECK(fs::exists(shard_path), index.string(), ": shard '", shard, "' (holding '",
                     name, "') does not exist in ", dir.string());
        ckpt.files_.push_back(SafetensorsFile::open(shard_path));
      }
      RETAIN_CHECK(ckpt.files_[it->second]->contains(name), index.string(), ": tensor '", name,
                   "' is mapped to shard '", shard, "' which does not contain it");
      ckpt.owner_[name] = it->second;
    }
  } else if (fs::exists(single)) {
    ckpt.where_ = single.string();
    ckpt.files_.push_back(SafetensorsFile::open(single));
    for (const auto& name : ckpt.files_[0]->names()) ckpt.owner_[name] = 0;
  } else {
    fail(dir.string(), ": no model.safetensors or model.safetensors.index.json found");
  }
  return ckpt;
}

const StTensorInfo& SafetensorsCheckpoint::info(const std::string& name) const {
  auto it = owner_.find(name);
  RETAIN_CHECK(it != owner_.end(), where_, ": missing tensor '", name, "'");
  return files_[it->second]->info(name);
}

at::Tensor SafetensorsCheckpoint::tensor(const std::string& name) const {
  auto it = owner_.find(name);
  RETAIN_CHECK(it != owner_.end(), where_, ": missing tensor '", name, "'");
  return files_[it->second]->tensor(name);
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  out.reserve(owner_.size());
  for (const auto& [name, _] : owner_) out.push_back(name);
  return out;
}

void SafetensorsWriter::add(const std::string& name, const at::Tensor& tensor) {
  at::Tensor t = tensor;
  add_lazy(name, t.scalar_type(), t.sizes().vec(), [t] { return t; });
}

void SafetensorsWriter::add_lazy(const std::string& name, at::ScalarType dtype,
                                 std::vector<int64_t> shape, std::function<at::Tensor()> produce) {
  RETAIN_CHECK(name != "__metadata__", "safetensors: '__metadata__' is not a tensor name");
  for (const auto& e : entries_)
    RETAIN_CHECK(e.name != name, "safetensors: tensor '", name, "' added twice");
  st_from_scalar_type(dtype);  // validates the dtype early
  entries_.push_back({name, dtype, std::move(shape), std::move(produce)});
}

void SafetensorsWriter::write(const fs::path& path) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const auto& e : entries_) {
    uint64_t numel = 1;
    for (int64_t d : e.shape) numel *= static_cast<uint64_t>(d);
    uint64_t bytes = numel * c10::elementSize(e.dtype);
    header[e.name] = {{"dtype", st_dtype_name(st_from_scalar_type(e.dtype))},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does;
  // this is what lets readers alias tensors without a copy.
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');

  write_file_atomic(path, [&](const fs::path& tmp) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    RETAIN_CHECK(out.good(), tmp.string(), ": cannot open for writing");
    uint64_t n = text.size();
    char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    out.write(len, 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& e : entries_) {
      at::Tensor t = e.produce().to(at::kCPU).contiguous();
      RETAIN_CHECK(t.scalar_type() == e.dtype && t.sizes().vec() == e.shape, path.string(),
                   ": tensor '", e.name, "' was produced with dtype ",
                   c10::toString(t.scalar_type()), " shape ", t.sizes(), " but declared ",
                   c10::toString(e.dtype));
      out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    }
    out.close();
    RETAIN_CHECK(out.good(), tmp.string(), ": write failed (", std::strerror(errno), ")");
  });
}

}  // namespace retain
