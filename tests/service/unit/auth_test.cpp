// Tests of service/auth.h: the token check of a TCP connection's first request.
#include <catch2/catch.hpp>

#include "service/auth.h"

using namespace replayd::service;

TEST_CASE("tokens compare equal only when identical") {
  CHECK(tokens_equal("secret", "secret"));
  CHECK_FALSE(tokens_equal("secret", "secreT"));
  CHECK_FALSE(tokens_equal("secret", "secret2"));
  CHECK_FALSE(tokens_equal("secret", ""));
}

TEST_CASE("only hello with the right token authenticates") {
  CHECK_FALSE(refuse_unauthenticated("tok", R"({"op":"hello","token":"tok"})"));
  CHECK(refuse_unauthenticated("tok", R"({"op":"hello","token":"bad"})"));
  CHECK(refuse_unauthenticated("tok", R"({"op":"hello"})"));
  CHECK(refuse_unauthenticated("tok", R"({"op":"ping","token":"tok"})"));
  CHECK(refuse_unauthenticated("tok", R"({"op":"hello","token":7})"));
  CHECK(refuse_unauthenticated("tok", "not json"));
  CHECK(refuse_unauthenticated("tok", "[1,2]"));
}

TEST_CASE("a refusal never echoes either token") {
  const auto refusal = refuse_unauthenticated("server-secret", R"({"op":"hello","token":"guess"})");
  REQUIRE(refusal);
  CHECK(refusal->find("server-secret") == std::string::npos);
  CHECK(refusal->find("guess") == std::string::npos);
}
