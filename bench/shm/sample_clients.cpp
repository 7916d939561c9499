#include <atomic>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "clients.h"
#include "messages.h"
#include "pipeline.h"
#include "unix_channel.h"

namespace replayd::shm_proto {

void finish(int sock, BufferedReader& reader) {
  const Message stop{Op::stop};
  write_all(sock, &stop, sizeof stop);
  Message reply;
  if (!reader.read(&reply, sizeof reply) || reply.op != Op::stop)
    throw std::runtime_error("stop: the owner did not answer");
}

namespace {

Message read_reply(BufferedReader& reader, Op expected) {
  Message reply;
  if (!reader.read(&reply, sizeof reply)) throw std::runtime_error("the owner closed the connection");
  if (reply.op != expected)
    throw std::runtime_error("unexpected reply op " + std::to_string(static_cast<unsigned>(reply.op)));
  return reply;
}

void send_request(int sock, Op op, std::size_t count) {
  const Message request{op, static_cast<std::uint32_t>(count)};
  write_all(sock, &request, sizeof request);
}

// Whether every byte of the slot-sized row copies at `out` (columnar, `n` rows, row `i`)
// holds the fill of `key`.
bool row_matches(const Shape& shape, const std::byte* out, std::size_t n, std::size_t i,
                 std::uint64_t key) {
  for (std::size_t f = 0; f < shape.field_bytes.size(); ++f) {
    const std::size_t bytes = shape.field_bytes[f];
    const auto expected = static_cast<std::byte>(fill_byte(key, f));
    const std::byte* row = out + i * bytes;
    for (std::size_t b = 0; b < bytes; ++b)
      if (row[b] != expected) return false;
    out += n * bytes;
  }
  return true;
}

}  // namespace

ClientResult run_sample_copy(int sock, const Shape& shape, const ClientOptions& options) {
  BufferedReader reader(sock, 4096);
  std::vector<std::byte> batch(shape.sample_batch * shape.item_bytes());
  ClientResult counters;
  Pipeline pipeline(options);
  pipeline.run(
      counters, [&] { send_request(sock, Op::sample_copy, shape.sample_batch); },
      [&]() -> Received {
        const Message reply = read_reply(reader, Op::sample_copy);
        if (reply.bytes > batch.size()) throw std::runtime_error("sample_copy: reply too large");
        reader.read(batch.data(), reply.bytes);  // columnar, straight into the batch
        counters.rows_gathered += reply.count;
        return {reply.count};
      });
  finish(sock, reader);
  return counters;
}

ClientResult run_sample_mapped(int sock, const TableView& table, const ClientOptions& options) {
  const Shape& shape = *table.shape;
  BufferedReader reader(sock, 64 << 10);
  std::vector<std::byte> batch(shape.sample_batch * shape.item_bytes());
  std::vector<std::uint64_t> keys(shape.sample_batch);
  std::vector<std::uint32_t> slots;
  std::deque<bool> reask_in_flight;  // per request in flight, in order: is it a re-ask?
  ClientResult counters;
  Pipeline pipeline(options);
  pipeline.run(
      counters,
      [&] {
        send_request(sock, Op::sample_keys, shape.sample_batch);
        reask_in_flight.push_back(false);
      },
      [&]() -> Received {
        const Message reply = read_reply(reader, Op::sample_keys);
        const bool was_reask = reask_in_flight.front();
        reask_in_flight.pop_front();
        const std::size_t n = reply.count;
        if (n > keys.size()) throw std::runtime_error("sample_keys: more keys than a batch");
        reader.read(keys.data(), n * sizeof(std::uint64_t));
        // Gather: slots come from the owner's keys, still checked before they index memory.
        // The stamps are prefetched now and loaded only after the copy.
        slots.resize(n);
        for (std::size_t i = 0; i < n; ++i) {
          slots[i] = static_cast<std::uint32_t>(keys[i] & kSlotMask);
          if (slots[i] >= shape.capacity_items) throw std::runtime_error("sample_keys: slot out of range");
          __builtin_prefetch(&table.stamps[slots[i]]);
        }
        std::byte* out = batch.data();
        for (std::size_t f = 0; f < shape.field_bytes.size(); ++f) {
          copy_column(table, f, slots, out);
          out += n * shape.field_bytes[f];
        }
        // Seqlock read side: the copies above before the stamp loads below.
        std::atomic_thread_fence(std::memory_order_acquire);
        std::size_t invalid = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const bool valid = table.stamps[slots[i]].load(std::memory_order_relaxed) == keys[i];
          invalid += !valid;
          if (options.verify_fill && !row_matches(shape, batch.data(), n, i, keys[i]))
            ++(valid ? counters.torn_accepted : counters.torn_caught);
        }
        counters.rows_gathered += n;
        counters.rows_invalid += invalid;
        if (invalid > 0) {
          // Re-ask for as many rows as changed under the copy (fresh draws).
          send_request(sock, Op::sample_keys, invalid);
          reask_in_flight.push_back(true);
          pipeline.extra();
          ++counters.reasks;
        }
        return {n - invalid, was_reask};
      });
  finish(sock, reader);
  return counters;
}

ClientResult run_sample_ring(int sock, const Shape& shape, const ReplyRing& ring,
                             const ClientOptions& options) {
  BufferedReader reader(sock, 4096);
  std::vector<std::byte> batch(shape.sample_batch * shape.item_bytes());
  ClientResult counters;
  Pipeline pipeline(options);
  pipeline.run(
      counters, [&] { send_request(sock, Op::sample_ring, shape.sample_batch); },
      [&]() -> Received {
        const Message reply = read_reply(reader, Op::sample_ring);
        if (reply.ring_index >= ring.depth || reply.bytes > ring.slot_bytes ||
            reply.bytes > batch.size())
          throw std::runtime_error("sample_ring: ring index or size out of range");
        std::memcpy(batch.data(), ring.slot(reply.ring_index), reply.bytes);
        counters.rows_gathered += reply.count;
        return {reply.count};
      });
  finish(sock, reader);
  return counters;
}

}  // namespace replayd::shm_proto
