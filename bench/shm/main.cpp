// replayd_shm_proto: measures the two candidate same-host data planes of docs/SHM.md against
// today's socket path, on the W1 and W2 shapes. This process is the owner (pinned to CPU 0,
// holding the tables); each measurement forks a client pinned to CPU 1 that receives the
// table's memfds with SCM_RIGHTS, as a client would at hello. Variants are interleaved and
// repeated; the report gives medians.
//
// Usage: replayd_shm_proto [--reps N] [--seconds S] [--check]
//   --reps N     repetitions of every variant, interleaved (default 5)
//   --seconds S  timed window of each measurement, after a 0.2 s warm-up (default 1.0)
//   --check      only the correctness checks: no torn or stale row accepted under a
//                hammering writer, and a writer killed mid-reservation leaks no slot
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "clients.h"
#include "owner.h"
#include "pipeline.h"
#include "reply_ring.h"
#include "shared_table.h"
#include "unix_channel.h"

namespace replayd::shm_proto {
namespace {

constexpr int kOwnerCpu = 0;
constexpr int kClientCpu = 1;
constexpr int kSocketBufferBytes = 4 << 20;  // as the server's limits.socket_send_buffer_bytes
constexpr std::size_t kDepth = 8;
constexpr std::size_t kStagingRows = 2 * kDepth * 16;  // the credit of a commit-16 writer

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (::sched_setaffinity(0, sizeof set, &set) != 0)
    throw std::runtime_error("sched_setaffinity(" + std::to_string(cpu) + "): " + std::strerror(errno));
}

enum class Variant { sample_copy, sample_mapped, sample_mapped_writer, sample_ring, insert_copy,
                     insert_copy_16,
                     insert_mapped_1, insert_mapped_16, insert_staged_1, insert_staged_16,
                     die_mid_reservation };

const char* variant_name(Variant variant) {
  switch (variant) {
    case Variant::sample_copy: return "sample (a) socket copy";
    case Variant::sample_mapped: return "sample (b) mapped table";
    case Variant::sample_mapped_writer: return "sample (b) mapped, writer active";
    case Variant::sample_ring: return "sample (c) reply ring";
    case Variant::insert_copy: return "insert 1/call (a) socket, 1 per frame";
    case Variant::insert_copy_16: return "insert 1/call (a) socket, 16 per frame";
    case Variant::insert_mapped_1: return "insert 1/call (b) mapped, commit 1";
    case Variant::insert_mapped_16: return "insert 1/call (b) mapped, commit 16";
    case Variant::insert_staged_1: return "insert 1/call (b') staged, commit 1";
    case Variant::insert_staged_16: return "insert 1/call (b') staged, commit 16";
    case Variant::die_mid_reservation: return "writer killed mid-reservation";
  }
  return "?";
}

struct Measurement {
  ClientResult client;
  ServeStats owner;
  double owner_cpu_s = 0;
};

// The owner's table and its reply ring for one shape.
struct Host {
  explicit Host(const Shape& s) : shape(s), table(shape) {
    const std::size_t slot_bytes = ring_slot_bytes(shape.sample_batch * shape.item_bytes());
    ring_fd = ::memfd_create("replayd-reply-ring", MFD_CLOEXEC);
    if (ring_fd < 0 || ::ftruncate(ring_fd, static_cast<off_t>(kDepth * slot_bytes)) != 0)
      throw std::runtime_error("memfd for the reply ring failed");
    ring = map_ring(ring_fd, kDepth, slot_bytes, true);
    staging_fd = ::memfd_create("replayd-staging", MFD_CLOEXEC);
    if (staging_fd < 0 || ::ftruncate(staging_fd, static_cast<off_t>(staging_bytes())) != 0)
      throw std::runtime_error("memfd for the staging area failed");
    staging = map_ring(staging_fd, 1, staging_bytes(), true).base;
  }
  std::size_t staging_bytes() const { return ring_slot_bytes(kStagingRows * shape.item_bytes()); }
  Shape shape;
  OwnerTable table;
  int ring_fd = -1;
  ReplyRing ring;
  int staging_fd = -1;  // one explorer's staging area (one explorer at a time here)
  std::byte* staging = nullptr;
};

ClientResult run_client(Variant variant, int sock, const Shape& shape, std::size_t ring_slot_bytes,
                        std::size_t staging_bytes, const ClientOptions& options) {
  // Hello: the table's memfds, the reply ring and the staging area arrive by SCM_RIGHTS.
  const std::vector<int> fds = recv_fds(sock, 4);
  const bool explorer = variant == Variant::insert_mapped_1 || variant == Variant::insert_mapped_16 ||
                        variant == Variant::die_mid_reservation;
  const TableView table = map_table(shape, fds[0], fds[1], explorer);
  ClientOptions run = options;
  switch (variant) {
    case Variant::sample_copy: return run_sample_copy(sock, shape, run);
    case Variant::sample_mapped:
    case Variant::sample_mapped_writer: return run_sample_mapped(sock, table, run);
    case Variant::sample_ring:
      return run_sample_ring(sock, shape, map_ring(fds[2], kDepth, ring_slot_bytes, false), run);
    case Variant::insert_copy: run.commit_every = 1; return run_insert_copy(sock, shape, run);
    case Variant::insert_copy_16: run.commit_every = 16; return run_insert_copy(sock, shape, run);
    case Variant::insert_mapped_1: run.commit_every = 1; return run_insert_mapped(sock, table, run);
    case Variant::insert_mapped_16: run.commit_every = 16; return run_insert_mapped(sock, table, run);
    case Variant::insert_staged_1:
    case Variant::insert_staged_16:
      run.commit_every = variant == Variant::insert_staged_1 ? 1 : 16;
      return run_insert_staged(sock, shape, map_ring(fds[3], 1, staging_bytes, true).base, kStagingRows, run);
    case Variant::die_mid_reservation: die_mid_reservation(sock, table);
  }
  throw std::logic_error("unknown variant");
}

// Forks a client pinned to CPU 1 and serves it from this process until it stops.
Measurement measure(Host& host, Variant variant, const ClientOptions& options,
                    const ServeOptions& serve_options) {
  const auto [owner_sock, client_sock] = make_socket_pair(kSocketBufferBytes);
  int result_pipe[2];
  if (::pipe(result_pipe) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int status = 0;
    try {
      ::close(owner_sock);
      ::close(result_pipe[0]);
      // The client starts from the descriptors it is sent, not the ones fork copied.
      ::close(host.table.data_fd());
      ::close(host.table.stamp_fd());
      ::close(host.ring_fd);
      ::close(host.staging_fd);
      pin_to(kClientCpu);
      const ClientResult result = run_client(variant, client_sock, host.shape, host.ring.slot_bytes,
                                                host.staging_bytes(), options);
      write_all(result_pipe[1], &result, sizeof result);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "client (%s): %s\n", variant_name(variant), error.what());
      status = 1;
    }
    ::_exit(status);
  }
  ::close(client_sock);
  ::close(result_pipe[1]);
  const int fds[4] = {host.table.data_fd(), host.table.stamp_fd(), host.ring_fd, host.staging_fd};
  send_fds(owner_sock, fds);
  Measurement measurement;
  const double cpu_before = thread_cpu_s();
  ServeOptions with_staging = serve_options;
  with_staging.staging = host.staging;
  with_staging.staging_rows = kStagingRows;
  measurement.owner = serve(owner_sock, host.table, &host.ring, with_staging);
  measurement.owner_cpu_s = thread_cpu_s() - cpu_before;
  ::close(owner_sock);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  if (variant != Variant::die_mid_reservation || !killed) {
    if (::read(result_pipe[0], &measurement.client, sizeof measurement.client) !=
        static_cast<ssize_t>(sizeof measurement.client))
      throw std::runtime_error(std::string("no result from the client of ") + variant_name(variant));
  }
  ::close(result_pipe[0]);
  return measurement;
}

double measure_memcpy_gb_s(double seconds) {
  int result_pipe[2];
  if (::pipe(result_pipe) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid == 0) {
    pin_to(kClientCpu);
    constexpr std::size_t kBytes = 64 << 20;
    std::vector<char> from(kBytes, 1), to(kBytes, 0);
    std::size_t copied = 0;
    const auto start = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      std::memcpy(to.data(), from.data(), kBytes);
      from[copied % kBytes] = to[(copied + 7) % kBytes];  // keeps the copy live
      copied += kBytes;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } while (elapsed < seconds);
    const double gb_s = static_cast<double>(copied) / elapsed / 1e9;
    write_all(result_pipe[1], &gb_s, sizeof gb_s);
    ::_exit(0);
  }
  ::close(result_pipe[1]);
  double gb_s = 0;
  if (::read(result_pipe[0], &gb_s, sizeof gb_s) != sizeof gb_s) throw std::runtime_error("memcpy probe failed");
  ::close(result_pipe[0]);
  ::waitpid(pid, nullptr, 0);
  return gb_s;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

int run_checks(double seconds) {
  int failures = 0;
  // Torn rows: tiny tables, every sample followed by a full turn of overwrites.
  for (Shape shape : {w1(), w2()}) {
    shape.name += "-small";
    shape.capacity_items = shape.name == "W1-small" ? 64 : 16;
    shape.sample_batch = shape.capacity_items / 2;
    Host host(shape);
    ClientOptions options{0.1, seconds, kDepth, true};
    const Measurement m = measure(host, Variant::sample_mapped_writer, options,
                                  ServeOptions{shape.capacity_items});
    const auto& c = m.client;
    std::printf("%s torn-row check: %llu rows gathered, %llu changed under the copy (re-asked), "
                "%llu of those held bytes of another item; %llu such rows accepted\n",
                shape.name.c_str(), static_cast<unsigned long long>(c.rows_gathered),
                static_cast<unsigned long long>(c.rows_invalid),
                static_cast<unsigned long long>(c.torn_caught),
                static_cast<unsigned long long>(c.torn_accepted));
    failures += c.torn_accepted != 0 || c.torn_caught == 0;
  }
  // A writer killed mid-reservation: nothing it held is sampleable, nothing leaks.
  Shape shape = w1();
  Host host(shape);
  const Measurement m = measure(host, Variant::die_mid_reservation, ClientOptions{}, ServeOptions{});
  const std::size_t accounted = host.table.sampleable() + host.table.free_slots() + host.table.reserved();
  std::printf("writer killed mid-reservation: %zu slots released, %zu reserved, %zu free, "
              "%zu sampleable, %zu of %zu slots accounted for\n",
              m.owner.reservations_released, host.table.reserved(), host.table.free_slots(),
              host.table.sampleable(), accounted, shape.capacity_items);
  failures += m.owner.reservations_released != 64 || host.table.reserved() != 0 ||
              accounted != shape.capacity_items;
  std::printf(failures == 0 ? "checks passed\n" : "CHECKS FAILED\n");
  return failures == 0 ? 0 : 1;
}

int run_benchmark(int reps, double seconds) {
  const std::vector<Variant> variants = {
      Variant::sample_copy, Variant::sample_mapped, Variant::sample_mapped_writer,
      Variant::sample_ring, Variant::insert_copy, Variant::insert_copy_16, Variant::insert_mapped_1,
      Variant::insert_mapped_16, Variant::insert_staged_1, Variant::insert_staged_16};
  std::vector<Host*> hosts = {new Host(w1()), new Host(w2())};
  std::map<std::pair<int, int>, std::vector<Measurement>> results;  // (host, variant)
  std::vector<double> memcpy_gb_s;
  const ClientOptions options{0.2, seconds, kDepth};
  for (int rep = 0; rep < reps; ++rep) {
    memcpy_gb_s.push_back(measure_memcpy_gb_s(seconds));
    for (std::size_t h = 0; h < hosts.size(); ++h) {
      for (Variant variant : variants) {
        ServeOptions serve_options;
        // Writer active: explorers inserting one item per 8 sampled (replay ratio 8).
        if (variant == Variant::sample_mapped_writer)
          serve_options.churn_rows_per_sample = hosts[h]->shape.sample_batch / 8;
        results[{static_cast<int>(h), static_cast<int>(variant)}].push_back(
            measure(*hosts[h], variant, options, serve_options));
      }
    }
    std::fprintf(stderr, "rep %d of %d done\n", rep + 1, reps);
  }
  const double memcpy_median = median(memcpy_gb_s);
  std::printf("memcpy, one core (CPU %d), 64 MiB: %.2f GB/s (median of %d)\n\n", kClientCpu,
              memcpy_median, reps);
  std::printf("| workload | variant | items/s (median) | min..max | GB/s | vs (a) | owner CPU ns/item | client CPU ns/item | rows re-asked |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    const Shape& shape = hosts[h]->shape;
    double sample_base = 0, insert_base = 0;
    for (Variant variant : variants) {
      const auto& runs = results[{static_cast<int>(h), static_cast<int>(variant)}];
      std::vector<double> rates, owner_ns, client_ns;
      double gathered = 0, invalid = 0;
      for (const auto& m : runs) {
        rates.push_back(m.client.items_per_s());
        owner_ns.push_back(m.owner_cpu_s * 1e9 / static_cast<double>(std::max<std::uint64_t>(1, m.client.items_total)));
        client_ns.push_back(m.client.cpu_s * 1e9 / static_cast<double>(std::max<std::uint64_t>(1, m.client.items)));
        gathered += static_cast<double>(m.client.rows_gathered);
        invalid += static_cast<double>(m.client.rows_invalid);
      }
      const double rate = median(rates);
      if (variant == Variant::sample_copy) sample_base = rate;
      if (variant == Variant::insert_copy) insert_base = rate;
      const bool sample = variant <= Variant::sample_ring;
      const double base = sample ? sample_base : insert_base;
      const bool mapped_sample = variant == Variant::sample_mapped || variant == Variant::sample_mapped_writer;
      char reasked[32] = "";
      if (mapped_sample) std::snprintf(reasked, sizeof reasked, "%.4f%%", gathered > 0 ? 100 * invalid / gathered : 0);
      std::printf("| %s | %s | %.0f | %.0f..%.0f | %.2f | %.2f | %.0f | %.0f | %s |\n", shape.name.c_str(),
                  variant_name(variant), rate, *std::min_element(rates.begin(), rates.end()),
                  *std::max_element(rates.begin(), rates.end()),
                  rate * static_cast<double>(shape.item_bytes()) / 1e9, rate / base, median(owner_ns),
                  median(client_ns), reasked);
    }
  }
  for (Variant variant : {Variant::sample_copy, Variant::sample_mapped, Variant::sample_ring}) {
    std::vector<double> rates;
    for (const auto& m : results[{1, static_cast<int>(variant)}]) rates.push_back(m.client.items_per_s());
    std::printf("%sW2 %s: bandwidth into the learner / memcpy = %.2f\n",
                variant == Variant::sample_copy ? "\n" : "", variant_name(variant),
                median(rates) * static_cast<double>(w2().item_bytes()) / 1e9 / memcpy_median);
  }
  for (Host* host : hosts) delete host;
  return 0;
}

}  // namespace
}  // namespace replayd::shm_proto

int main(int argc, char** argv) {
  using namespace replayd::shm_proto;
  int reps = 5;
  double seconds = 1.0;
  bool check = false;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--reps" && i + 1 < argc) {
        reps = std::stoi(argv[++i]);
      } else if (arg == "--seconds" && i + 1 < argc) {
        seconds = std::stod(argv[++i]);
      } else if (arg == "--check") {
        check = true;
      } else {
        std::fprintf(stderr, "unknown argument '%s' (--reps N, --seconds S, --check)\n", arg.c_str());
        return 2;
      }
    }
    if (reps < 1 || seconds <= 0) {
      std::fprintf(stderr, "--reps must be >= 1 and --seconds > 0\n");
      return 2;
    }
    pin_to(kOwnerCpu);
    return check ? run_checks(seconds) : run_benchmark(reps, seconds);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "replayd_shm_proto: %s\n", error.what());
    return 1;
  }
}
