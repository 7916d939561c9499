// Tests of service/net/auth.h: the token check of a TCP connection's first request.
#include <catch2/catch.hpp>

#include "service/net/auth.h"

using namespace replayd::service;

TEST_CASE("tokens compare equal only when identical") {
  CHECK(tokens_equal("secret", "secret"));
  CHECK_FALSE(tokens_equal("secret", "secreT"));
  CHECK_FALSE(tokens_equal("secret", "secret2"));
  CHECK_FALSE(tokens_equal("secret", ""));
}

TEST_CASE("only hello with the right token authenticates") {
  CHECK_FALSE(refuse_unauthenticated("tok", R"({"op":"hello","token":"tok"})"));
  CHECK_FALSE(
      refuse_unauthenticated("tok", R"({"op":"hello","protocol":1,"client":"c","token":"tok"})"));
  CHECK(refuse_unauthenticated("tok", R"({"op":"hello","token":"bad"})"));
  CHECK(refuse_unauthenticated("tok", R"({"op":"hello","token":"tok","extra":1})"));
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

TEST_CASE("a hello with the right token but a payload does not authenticate") {
  CHECK_FALSE(refuse_unauthenticated("tok", R"({"op":"hello","token":"tok"})", 0));
  const auto refusal = refuse_unauthenticated("tok", R"({"op":"hello","token":"tok"})", 8);
  REQUIRE(refusal);
  CHECK(refusal->find("payload") != std::string::npos);
}

TEST_CASE("a refusal of an unknown key names the keys hello accepts, not the stranger's") {
  const auto refusal = refuse_unauthenticated("tok", R"({"op":"hello","token":"tok","tokn":1})");
  REQUIRE(refusal);
  CHECK(refusal->find("tokn") == std::string::npos);
  CHECK(refusal->find("\"protocol\", \"client\", \"token\"") != std::string::npos);
}
