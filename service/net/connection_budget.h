// ConnectionBudget: how many connections one listener may hold open, counted per listener so
// that one listener's clients (or strangers) can never use up another's. A listener adds
// each Session it starts; a session counts until it is destroyed (its weak_ptr expires).
// Costs: add() O(1) amortised; live() prunes expired entries, O(entries) but amortised O(1)
// per connection. Threading: io_context thread only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <vector>

namespace replayd::service {

class ConnectionBudget {
 public:
  explicit ConnectionBudget(std::size_t max_connections) : max_(max_connections) {}

  std::size_t max() const { return max_; }
  // Open connections counted now.
  std::size_t live() {
    std::erase_if(sessions_, [](const std::weak_ptr<void>& session) { return session.expired(); });
    return sessions_.size();
  }
  bool full() { return live() >= max_; }
  // Counts `session` until it is destroyed. Precondition: !full().
  void add(std::weak_ptr<void> session) { sessions_.push_back(std::move(session)); }

 private:
  std::size_t max_;
  std::vector<std::weak_ptr<void>> sessions_;
};

}  // namespace replayd::service
