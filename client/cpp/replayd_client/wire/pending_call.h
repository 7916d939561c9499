// PendingCall: one request awaiting its reply. It holds the promise whose future the caller
// waits on, and how a reply becomes that promise's value (a decoder chosen when armed).
// Threading: armed by the sending thread and completed by the reader thread, never at the
// same time (CallTable hands the call over under its mutex).
#pragma once

#include <exception>
#include <future>
#include <type_traits>
#include <variant>
#include <vector>

#include "replayd_client/episodes/episode_results.h"
#include "replayd_client/wire/reply_decoder.h"

namespace replayd::client {

template <typename T>
using Decoder = T (*)(Reply&&, ReplyDecoder&);

class PendingCall {
 public:
  // Prepares to receive a reply decoded by `Decode`; returns the caller's future. Allocates
  // the promise's shared state (the only allocation of a call besides the reply).
  template <typename T, Decoder<T> Decode>
  std::future<T> arm() {
    auto& promise = promise_.template emplace<std::promise<T>>();
    finish_ = &finish_with<T, Decode>;
    return promise.get_future();
  }

  bool armed() const { return finish_ != nullptr; }
  // Completes the caller's future with the decoded reply, or with what decoding threw.
  void complete(Reply&& reply, ReplyDecoder& decoder) { finish_(*this, &reply, nullptr, &decoder); }
  // Completes the caller's future with `error`.
  void fail(std::exception_ptr error) { finish_(*this, nullptr, std::move(error), nullptr); }

 private:
  using Finish = void (*)(PendingCall&, Reply*, std::exception_ptr, ReplyDecoder*);

  template <typename T, Decoder<T> Decode>
  static void finish_with(PendingCall& call, Reply* reply, std::exception_ptr error,
                          ReplyDecoder* decoder) {
    auto& promise = std::get<std::promise<T>>(call.promise_);
    if (error) {
      promise.set_exception(std::move(error));
    } else {
      try {
        if constexpr (std::is_void_v<T>) {
          Decode(std::move(*reply), *decoder);
          promise.set_value();
        } else {
          promise.set_value(Decode(std::move(*reply), *decoder));
        }
      } catch (...) {
        promise.set_exception(std::current_exception());
      }
    }
    call.promise_.template emplace<std::monostate>();
    call.finish_ = nullptr;
  }

  std::variant<std::monostate, std::promise<void>, std::promise<Reply>,
               std::promise<boost::json::object>, std::promise<boost::json::array>,
               std::promise<ServerHello>, std::promise<Keys>, std::promise<SampleBatch>,
               std::promise<UpdateResult>, std::promise<DeleteResult>, std::promise<std::uint64_t>,
               std::promise<std::vector<std::uint64_t>>, std::promise<SequenceBatch>,
               std::promise<StepPage>, std::promise<DrawnKeys>>
      promise_;
  Finish finish_ = nullptr;
};

}  // namespace replayd::client
