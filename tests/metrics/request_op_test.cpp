// Tests of metrics/request_op.h: wire op names <-> metric labels.
#include "metrics/request_op.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>

using replayd::metrics::kRequestOpCount;
using replayd::metrics::request_op_name;
using replayd::metrics::request_op_of;
using replayd::metrics::RequestOp;

TEST_CASE("every protocol op maps to its own label and back") {
  std::set<std::string> names;
  for (std::size_t i = 0; i < kRequestOpCount; ++i) {
    const auto op = static_cast<RequestOp>(i);
    names.insert(std::string(request_op_name(op)));
    if (op != RequestOp::unknown) CHECK(request_op_of(request_op_name(op)) == op);
  }
  CHECK(names.size() == kRequestOpCount);
  CHECK(request_op_of("delete") == RequestOp::delete_keys);
  CHECK(request_op_of("snapshot") == RequestOp::snapshot);
}

TEST_CASE("an op name the protocol does not define is labelled unknown") {
  CHECK(request_op_of("no_such_op") == RequestOp::unknown);
  CHECK(request_op_of("") == RequestOp::unknown);
  CHECK(request_op_of("unknown") == RequestOp::unknown);
  CHECK(request_op_of("INSERT") == RequestOp::unknown);
}
