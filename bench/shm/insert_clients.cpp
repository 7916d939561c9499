#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "clients.h"
#include "messages.h"
#include "pipeline.h"
#include "unix_channel.h"

namespace replayd::shm_proto {
namespace {

constexpr std::size_t kSourceItems = 64;  // distinct items cycled through, like fresh steps

std::vector<std::byte> random_items(const Shape& shape) {
  std::vector<std::byte> items(kSourceItems * shape.item_bytes());
  std::mt19937_64 random(11);
  for (auto& byte : items) byte = static_cast<std::byte>(random() & 0xff);
  return items;
}

Message read_grant(BufferedReader& reader, Op expected, std::deque<std::uint32_t>& credit,
                   std::size_t capacity) {
  Message reply;
  if (!reader.read(&reply, sizeof reply) || reply.op != expected)
    throw std::runtime_error("expected a grant of reserved slots");
  std::vector<std::uint32_t> slots(reply.count);
  reader.read(slots.data(), slots.size() * sizeof(std::uint32_t));
  for (auto slot : slots) {
    if (slot >= capacity) throw std::runtime_error("granted slot out of range");
    credit.push_back(slot);
  }
  return reply;
}

// Writes item `item` (fields one after another) into `slot`'s rows of the mapping.
void write_row(const TableView& table, std::uint32_t slot, const std::byte* item) {
  for (std::size_t f = 0; f < table.shape->field_bytes.size(); ++f) {
    std::memcpy(table.row(f, slot), item, table.shape->field_bytes[f]);
    item += table.shape->field_bytes[f];
  }
}

void send_commit(int sock, Op op, std::vector<std::uint32_t>& pending) {
  const Message commit{op, static_cast<std::uint32_t>(pending.size())};
  iovec iov[2] = {{const_cast<Message*>(&commit), sizeof commit},
                  {pending.data(), pending.size() * sizeof(std::uint32_t)}};
  writev_all(sock, iov);
  pending.clear();
}

}  // namespace

ClientResult run_insert_copy(int sock, const Shape& shape, const ClientOptions& options) {
  BufferedReader reader(sock, 4096);
  const std::vector<std::byte> items = random_items(shape);
  const std::size_t per_request = options.commit_every;  // items per insert frame
  if (per_request == 0 || per_request > kSourceItems) throw std::runtime_error("insert_copy: bad batch");
  std::size_t next = 0;
  std::vector<std::uint64_t> keys(per_request);
  ClientResult counters;
  Pipeline pipeline(options);
  pipeline.run(
      counters,
      [&] {
        const Message request{Op::insert_copy, static_cast<std::uint32_t>(per_request),
                              static_cast<std::uint32_t>(per_request * shape.item_bytes())};
        const std::size_t first = (next++ % (kSourceItems / per_request)) * per_request;
        iovec iov[2] = {{const_cast<Message*>(&request), sizeof request},
                        {const_cast<std::byte*>(items.data()) + first * shape.item_bytes(),
                         per_request * shape.item_bytes()}};
        writev_all(sock, iov);
      },
      [&]() -> Received {
        Message reply;
        if (!reader.read(&reply, sizeof reply) || reply.op != Op::insert_copy || reply.count != per_request)
          throw std::runtime_error("insert_copy: bad reply");
        reader.read(keys.data(), keys.size() * sizeof(std::uint64_t));
        return {reply.count};
      });
  finish(sock, reader);
  return counters;
}

namespace {

// One insert call per row: `write(slot, item)` fills a reserved row (a table slot or a
// staging row); rows go back in commits of `commit_every`, whose replies return credit.
template <class Write>
ClientResult insert_with_credit(int sock, const Shape& shape, Op reserve_op, Op commit_op,
                                std::size_t row_limit, const ClientOptions& options, Write write) {
  BufferedReader reader(sock, 64 << 10);
  const std::vector<std::byte> items = random_items(shape);
  // Credit: enough reserved rows that `depth` commits in flight never starve the writer.
  const std::size_t credit_slots = std::max<std::size_t>(32, 2 * options.depth * options.commit_every);
  std::deque<std::uint32_t> credit;
  const Message reserve{reserve_op, static_cast<std::uint32_t>(credit_slots)};
  write_all(sock, &reserve, sizeof reserve);
  read_grant(reader, reserve_op, credit, row_limit);

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto window_start = start;
  double window_cpu_s = thread_cpu_s();
  bool measuring = false;
  ClientResult counters;
  std::uint64_t total = 0;
  std::vector<std::uint32_t> pending;
  std::size_t in_flight = 0;
  std::size_t next = 0;
  auto receive_one = [&] {
    const Message reply = read_grant(reader, commit_op, credit, row_limit);
    --in_flight;
    counters.items += reply.count;  // a commit's reply: its rows are sampleable
    total += reply.count;
  };
  for (;;) {
    const auto now = Clock::now();
    if (!measuring && std::chrono::duration<double>(now - start).count() >= options.warmup_s) {
      measuring = true;
      window_start = now;
      window_cpu_s = thread_cpu_s();
      counters = ClientResult{};
    }
    if (measuring && std::chrono::duration<double>(now - window_start).count() >= options.measure_s) break;
    if (credit.empty() || in_flight == options.depth) {
      receive_one();
      continue;
    }
    // One call of the user's insert: one row written into the mapping.
    const std::uint32_t slot = credit.front();
    credit.pop_front();
    write(slot, items.data() + (next++ % kSourceItems) * shape.item_bytes());
    pending.push_back(slot);
    if (pending.size() == options.commit_every) {
      send_commit(sock, commit_op, pending);
      ++in_flight;
    }
  }
  if (!pending.empty()) {
    send_commit(sock, commit_op, pending);
    ++in_flight;
  }
  while (in_flight > 0) receive_one();
  counters.seconds = std::chrono::duration<double>(Clock::now() - window_start).count();
  counters.cpu_s = thread_cpu_s() - window_cpu_s;
  counters.items_total = total;
  finish(sock, reader);
  return counters;
}

}  // namespace

ClientResult run_insert_mapped(int sock, const TableView& table, const ClientOptions& options) {
  return insert_with_credit(sock, *table.shape, Op::reserve, Op::commit, table.shape->capacity_items,
                            options, [&](std::uint32_t slot, const std::byte* item) {
                              write_row(table, slot, item);
                            });
}

ClientResult run_insert_staged(int sock, const Shape& shape, std::byte* staging,
                               std::size_t staging_rows, const ClientOptions& options) {
  return insert_with_credit(sock, shape, Op::reserve_staged, Op::commit_staged, staging_rows, options,
                            [&](std::uint32_t row, const std::byte* item) {
                              std::memcpy(staging + static_cast<std::size_t>(row) * shape.item_bytes(),
                                          item, shape.item_bytes());
                            });
}

void die_mid_reservation(int sock, const TableView& table) {
  const Shape& shape = *table.shape;
  BufferedReader reader(sock, 64 << 10);
  const std::vector<std::byte> items = random_items(shape);
  std::deque<std::uint32_t> credit;
  const Message reserve{Op::reserve, 64};
  write_all(sock, &reserve, sizeof reserve);
  read_grant(reader, Op::reserve, credit, shape.capacity_items);
  // Commit 16 rows, then write 8 more (half of one row last) and die without committing.
  std::vector<std::uint32_t> pending;
  for (int i = 0; i < 16; ++i) {
    write_row(table, credit.front(), items.data());
    pending.push_back(credit.front());
    credit.pop_front();
  }
  send_commit(sock, Op::commit, pending);
  read_grant(reader, Op::commit, credit, shape.capacity_items);
  for (int i = 0; i < 8; ++i) {
    write_row(table, credit.front(), items.data());
    credit.pop_front();
  }
  std::memset(table.row(0, credit.front()), 0xab, shape.field_bytes[0] / 2);
  ::raise(SIGKILL);
  std::abort();  // not reached: SIGKILL cannot be caught
}

}  // namespace replayd::shm_proto
