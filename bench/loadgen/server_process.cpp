#include "server_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace replayd::loadgen {
namespace fs = std::filesystem;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string default_server_path() {
  return (fs::read_symlink("/proc/self/exe").parent_path() / ".." / ".." / "service" / "replayd")
      .lexically_normal()
      .string();
}

ServerProcess::ServerProcess(const std::string& binary, Transport transport) {
  if (::access(binary.c_str(), X_OK) != 0) {
    throw std::runtime_error("server binary '" + binary +
                             "' is not executable (build it, or pass --server)");
  }
  std::string pattern = (fs::temp_directory_path() / "replayd-loadgen-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  directory_ = pattern;
  const std::string socket_path = directory_ + "/replayd.sock";
  const std::string ready_path = directory_ + "/ready.json";
  std::vector<std::string> args{binary,
                                "--unix",
                                transport == Transport::unix_socket ? socket_path : "",
                                "--tcp",
                                transport == Transport::tcp ? "127.0.0.1:0" : "",
                                "--metrics",
                                "",
                                "--log-level",
                                "warn",
                                "--ready-file",
                                ready_path};
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    std::vector<char*> argv;
    for (auto& arg : args)
      argv.push_back(arg.data());
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!fs::exists(ready_path)) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      stop();
      throw std::runtime_error("server '" + binary + "' exited before it was ready");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      stop();
      throw std::runtime_error("server '" + binary + "' wrote no ready file within 10 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto ready = boost::json::parse(read_text(ready_path)).as_object();
  if (transport == Transport::unix_socket) {
    address_ = "unix://" + std::string(ready.at("unix").as_string());
  } else {
    address_ = "tcp://" + std::string(ready.at("tcp").as_string());
  }
}

ServerProcess::~ServerProcess() {
  stop();
}

void ServerProcess::stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
  }
  if (!directory_.empty()) {
    std::error_code ignored;
    fs::remove_all(directory_, ignored);
    directory_.clear();
  }
}

double ServerProcess::cpu_seconds() const {
  // Fields 14 and 15 of /proc/PID/stat (utime, stime) in clock ticks; the command name
  // (field 2) may hold spaces, so count from the last ')'.
  const std::string stat = read_text("/proc/" + std::to_string(pid_) + "/stat");
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int index = 3; index <= 15 && rest >> field; ++index) {
    if (index == 14) utime = std::stoull(field);
    if (index == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

}  // namespace replayd::loadgen
