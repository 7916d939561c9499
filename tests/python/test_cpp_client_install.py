"""The C++ client installs as a library: `cmake --install` into a temporary prefix, then
client/cpp/examples/quickstart.cpp builds against the installed package, once through
find_package(replayd_client) and once through pkg-config, and runs against the server."""
from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, server_binary

QUICKSTART = REPO / "client" / "cpp" / "examples" / "quickstart.cpp"


def build_dir() -> Path:
    """The CMake build tree of the server under test (REPLAYD_BIN is <build>/service/replayd)."""
    return server_binary().resolve().parents[1]


def sanitizer_flags(build: Path) -> list:
    """A library built with ASan/UBSan needs its consumers linked with them too."""
    cache = (build / "CMakeCache.txt").read_text()
    return ["-fsanitize=address,undefined"] if "REPLAYD_SANITIZE:BOOL=ON" in cache else []


def run(args, timeout=180, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert result.returncode == 0, f"{shlex.join(map(str, args))}\n{result.stdout}{result.stderr}"
    return result


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    build = build_dir()
    if not (build / "CMakeCache.txt").exists():
        pytest.skip(f"{build} is not a CMake build tree")
    prefix = tmp_path_factory.mktemp("prefix")
    run(["cmake", "--install", str(build), "--component", "client", "--prefix", str(prefix)])
    return prefix


def check_quickstart_runs(binary: Path, address: str) -> None:
    result = run([str(binary), address], timeout=60)
    assert "inserted 8 items" in result.stdout
    assert "sampled 4 items" in result.stdout
    assert "updated 4 priorities" in result.stdout


def test_install_holds_headers_library_package_config_and_pkg_config(prefix):
    files = {p.relative_to(prefix).as_posix() for p in prefix.rglob("*") if p.is_file()}
    lib = next(f for f in files if f.endswith("/libreplayd_client.a")).rsplit("/", 1)[0]
    assert "include/replayd_client/client.h" in files
    assert f"{lib}/cmake/replayd_client/replayd_client-config.cmake" in files
    assert f"{lib}/cmake/replayd_client/replayd_client-config-version.cmake" in files
    assert f"{lib}/pkgconfig/replayd_client.pc" in files
    # Nothing of the server is installed with the client component.
    assert not any(f.startswith("bin/") for f in files)


def test_quickstart_builds_with_find_package_and_runs(prefix, server, tmp_path):
    project = tmp_path / "consumer"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(f"""
cmake_minimum_required(VERSION 3.22)
project(consumer LANGUAGES CXX)
find_package(replayd_client 0.1 REQUIRED)
add_executable(quickstart "{QUICKSTART}")
target_link_libraries(quickstart PRIVATE replayd::client)
""")
    flags = " ".join(sanitizer_flags(build_dir()))
    run(["cmake", "-S", str(project), "-B", str(project / "build"), f"-DCMAKE_PREFIX_PATH={prefix}",
         "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_CXX_FLAGS={flags}",
         f"-DCMAKE_EXE_LINKER_FLAGS={flags}"])
    run(["cmake", "--build", str(project / "build")])
    check_quickstart_runs(project / "build" / "quickstart", server.unix_address)


def test_quickstart_builds_with_pkg_config_and_runs(prefix, server, tmp_path):
    pc_dir = next(prefix.rglob("pkgconfig"))
    env = dict(os.environ, PKG_CONFIG_PATH=str(pc_dir))
    flags = run(["pkg-config", "--cflags", "--libs", "replayd_client"], env=env).stdout.split()
    assert f"-I{(prefix / 'include').resolve()}" in [
        f"-I{Path(f[2:]).resolve()}" for f in flags if f.startswith("-I")]
    binary = tmp_path / "quickstart"
    sanitize = sanitizer_flags(build_dir())
    run(["c++", "-std=c++20", "-O1", *sanitize, str(QUICKSTART), "-o", str(binary), *flags])
    check_quickstart_runs(binary, server.unix_address)
