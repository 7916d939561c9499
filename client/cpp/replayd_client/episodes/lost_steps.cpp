#include "replayd_client/episodes/lost_steps.h"

#include <algorithm>

namespace replayd::client {
namespace {

void count_steps(std::vector<std::pair<std::uint64_t, std::uint64_t>>& steps, std::uint64_t episode,
                 std::uint64_t n) {
  const auto known = std::find_if(steps.begin(), steps.end(),
                                  [&](const auto& entry) { return entry.first == episode; });
  if (known != steps.end()) {
    known->second += n;
  } else {
    steps.emplace_back(episode, n);
  }
}

std::string ending(const EpisodeEnding& end) {
  return "the end of episode " + std::to_string(end.episode) + " (" +
         (end.terminated ? "terminated" : "truncated") + ")";
}

}  // namespace

WriterRequest WriterRequest::of(std::span<const std::uint64_t> row_episodes,
                                std::span<const EpisodeEnding> ends) {
  WriterRequest request;
  for (const std::uint64_t episode : row_episodes)
    count_steps(request.steps, episode, 1);
  request.ends.assign(ends.begin(), ends.end());
  return request;
}

void LostSteps::add(WriterRequest& into, const WriterRequest& request) {
  for (const auto& [episode, n] : request.steps)
    count_steps(into.steps, episode, n);
  into.ends.insert(into.ends.end(), request.ends.begin(), request.ends.end());
}

std::string LostSteps::message(std::string_view table, std::string_view why) const {
  std::vector<std::string> parts;
  // Steps and ends that were certainly not stored: each said on its own.
  const auto definitely = [&](const WriterRequest& request, const std::string& what) {
    auto steps = request.steps;
    std::sort(steps.begin(), steps.end());
    for (const auto& [episode, n] : steps)
      parts.push_back(std::to_string(n) + " steps of episode " + std::to_string(episode) +
                      " were " + what);
    for (const EpisodeEnding& end : request.ends)
      parts.push_back(ending(end) + " was " + what + ": the server ends it as truncated");
  };
  definitely(unsent_, "not sent");
  definitely(refused_, "refused by the server (not stored)");
  auto steps = unconfirmed_.steps;
  std::sort(steps.begin(), steps.end());
  std::string unconfirmed;
  for (const auto& [episode, n] : steps)
    unconfirmed += (unconfirmed.empty() ? "" : ", ") + std::to_string(n) + " steps of episode " +
                   std::to_string(episode);
  for (const EpisodeEnding& end : unconfirmed_.ends)
    unconfirmed += (unconfirmed.empty() ? "" : ", ") + ending(end);
  if (!unconfirmed.empty())
    parts.push_back("sent but not confirmed (the server may or may not have stored them): " +
                    unconfirmed);

  std::string text =
      "table '" + std::string(table) + "': the connection was lost (" + std::string(why) + "); ";
  if (parts.empty()) {
    text += "every step appended was stored";
  } else {
    for (std::size_t i = 0; i < parts.size(); ++i)
      text += (i > 0 ? "; " : "") + parts[i];
  }
  return text +
         ". The server ends this writer's open episodes as truncated with the steps it stored; "
         "the next append of an env starts a new episode";
}

}  // namespace replayd::client
