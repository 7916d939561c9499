// The description of an episodic table (docs/TRAJECTORIES.md, "Configuration";
// docs/PROTOCOL.md, "Episodic tables"), ready for Client::create_table. Pure functions; no
// connection involved; the server validates the result.
#pragma once

#include <boost/json/object.hpp>
#include <optional>
#include <string>
#include <vector>

namespace replayd::client {

struct EpisodicOptions {
  // The scalar float32/float64 field an n-step sample sums into the return; nullopt: the
  // server's default "rew".
  std::optional<std::string> reward;
  // The fields an n-step sample takes from the window's last step; nullopt: the server's
  // default ["next_obs"]; empty: none.
  std::optional<std::vector<std::string>> bootstrap;
};

// `description` (any table description as in docs/CONFIG.md: name, capacity, fields,
// sampler "uniform" or "prioritized", ...) with "episodic": true and the options' keys set.
boost::json::object episodic_table(boost::json::object description,
                                   const EpisodicOptions& options = {});

}  // namespace replayd::client
