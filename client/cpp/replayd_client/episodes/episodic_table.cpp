#include "replayd_client/episodes/episodic_table.h"

#include <boost/json/array.hpp>
#include <utility>

namespace replayd::client {

boost::json::object episodic_table(boost::json::object description,
                                   const EpisodicOptions& options) {
  description["episodic"] = true;
  if (options.reward) description["reward"] = *options.reward;
  if (options.bootstrap) {
    boost::json::array fields;
    for (const auto& name : *options.bootstrap)
      fields.emplace_back(name);
    description["bootstrap"] = std::move(fields);
  }
  return description;
}

}  // namespace replayd::client
