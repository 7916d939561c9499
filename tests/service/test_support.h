// Helpers shared by the service tests: table descriptions, polling a condition with a
// generous deadline (never a sleep as synchronisation), and reading counters from info.
// Threading: plain functions; each test owns its clients.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <string_view>
#include <thread>

#include "replayd_client/client.h"

namespace replayd::testing {

namespace rc = replayd::client;

// Deadline for anything that should happen "soon" on a loaded 2-core machine.
inline constexpr std::chrono::seconds kPatience{30};

inline boost::json::object json_object(std::string_view text) {
  return boost::json::parse(text).as_object();
}

// Polls `condition` every few ms until it holds or kPatience passes; returns whether it held.
template <typename Condition>
bool eventually(Condition condition) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

template <typename T>
bool ready_soon(std::future<T>& future) {
  return future.wait_for(kPatience) == std::future_status::ready;
}

template <typename T>
bool ready_now(std::future<T>& future) {
  return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

// info(table).tables[0][group][key], e.g. ("waiting", "samples") or ("counters", "inserts").
inline std::uint64_t table_stat(rc::Client& client, std::string_view table, std::string_view group,
                                std::string_view key) {
  const auto info = client.info(table);
  const auto& entry = info.at("tables").as_array().at(0).as_object();
  return entry.at(group).as_object().at(key).to_number<std::uint64_t>();
}

inline std::uint64_t table_size(rc::Client& client, std::string_view table) {
  const auto info = client.info(table);
  return info.at("tables").as_array().at(0).as_object().at("size").to_number<std::uint64_t>();
}

// The code of the Error that `call` throws; fails the test (by throwing) if it throws none.
template <typename Call>
rc::ErrorCode error_code_of(Call call) {
  try {
    call();
  } catch (const rc::Error& e) {
    return e.code();
  }
  throw std::runtime_error("expected the call to fail with an error reply");
}

}  // namespace replayd::testing
