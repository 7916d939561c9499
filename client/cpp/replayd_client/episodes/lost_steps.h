// LostSteps: what the server did not store of an EpisodeWriter's requests when its
// connection was lost (docs/TRAJECTORIES.md, "Writers and lost connections"): the steps and
// episode ends never sent, those the server refused (an error reply, such as shutting_down),
// and those sent whose replies never came, per episode. message() is the text of the
// Error(connection_lost) the writer throws. Plain data; one thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "replayd_client/client.h"

namespace replayd::client {

// What one append_steps or end_episode request carries: steps per episode (in the order
// the episodes first appear) and the ends that follow them.
struct WriterRequest {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> steps;  // (episode, steps)
  std::vector<EpisodeEnding> ends;

  // The request of these rows (the episode of each) and ends. O(rows x episodes in them).
  static WriterRequest of(std::span<const std::uint64_t> row_episodes,
                          std::span<const EpisodeEnding> ends);
};

class LostSteps {
 public:
  // Steps and ends the server never received.
  void not_sent(const WriterRequest& request) { add(unsent_, request); }
  // Steps and ends of a request the server answered with an error: not stored.
  void refused(const WriterRequest& request) { add(refused_, request); }
  // Steps and ends sent without a reply: the server may or may not have stored them.
  void not_confirmed(const WriterRequest& request) { add(unconfirmed_, request); }

  // "table 't': the connection was lost (WHY); 4 steps of episode 1 were not sent; the end
  // of episode 1 (terminated) was not sent: the server ends it as truncated; ... The server
  // ends this writer's open episodes as truncated with the steps it stored; the next append
  // of an env starts a new episode".
  std::string message(std::string_view table, std::string_view why) const;

 private:
  static void add(WriterRequest& into, const WriterRequest& request);

  WriterRequest unsent_;
  WriterRequest refused_;
  WriterRequest unconfirmed_;
};

}  // namespace replayd::client
