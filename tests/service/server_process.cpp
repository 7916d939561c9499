#include "server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

extern char** environ;

namespace replayd::testing {
namespace {

constexpr auto kReadyTimeout = std::chrono::seconds(20);
constexpr auto kStopTimeout = std::chrono::seconds(10);

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The server binary: REPLAYD_BIN when set (e.g. a sanitizer build), else the one CMake built.
std::string server_binary() {
  const char* override_path = std::getenv("REPLAYD_BIN");
  return override_path && *override_path ? override_path : REPLAYD_SERVER_BINARY;
}

// Whether the binary has a --metrics flag; tests disable the metrics listener so that
// servers started side by side do not compete for its fixed default port.
bool has_metrics_flag() {
  static const bool has = [] {
    std::string command = "'" + server_binary() + "' --help 2>&1";
    FILE* pipe = ::popen(command.c_str(), "r");
    if (!pipe) return false;
    std::string help;
    char chunk[4096];
    while (const std::size_t n = std::fread(chunk, 1, sizeof(chunk), pipe))
      help.append(chunk, n);
    ::pclose(pipe);
    return help.find("--metrics") != std::string::npos;
  }();
  return has;
}

}  // namespace

std::size_t raise_open_file_limit() {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
    ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  return limit.rlim_cur;
}

ServerProcess::ServerProcess(ServerOptions options) : options_(std::move(options)) {
  try {
    start();
  } catch (...) {
    stop_and_remove();  // a failed start leaves no process and no directory behind
    throw;
  }
}

void ServerProcess::start() {
  // The child inherits the limit, so it can hold as many connections as the test opens.
  raise_open_file_limit();
  std::string pattern = (std::filesystem::temp_directory_path() / "replayd-test-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  directory_ = pattern;
  unix_path_ = directory_ + "/replayd.sock";
  spawn();
}

void ServerProcess::restart(int signal_number) {
  stop(signal_number);
  spawn();
}

void ServerProcess::spawn() {
  const std::string ready_file = directory_ + "/ready-" + std::to_string(++starts_) + ".json";
  const std::string log_file = directory_ + "/replayd.log";

  std::vector<std::string> args{server_binary(), "--unix",   unix_path_,    "--tcp", "127.0.0.1:0",
                                "--ready-file",  ready_file, "--log-level", "warn"};
  if (has_metrics_flag()) {
    args.push_back("--metrics");
    args.push_back("");
  }
  if (!options_.config_json.empty()) {
    const std::string config_file = directory_ + "/config.json";
    std::ofstream(config_file) << options_.config_json;
    args.push_back("--config");
    args.push_back(config_file);
  }
  if (options_.data_dir) {
    args.push_back("--data-dir");
    args.push_back(directory_ + "/data");
  }
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  std::vector<char*> argv;
  for (auto& arg : args) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  const int rc = ::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error(std::string("cannot start ") + argv[0]);

  const auto deadline = std::chrono::steady_clock::now() + kReadyTimeout;
  while (!std::filesystem::exists(ready_file)) {
    if (!running()) throw std::runtime_error("replayd exited before it was ready; log:\n" + log());
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("replayd not ready in time; log:\n" + log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto ready = boost::json::parse(read_file(ready_file)).as_object();
  tcp_host_port_ = std::string(ready.at("tcp").as_string());
  const auto colon = tcp_host_port_.rfind(':');
  tcp_host_ = tcp_host_port_.substr(0, colon);
  tcp_port_ = std::stoi(tcp_host_port_.substr(colon + 1));
}

ServerProcess::~ServerProcess() {
  stop_and_remove();
}

void ServerProcess::stop(int signal_number) {
  if (pid_ > 0 && running()) {
    ::kill(pid_, signal_number);
    const auto deadline = std::chrono::steady_clock::now() + kStopTimeout;
    while (running() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (running()) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
}

void ServerProcess::stop_and_remove() {
  stop();
  std::error_code ignored;
  if (!directory_.empty()) std::filesystem::remove_all(directory_, ignored);
}

bool ServerProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

std::string ServerProcess::log() const {
  return read_file(directory_ + "/replayd.log");
}

}  // namespace replayd::testing
