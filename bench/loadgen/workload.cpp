#include "workload.h"

#include <stdexcept>

namespace replayd::loadgen {
namespace client = replayd::client;

namespace {

FieldSpec field(std::string name, client::DType dtype, std::vector<std::uint64_t> shape) {
  std::uint64_t bytes = client::dtype_bytes(dtype);
  for (auto dim : shape)
    bytes *= dim;
  return FieldSpec{std::move(name), dtype, std::move(shape), bytes};
}

}  // namespace

Workload workload_named(const std::string& name) {
  Workload workload;
  workload.name = name;
  if (name == "W1") {
    workload.fields = {
        field("obs", client::DType::float32, {4}), field("act", client::DType::int64, {}),
        field("rew", client::DType::float32, {}), field("next_obs", client::DType::float32, {4}),
        field("done", client::DType::uint8, {})};
    workload.capacity_items = 100'000;
    workload.default_sample_batch = 256;
  } else if (name == "W2") {
    workload.fields = {field("obs", client::DType::uint8, {4, 84, 84}),
                       field("act", client::DType::int32, {}),
                       field("rew", client::DType::float32, {}),
                       field("next_obs", client::DType::uint8, {4, 84, 84}),
                       field("done", client::DType::uint8, {})};
    workload.capacity_items = 10'000;
    workload.default_sample_batch = 32;
  } else if (name == "W3") {
    workload.episodic = true;
    workload.fields = {field("obs", client::DType::uint8, {84, 84}),
                       field("act", client::DType::int32, {}),
                       field("rew", client::DType::float32, {})};
    workload.capacity_items = 100'000;  // steps
    workload.default_sample_batch = 32;
  } else {
    throw std::invalid_argument("unknown workload '" + name + "' (W1, W2 or W3)");
  }
  for (const auto& f : workload.fields)
    workload.item_bytes += f.item_bytes;
  return workload;
}

boost::json::object table_description(const Workload& workload, const std::string& table,
                                      bool prioritized) {
  boost::json::array fields;
  for (const auto& f : workload.fields) {
    boost::json::array shape;
    for (auto dim : f.shape)
      shape.push_back(dim);
    boost::json::object described{
        {"name", f.name}, {"dtype", std::string(client::dtype_name(f.dtype))}, {"shape", shape}};
    if (workload.episodic && f.name == "obs") {
      described["stack"] = 4;
      described["next_of"] = true;
      described["compression"] = "zstd";
    }
    fields.push_back(std::move(described));
  }
  boost::json::object description{
      {"name", table},
      {"capacity", workload.capacity_items},
      {"fields", fields},
      {"remover", "fifo"},
      {"rate_limiter", {{"kind", "min_size"}, {"min_size_to_sample", 1}}},
      {"seed", 7}};
  if (workload.episodic) {
    description["episodic"] = true;
    description["reward"] = "rew";
  }
  if (prioritized) {
    description["sampler"] = {{"kind", "prioritized"}, {"priority_exponent", 0.6}};
  } else {
    description["sampler"] = "uniform";
  }
  return description;
}

RandomBatch::RandomBatch(const Workload& workload, std::uint64_t n, std::uint64_t seed)
    : batch_(n) {
  std::mt19937_64 random(seed);
  columns_.reserve(workload.fields.size());
  for (const auto& f : workload.fields) {
    auto& column = columns_.emplace_back(n * f.item_bytes);
    // 8 random bytes at a time; "done" stays 0/1 so that a bool field would also accept it.
    for (std::size_t i = 0; i < column.size(); i += 8) {
      const std::uint64_t word = random();
      for (std::size_t b = 0; b < 8 && i + b < column.size(); ++b) {
        column[i + b] = static_cast<std::byte>((word >> (8 * b)) & 0xff);
      }
    }
    if (f.name == "done") {
      for (auto& byte : column)
        byte &= std::byte{1};
    }
    batch_.add(f.name, f.dtype, std::span<const std::uint64_t>(f.shape), column);
  }
}

}  // namespace replayd::loadgen
