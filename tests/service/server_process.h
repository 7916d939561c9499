// ServerProcess: the real replayd binary (REPLAYD_SERVER_BINARY from CMake, or $REPLAYD_BIN)
// started as a child process on a private Unix socket and an ephemeral TCP port, for tests that
// talk to it over real sockets. The constructor returns once the server wrote its ready file; the
// destructor stops it with SIGTERM (SIGKILL after 10 s) and removes its directory.
// Threading: owned by one test; the address accessors may be read from any thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace replayd::testing {

struct ServerOptions {
  std::string config_json;              // written to a file and passed as --config when set
  std::vector<std::string> extra_args;  // appended to the command line
};

class ServerProcess {
 public:
  explicit ServerProcess(ServerOptions options = {});
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  const std::string& unix_path() const { return unix_path_; }
  std::string unix_address() const { return "unix://" + unix_path_; }
  // "tcp://127.0.0.1:PORT" with the bound port.
  std::string tcp_address() const { return "tcp://" + tcp_host_port_; }
  const std::string& tcp_host() const { return tcp_host_; }
  int tcp_port() const { return tcp_port_; }
  // The address for a transport name, "unix" or "tcp".
  std::string address(const std::string& transport) const {
    return transport == "tcp" ? tcp_address() : unix_address();
  }
  // Whether the child is still running (it never exits by itself while tests run).
  bool running();
  // The server's log so far.
  std::string log() const;

 private:
  void start(const ServerOptions& options);
  // SIGTERM (SIGKILL after 10 s) if running, then removes the directory.
  void stop_and_remove();

  std::string directory_;
  std::string unix_path_;
  std::string tcp_host_port_;
  std::string tcp_host_;
  int tcp_port_ = 0;
  pid_t pid_ = -1;
};

// Raises the soft limit of open files to the hard limit; returns the new soft limit.
std::size_t raise_open_file_limit();

}  // namespace replayd::testing
