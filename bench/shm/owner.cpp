#include "owner.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "unix_channel.h"

namespace replayd::shm_proto {
namespace {

// Fields at least this large are written to the socket from the table's rows (as the
// server's sample replies do); smaller ones are gathered into the reply first.
constexpr std::size_t kViewedFieldBytes = 4096;
// Items of one insert_copy request: what fits the read buffer (W2: 16 x 56,457 bytes).
constexpr std::size_t kMaxItemsPerInsert = 16;

class Connection {
 public:
  Connection(int sock, OwnerTable& table, const ReplyRing* ring, const ServeOptions& options)
      : sock_(sock), table_(table), shape_(*table.view().shape), ring_(ring), options_(options),
        reader_(sock, 1 << 20) {}

  ServeStats run() {
    while (const std::byte* bytes = reader_.view(sizeof(Message))) {
      Message request;
      std::memcpy(&request, bytes, sizeof request);
      ++stats_.requests;
      if (request.op == Op::stop) {
        const Message reply{Op::stop};
        write_all(sock_, &reply, sizeof reply);
        break;
      }
      handle(request);
    }
    stats_.reservations_released = table_.release_reservations(options_.writer_id);
    return stats_;
  }

 private:
  void handle(const Message& request) {
    // A count is checked against its limit before anything is sized by it.
    if (request.count == 0 || request.count > shape_.capacity_items)
      throw std::runtime_error("request count " + std::to_string(request.count) +
                               " outside 1.." + std::to_string(shape_.capacity_items));
    switch (request.op) {
      case Op::sample_copy: return sample_copy(request.count);
      case Op::sample_keys: return sample_keys(request.count);
      case Op::sample_ring: return sample_ring(request.count);
      case Op::insert_copy: return insert_copy(request);
      case Op::commit: return commit(request.count);
      case Op::reserve: return grant(Op::reserve, request.count);
      case Op::reserve_staged: return reserve_staged(request.count);
      case Op::commit_staged: return commit_staged(request.count);
      case Op::stop: break;
    }
    throw std::runtime_error("unknown op " + std::to_string(static_cast<unsigned>(request.op)));
  }

  void sample_copy(std::size_t n) {
    table_.draw(n, slots_);
    const Message reply{Op::sample_copy, static_cast<std::uint32_t>(n),
                        static_cast<std::uint32_t>(n * shape_.item_bytes())};
    iov_.assign(1, iovec{const_cast<Message*>(&reply), sizeof reply});
    scratch_.resize(n * shape_.item_bytes());
    std::byte* gathered = scratch_.data();
    for (std::size_t f = 0; f < shape_.field_bytes.size(); ++f) {
      const std::size_t bytes = shape_.field_bytes[f];
      if (bytes >= kViewedFieldBytes) {
        for (auto slot : slots_) iov_.push_back(iovec{table_.view().row(f, slot), bytes});
        continue;
      }
      copy_column(table_.view(), f, slots_, gathered);
      iov_.push_back(iovec{gathered, n * bytes});
      gathered += n * bytes;
    }
    writev_all(sock_, iov_);
    churn();
  }

  void sample_keys(std::size_t n) {
    table_.draw(n, slots_);
    keys_.resize(n);
    for (std::size_t i = 0; i < n; ++i) keys_[i] = table_.key_of(slots_[i]);
    const Message reply{Op::sample_keys, static_cast<std::uint32_t>(n)};
    iovec iov[2] = {{const_cast<Message*>(&reply), sizeof reply},
                    {keys_.data(), n * sizeof(std::uint64_t)}};
    writev_all(sock_, iov);
    churn();
  }

  void sample_ring(std::size_t n) {
    if (ring_ == nullptr || n * shape_.item_bytes() > ring_->slot_bytes)
      throw std::runtime_error("sample_ring: no ring, or the reply exceeds a ring slot");
    table_.draw(n, slots_);
    const std::size_t index = ring_next_++ % ring_->depth;
    std::byte* out = ring_->slot(index);
    for (std::size_t f = 0; f < shape_.field_bytes.size(); ++f) {
      copy_column(table_.view(), f, slots_, out);
      out += n * shape_.field_bytes[f];
    }
    const Message reply{Op::sample_ring, static_cast<std::uint32_t>(n),
                        static_cast<std::uint32_t>(n * shape_.item_bytes()),
                        static_cast<std::uint32_t>(index)};
    write_all(sock_, &reply, sizeof reply);
    churn();
  }

  void insert_copy(const Message& request) {
    if (request.count > kMaxItemsPerInsert || request.bytes != request.count * shape_.item_bytes())
      throw std::runtime_error("insert_copy: 1.." + std::to_string(kMaxItemsPerInsert) + " items of " +
                               std::to_string(shape_.item_bytes()) + " bytes expected, got " +
                               std::to_string(request.bytes) + " bytes");
    const std::byte* items = reader_.view(request.bytes);
    if (items == nullptr) throw std::runtime_error("insert_copy: end of stream before the items");
    keys_.resize(request.count);
    for (std::size_t i = 0; i < request.count; ++i)
      keys_[i] = table_.insert(items + i * shape_.item_bytes());
    const Message reply{Op::insert_copy, request.count};
    iovec iov[2] = {{const_cast<Message*>(&reply), sizeof reply},
                    {keys_.data(), keys_.size() * sizeof(std::uint64_t)}};
    writev_all(sock_, iov);
  }

  void commit(std::size_t n) {
    const std::byte* bytes = reader_.view(n * sizeof(std::uint32_t));
    if (bytes == nullptr) throw std::runtime_error("commit: end of stream before the slots");
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t slot;
      std::memcpy(&slot, bytes + i * sizeof slot, sizeof slot);
      // An untrusted slot number: committed only if this writer holds its reservation.
      if (!table_.commit(options_.writer_id, slot)) ++stats_.commits_refused;
    }
    grant(Op::commit, n);
  }

  // Reserves `n` slots for this writer and sends their numbers (the writer's credit).
  void grant(Op op, std::size_t n) {
    granted_.resize(n);
    for (auto& slot : granted_) slot = table_.reserve(options_.writer_id);
    send_granted(op);
  }

  void reserve_staged(std::size_t n) {
    if (options_.staging == nullptr) throw std::runtime_error("reserve_staged: no staging area");
    staged_granted_.resize(options_.staging_rows, false);
    granted_.clear();
    for (std::uint32_t row = 0; row < options_.staging_rows && granted_.size() < n; ++row) {
      if (staged_granted_[row]) continue;
      staged_granted_[row] = true;
      granted_.push_back(row);
    }
    send_granted(Op::reserve_staged);
  }

  // The staged rows' bytes are the client's: the owner copies them once into rows only it
  // writes, so a client can spoil only the items it commits itself.
  void commit_staged(std::size_t n) {
    const std::byte* bytes = reader_.view(n * sizeof(std::uint32_t));
    if (bytes == nullptr) throw std::runtime_error("commit_staged: end of stream before the rows");
    granted_.clear();
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t row;
      std::memcpy(&row, bytes + i * sizeof row, sizeof row);
      if (row >= staged_granted_.size() || !staged_granted_[row]) {
        ++stats_.commits_refused;
        continue;
      }
      table_.insert(options_.staging + static_cast<std::size_t>(row) * shape_.item_bytes());
      granted_.push_back(row);
    }
    send_granted(Op::commit_staged);
  }

  void send_granted(Op op) {
    const Message reply{op, static_cast<std::uint32_t>(granted_.size())};
    iovec iov[2] = {{const_cast<Message*>(&reply), sizeof reply},
                    {granted_.data(), granted_.size() * sizeof(std::uint32_t)}};
    writev_all(sock_, iov);
  }

  void churn() {
    for (std::size_t i = 0; i < options_.churn_rows_per_sample; ++i) table_.overwrite_with_fill();
  }

  int sock_;
  OwnerTable& table_;
  const Shape& shape_;
  const ReplyRing* ring_;
  ServeOptions options_;
  BufferedReader reader_;
  ServeStats stats_;
  std::vector<std::uint32_t> slots_;
  std::vector<std::uint64_t> keys_;
  std::vector<std::uint32_t> granted_;
  std::vector<bool> staged_granted_;  // per staging row: handed to the client
  std::vector<std::byte> scratch_;
  std::vector<iovec> iov_;
  std::size_t ring_next_ = 0;
};

}  // namespace

ServeStats serve(int sock, OwnerTable& table, const ReplyRing* ring, const ServeOptions& options) {
  return Connection(sock, table, ring, options).run();
}

}  // namespace replayd::shm_proto
