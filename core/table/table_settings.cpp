// A table's settings changed at run time (Table::set_rate_limiter, set_priority_exponent):
// validated as a whole before anything changes; what becomes of the counters and of the
// sampler's masses is stated in table.h and rate_limiter.h.
#include <cmath>
#include <limits>

#include "core/number_text.h"
#include "core/table/episodic_table.h"
#include "core/table/table.h"

namespace replayd {

Status Table::set_rate_limiter(const RateLimiterConfig& config) {
  REPLAYD_RETURN_IF_ERROR(check_rate_limiter(config));
  rate_limiter_.reconfigure(config);
  config_.rate_limiter = config;
  return Ok{};
}

Status Table::check_rate_limiter(const RateLimiterConfig& config) const {
  TableConfig next = config_;
  next.rate_limiter = config;
  // The byte budget is unchanged by a limiter: only the limiter's own rules are checked.
  if (auto valid = validate_table_config(next, std::numeric_limits<std::uint64_t>::max()); !valid) {
    return make_error(valid.error().code, "table '" + name() + "': " + valid.error().message);
  }
  auto limiter = RateLimiter::create(config);
  if (!limiter) {
    return make_error(limiter.error().code,
                      "table '" + name() + "': rate_limiter: " + limiter.error().message);
  }
  return Ok{};
}

Status Table::set_priority_exponent(double exponent) {
  const std::string who = "table '" + name() + "': ";
  if (config_.sampler.kind != SelectorKind::prioritized) {
    return make_error(ErrorCode::failed_precondition,
                      who + "priority_exponent applies to a prioritized sampler, this table's is " +
                          std::string(selector_kind_name(config_.sampler.kind)));
  }
  if (!std::isfinite(exponent) || exponent < 0) {
    return make_error(
        ErrorCode::invalid_argument,
        who + "priority_exponent must be finite and >= 0, got " + number_text(exponent));
  }
  SelectorConfig sampler_config = config_.sampler;
  sampler_config.priority_exponent = exponent;
  auto sampler = make_selector(sampler_config, config_.capacity);
  if (!sampler) return make_error(sampler.error().code, who + sampler.error().message);
  // Every stored priority must give a finite mass under the new exponent before any moves.
  Status status = Ok{};
  sampler_->for_each_in_order([&](std::uint32_t slot) {
    if (status) status = (*sampler)->check_priority(storage_.priority(slot));
  });
  if (!status) return make_error(status.error().code, who + status.error().message);
  sampler_->for_each_in_order(
      [&](std::uint32_t slot) { (*sampler)->insert(slot, storage_.priority(slot)); });
  sampler_ = std::move(sampler).value();
  config_.sampler.priority_exponent = exponent;
  versions_.drop_eligible();  // built again, with the new exponent, when next needed
  if (episodic_) episodic_->set_priority_exponent(exponent);
  return Ok{};
}

}  // namespace replayd
