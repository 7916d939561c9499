// ServerProcess: a replayd server binary started for one load run, listening on a socket in
// a fresh temporary directory (Unix) or on 127.0.0.1 with a free port (TCP), with metrics
// off. Owns the child process and the directory: the destructor stops the server (SIGTERM,
// then SIGKILL after 10 s) and removes the directory. Use from one thread.
#pragma once

#include <sys/types.h>

#include <string>

#include "options.h"

namespace replayd::loadgen {

class ServerProcess {
 public:
  // Starts `binary` and waits (up to 10 s) for its ready file. Throws std::runtime_error
  // naming the problem (binary missing, server exited, no ready file in time); nothing is
  // left running then.
  ServerProcess(const std::string& binary, Transport transport);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // The client address: "unix:///tmp/.../replayd.sock" or "tcp://127.0.0.1:PORT".
  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }
  // User + system CPU time the server has used so far, in seconds (from /proc/PID/stat).
  double cpu_seconds() const;

 private:
  void stop();

  std::string directory_;
  std::string address_;
  pid_t pid_ = -1;
};

// ../../service/replayd relative to this executable (where the build tree puts it).
std::string default_server_path();

}  // namespace replayd::loadgen
