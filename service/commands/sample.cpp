// `sample` (docs/PROTOCOL.md): n draws with the table's selector; runs once the table holds
// enough items and the rate limiter admits it. A reply larger than max_frame_bytes is refused
// before anything is drawn. With "nstep" it draws n-step transitions of an episodic table
// (service/commands/sample_nstep.cpp); without, so does a table with frame fields (k = 1).
#include <cmath>

#include "service/commands/admission.h"
#include "service/commands/handlers.h"
#include "service/protocol/sample_reply.h"

namespace replayd::service::commands {
namespace {

class SampleWork final : public Deferred {
 public:
  SampleWork(std::shared_ptr<HostedTable> table, std::uint64_t request_id, std::uint64_t n,
             double beta)
      : table_(std::move(table)), request_id_(request_id), n_(n), beta_(beta) {}

  WaitQueue& queue() override { return table_->sample_waiters; }
  bool ready() const override { return table_->table->may_sample(n_); }
  const HostedTable* table() const override { return table_.get(); }
  std::string why_not_ready() const override {
    return "not enough items or the rate limiter does not admit this sample now";
  }
  Reply run() override {
    Reply reply = sample_and_encode(*table_, request_id_, n_, beta_);
    table_changed(*table_);
    return reply;
  }

 private:
  std::shared_ptr<HostedTable> table_;
  std::uint64_t request_id_;
  std::uint64_t n_;
  double beta_;
};

}  // namespace

Result<Outcome> sample(Call& call) {
  REPLAYD_ASSIGN_OR_RETURN(double beta, call.args.number_or("beta", 0.4));
  if (!std::isfinite(beta) || beta < 0) return call.args.error("beta", "must be finite and >= 0");
  REPLAYD_ASSIGN_OR_RETURN(auto nstep, call.args.optional_uint("nstep"));
  if (nstep) return sample_nstep(call, *nstep, beta);
  // A table with frame fields holds steps whose transitions only n-step samples assemble.
  if (call.table->table->schema().has_frames()) return sample_nstep(call, 1, beta);
  if (call.args.value("gamma")) return call.args.error("gamma", "needs \"nstep\"");
  // Steps of an episodic table are items too (no return, no discount), unless
  // max_times_sampled retires them per window.
  if (call.table->table->episodic() && call.table->table->config().max_times_sampled != 0) {
    return call.args.error("nstep", "table '" + call.table->table->name() +
                                        "' is episodic with max_times_sampled: sample it with "
                                        "\"nstep\" (k = 1 is the plain transition) or with "
                                        "sample_sequences");
  }
  const std::uint64_t reply_bytes = sample_reply_bytes(*call.table->table, call.n);
  if (reply_bytes > call.service.limits.max_frame_bytes) {
    return make_error(ErrorCode::resource_exhausted,
                      "table '" + call.table->table->name() +
                          "': a sample of n = " + std::to_string(call.n) + " would be a reply of " +
                          std::to_string(reply_bytes) + " bytes, more than max_frame_bytes = " +
                          std::to_string(call.service.limits.max_frame_bytes) +
                          "; sample fewer items per request");
  }
  return Outcome(std::make_unique<SampleWork>(call.table, call.request_id, call.n, beta));
}

}  // namespace replayd::service::commands
