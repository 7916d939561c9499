// ServerProcess: the real replayd binary (REPLAYD_SERVER_BINARY from CMake, or $REPLAYD_BIN)
// started as a child process on a private Unix socket and an ephemeral TCP port, for tests that
// talk to it over real sockets. The constructor returns once the server wrote its ready file; the
// destructor stops it with SIGTERM (SIGKILL after 10 s) and removes its directory. restart()
// stops it the same way and starts it again on the same socket path (and data directory).
// Threading: owned by one test; the address accessors may be read from any thread.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace replayd::testing {

struct ServerOptions {
  std::string config_json;              // written to a file and passed as --config when set
  std::vector<std::string> extra_args;  // appended to the command line
  // --data-dir in the server's directory: its snapshots survive restart().
  bool data_dir = false;
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
  // Stops the server with `signal_number` (SIGTERM: its final snapshot, with data_dir; SIGKILL: a
  // crash), waits until it exited, and starts it again with the same options on the same
  // Unix socket path; returns once it is ready. Clients of the old server see their
  // connections closed. The TCP port changes.
  void restart(int signal_number = SIGTERM);
  // The server's log so far.
  std::string log() const;

 private:
  // Makes the server's directory, then spawn().
  void start();
  // Starts the binary in directory_ and waits until it is ready.
  void spawn();
  // `signal_number` (SIGKILL after 10 s) if running; returns once it exited.
  void stop(int signal_number = SIGTERM);
  // stop(), then removes the directory.
  void stop_and_remove();

  ServerOptions options_;
  int starts_ = 0;  // spawn()s so far (each writes its own ready file)
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
