#include "report.h"

#include <algorithm>
#include <cstdio>

namespace replayd::loadgen {
namespace {

constexpr double kUpdateBytesPerKey = 16;  // uint64 key + float64 priority

OpReport op_report(const std::string& name, const std::vector<const OpTotals*>& totals,
                   double elapsed_s, double bytes_per_item) {
  OpReport report;
  report.op = name;
  LatencyHistogram latency;
  for (const auto* t : totals) {
    report.calls += t->calls;
    report.items += t->items;
    latency.merge(t->latency);
  }
  if (elapsed_s > 0) report.items_per_s = static_cast<double>(report.items) / elapsed_s;
  report.mb_per_s = report.items_per_s * bytes_per_item / 1e6;
  report.p50_us = latency.quantile_us(0.5);
  report.p99_us = latency.quantile_us(0.99);
  report.p999_us = latency.quantile_us(0.999);
  return report;
}

std::string format(const char* spec, double value) {
  char text[64];
  std::snprintf(text, sizeof text, spec, value);
  return text;
}

}  // namespace

double server_transitions_per_cpu_s(const RunReport& report) {
  if (report.server_cpu_s <= 0) return 0;
  std::uint64_t items = 0;
  for (const auto& op : report.ops) {
    if (op.op != "update") items += op.items;
  }
  return static_cast<double>(items) / report.server_cpu_s;
}

RunReport summarize(const LoadgenOptions& options, const Workload& workload, const WorkerRun& run) {
  RunReport report;
  report.options = options;
  report.workload = workload;
  report.failed_workers = run.failed_workers;
  std::vector<const OpTotals*> inserts, samples, updates;
  for (const auto& r : run.explorers) {
    report.elapsed_s = std::max(report.elapsed_s, r.elapsed_s);
    report.errors += r.errors;
    inserts.push_back(&r.insert);
  }
  for (const auto& r : run.learners) {
    report.elapsed_s = std::max(report.elapsed_s, r.elapsed_s);
    report.errors += r.errors;
    samples.push_back(&r.sample);
    updates.push_back(&r.update);
  }
  const double item_bytes = static_cast<double>(workload.item_bytes);
  if (!inserts.empty())
    report.ops.push_back(op_report("insert", inserts, report.elapsed_s, item_bytes));
  if (!samples.empty())
    report.ops.push_back(op_report("sample", samples, report.elapsed_s, item_bytes));
  if (options.prioritized && !updates.empty()) {
    report.ops.push_back(op_report("update", updates, report.elapsed_s, kUpdateBytesPerKey));
  }
  return report;
}

void print_table(std::ostream& out, const RunReport& report) {
  const auto& o = report.options;
  out << "replayd_loadgen " << (o.label.empty() ? "" : o.label + " ") << "workload "
      << report.workload.name << " (" << report.workload.item_bytes << " B/item), " << o.explorers
      << " explorer(s) x chunk " << o.insert_chunk_items << ", " << o.learners
      << " learner(s) x batch " << o.sample_batch_items
      << (o.prioritized ? " prioritized+update" : " uniform") << ", depth " << o.depth << ", "
      << format("%.2f", report.elapsed_s) << " s, " << report.server_address << "\n";
  out << "| op | calls | items/s | MB/s | p50 us | p99 us | p999 us "
         "|\n|---|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& op : report.ops) {
    out << "| " << op.op << " | " << op.calls << " | " << format("%.0f", op.items_per_s) << " | "
        << format("%.1f", op.mb_per_s) << " | " << format("%.1f", op.p50_us) << " | "
        << format("%.1f", op.p99_us) << " | " << format("%.1f", op.p999_us) << " |\n";
  }
  if (report.server_cpu_s >= 0 && report.elapsed_s > 0) {
    out << "server CPU: " << format("%.2f", report.server_cpu_s) << " s ("
        << format("%.0f", 100 * report.server_cpu_s / report.elapsed_s) << "% of one core), "
        << format("%.0f", server_transitions_per_cpu_s(report))
        << " transitions (inserted + sampled) per server CPU-second\n";
  }
  if (report.errors || report.failed_workers) {
    out << "errors: " << report.errors << " failed requests, " << report.failed_workers
        << " failed workers\n";
  }
  if (report.has_limits) {
    const auto& l = report.limits;
    out << "machine: memcpy " << format("%.2f", l.memcpy_gb_s) << " GB/s, unix socket "
        << format("%.2f", l.unix_socket_gb_s) << " GB/s, tcp loopback "
        << format("%.2f", l.tcp_loopback_gb_s) << " GB/s, unix 64 B round trip p50 "
        << format("%.1f", l.unix_rtt_us_p50) << " us, p99 " << format("%.1f", l.unix_rtt_us_p99)
        << " us\n";
    for (const auto& op : report.ops) {
      if (op.op == "update" || l.unix_socket_gb_s <= 0) continue;
      out << op.op << " MB/s / unix socket bandwidth: "
          << format("%.2f", op.mb_per_s / (l.unix_socket_gb_s * 1e3)) << "\n";
    }
  }
}

boost::json::object to_json(const RunReport& report) {
  const auto& o = report.options;
  boost::json::object config{{"label", o.label},
                             {"workload", report.workload.name},
                             {"item_bytes", report.workload.item_bytes},
                             {"transport", o.transport == Transport::tcp ? "tcp" : "unix"},
                             {"explorers", o.explorers},
                             {"learners", o.learners},
                             {"insert_chunk", o.insert_chunk_items},
                             {"sample_batch", o.sample_batch_items},
                             {"prioritized", o.prioritized},
                             {"depth", o.depth},
                             {"duration_s", o.duration_s}};
  boost::json::object ops;
  for (const auto& op : report.ops) {
    ops[op.op] = {{"calls", op.calls},       {"items", op.items},   {"items_per_s", op.items_per_s},
                  {"mb_per_s", op.mb_per_s}, {"p50_us", op.p50_us}, {"p99_us", op.p99_us},
                  {"p999_us", op.p999_us}};
  }
  boost::json::object out{{"config", config},
                          {"server", report.server_address},
                          {"elapsed_s", report.elapsed_s},
                          {"errors", report.errors},
                          {"failed_workers", report.failed_workers},
                          {"ops", ops}};
  if (report.server_cpu_s >= 0) {
    out["server_cpu_s"] = report.server_cpu_s;
    out["server_transitions_per_cpu_s"] = server_transitions_per_cpu_s(report);
  }
  if (report.has_limits) {
    const auto& l = report.limits;
    out["machine"] = {{"memcpy_gb_s", l.memcpy_gb_s},
                      {"unix_socket_gb_s", l.unix_socket_gb_s},
                      {"tcp_loopback_gb_s", l.tcp_loopback_gb_s},
                      {"unix_rtt_us_p50", l.unix_rtt_us_p50},
                      {"unix_rtt_us_p99", l.unix_rtt_us_p99}};
  }
  return out;
}

}  // namespace replayd::loadgen
