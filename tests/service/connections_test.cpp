// A thousand connections held open at once are each served.
#include <catch2/catch.hpp>

#include "raw_socket.h"
#include "server_process.h"
#include "test_support.h"

namespace replayd::testing {

TEST_CASE("a thousand connections held open at once are each served", "[connections]") {
  constexpr int kConnections = 1000;
  // Both ends of every connection live in this test's processes: 2000+ descriptors.
  REQUIRE(raise_open_file_limit() >= 2 * kConnections + 100);
  ServerProcess server;
  rc::Client observer(server.unix_address());

  std::vector<RawSocket> sockets;
  sockets.reserve(kConnections);
  for (int i = 0; i < kConnections; ++i) {
    sockets.push_back(i % 2 ? RawSocket::connect_tcp(server.tcp_host(), server.tcp_port())
                            : RawSocket::connect_unix(server.unix_path()));
  }
  // Every connection sends a request before any reply is read.
  for (int i = 0; i < kConnections; ++i) {
    RawFrame ping;
    ping.request_id = 5000 + static_cast<std::uint64_t>(i);
    sockets[i].send(ping);
  }
  for (int i = 0; i < kConnections; ++i) {
    const RawReply reply = sockets[i].read_reply();
    REQUIRE(reply.request_id == 5000 + static_cast<std::uint64_t>(i));
    REQUIRE(reply.error_code().empty());
  }
  const auto connections = [&] {
    return observer.info().at("server").as_object().at("connections").to_number<std::uint64_t>();
  };
  CHECK(connections() >= kConnections + 1);

  // A second request on each, now that all are established, is served as well.
  for (int i = 0; i < kConnections; ++i) {
    RawFrame info;
    info.request_id = 9;
    info.meta = R"({"op":"list_tables"})";
    sockets[i].send(info);
  }
  for (int i = 0; i < kConnections; ++i)
    REQUIRE(sockets[i].read_reply().request_id == 9);

  sockets.clear();
  REQUIRE(eventually([&] { return connections() == 1; }));
}

}  // namespace replayd::testing
