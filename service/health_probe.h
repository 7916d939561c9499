// Health probe: `replayd --probe http://HOST:PORT/PATH` asks a running server's HTTP
// endpoint (e.g. /healthz) and exits 0 on "200", so a container's HEALTHCHECK needs no curl.
// Blocking, with a deadline; used only by main, never by the serving process.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace replayd::service {

struct ProbeResult {
  bool healthy = false;
  std::string detail;  // the status line, or why the probe failed
};

// GETs `url` (http://host:port/path, IPv4/IPv6/name) and reports whether it answered 200
// within `timeout`. Never throws.
ProbeResult probe_http(std::string_view url, std::chrono::milliseconds timeout);

}  // namespace replayd::service
