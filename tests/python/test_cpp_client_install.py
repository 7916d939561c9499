"""The C++ client installs as a library: `cmake --install` into a temporary prefix, then
client/cpp/examples/quickstart.cpp builds against the installed package, once through
find_package(replayd_client) (the README's CMakeLists.txt, as written) and once through
pkg-config, and runs against the server. Each C++ program of client/cpp/README.md compiles
as written against the installed client and runs. The C++ and Python quick starts share a
server. A whole install also puts the server at bin/replayd, and that server runs.

The build tree is REPLAYD_BUILD_DIR, else the one holding REPLAYD_BIN
(<build>/service/replayd)."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, server_binary

QUICKSTART = REPO / "client" / "cpp" / "examples" / "quickstart.cpp"
CPP_README = REPO / "client" / "cpp" / "README.md"
PY_README = REPO / "client" / "python" / "README.md"
README_ADDRESS = "unix:///tmp/replayd.sock"


def build_dir() -> Path:
    """The CMake build tree of the server under test."""
    explicit = os.environ.get("REPLAYD_BUILD_DIR")
    return Path(explicit) if explicit else server_binary().resolve().parents[1]


def readme_blocks(readme: Path, language: str) -> list:
    return re.findall(rf"```{language}\n(.*?)```", readme.read_text(), re.S)


def sanitizer_flags(build: Path) -> list:
    """A library built with ASan/UBSan needs its consumers linked with them too."""
    cache = (build / "CMakeCache.txt").read_text()
    return ["-fsanitize=address,undefined"] if "REPLAYD_SANITIZE:BOOL=ON" in cache else []


def run(args, timeout=180, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert result.returncode == 0, f"{shlex.join(map(str, args))}\n{result.stdout}{result.stderr}"
    return result


def require_build_tree() -> Path:
    build = build_dir()
    if not (build / "CMakeCache.txt").exists():
        pytest.skip(f"{build} is not a CMake build tree (set REPLAYD_BUILD_DIR)")
    return build


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    build = require_build_tree()
    prefix = tmp_path_factory.mktemp("prefix")
    run(["cmake", "--install", str(build), "--component", "client", "--prefix", str(prefix)])
    return prefix


def compile_against(prefix: Path, source: Path, binary: Path) -> Path:
    """`c++ -std=c++20 source $(pkg-config --cflags --libs replayd_client)`, as the README
    says, with the installed prefix's .pc file."""
    env = dict(os.environ, PKG_CONFIG_PATH=str(next(prefix.rglob("pkgconfig"))))
    flags = run(["pkg-config", "--cflags", "--libs", "replayd_client"], env=env).stdout.split()
    run(["c++", "-std=c++20", "-O1", *sanitizer_flags(build_dir()), str(source), "-o",
         str(binary), *flags])
    return binary


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


def test_quickstart_builds_with_the_readmes_cmakelists_and_runs(prefix, server, tmp_path):
    cmake_blocks = readme_blocks(CPP_README, "cmake")
    assert len(cmake_blocks) == 1
    project = tmp_path / "consumer"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(cmake_blocks[0])  # as written
    shutil.copy(QUICKSTART, project / "quickstart.cpp")
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


def test_readme_cpp_programs_each_compile_and_run_as_written(prefix, server, tmp_path):
    """Each ```cpp block of client/cpp/README.md alone: includes, main, its own table."""
    blocks = readme_blocks(CPP_README, "cpp")
    assert len(blocks) == 4
    outputs = []
    for number, block in enumerate(blocks):
        source = tmp_path / f"readme_{number}.cpp"
        source.write_text(block)
        binary = compile_against(prefix, source, tmp_path / f"readme_{number}")
        for _ in range(2):  # again: its table was dropped, nothing left behind
            outputs.append(run([str(binary), server.unix_address], timeout=60).stdout)
    text = "".join(outputs)
    assert text.count("sampled 256 items, obs[0] = 0.5; 256 priorities updated") == 2
    # The first of 256 uniform draws: most windows hold 3 steps (return 1 + 0.99 + 0.99^2);
    # one of the two last steps of an episode holds fewer (h 1 or 2), with discount 0 after
    # env 0's terminated episode and 0.99^h after the truncated ones.
    nstep = re.findall(r"n-step: return ([0-9.e+-]+), discount ([0-9.e+-]+), h (\d+)", text)
    assert len(nstep) == 2, text
    for ret, discount, h in nstep:
        assert int(h) in (1, 2, 3)
        assert float(ret) == pytest.approx(sum(0.99 ** i for i in range(int(h))), rel=1e-5)
        assert float(discount) in (0.0, pytest.approx(0.99 ** int(h), rel=1e-5))
    assert text.count("sequences: obs 120 steps each") == 2
    assert text.count("zstd frames; newest frame of draw 0") == 2
    assert text.count("obs 84x84, act 3") == 2  # gathered from the mapping: the plane's


@pytest.mark.parametrize("cpp_first", [True, False], ids=["cpp-first", "python-first"])
def test_cpp_and_python_quickstarts_run_on_one_server_in_either_order(prefix, make_server,
                                                                      tmp_path, cpp_first):
    quickstart = compile_against(prefix, QUICKSTART, tmp_path / "quickstart")
    server = make_server(tcp=False, extra_args=["--config", str(REPO / "config" / "replayd.json")])
    python_quickstart = readme_blocks(PY_README, "python")[0].replace(README_ADDRESS,
                                                                       server.unix_address)
    env = dict(os.environ, PYTHONPATH=str(REPO / "client" / "python"))

    def python() -> None:
        result = subprocess.run([sys.executable, "-c", python_quickstart], env=env,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr

    def cpp() -> None:
        check_quickstart_runs(quickstart, server.unix_address)

    for step in ([cpp, python] if cpp_first else [python, cpp]) * 2:  # reruns too
        step()


def test_install_puts_the_server_on_path_where_replayd_testing_finds_it(tmp_path):
    """`cmake --install build --prefix P` (all components): P/bin/replayd, and that server
    runs for replayd.testing with only P/bin on PATH (no REPLAYD_BIN)."""
    build = require_build_tree()
    prefix = tmp_path / "prefix"
    run(["cmake", "--install", str(build), "--prefix", str(prefix)])
    server = prefix / "bin" / "replayd"
    assert server.is_file() and os.access(server, os.X_OK)
    assert (prefix / "include" / "replayd_client" / "client.h").is_file()  # the client too
    only_server = tmp_path / "server-only"
    run(["cmake", "--install", str(build), "--component", "server", "--prefix",
         str(only_server)])
    assert sorted(p.relative_to(only_server).as_posix()
                  for p in only_server.rglob("*") if p.is_file()) == ["bin/replayd"]
    script = """
import shutil, sys
import numpy as np
import replayd, replayd.testing
print(shutil.which("replayd"))
with replayd.testing.server() as srv, replayd.Client(srv.address, timeout=30) as client:
    client.create_table("t", {"x": (np.int64, ())}, 100)
    client.insert("t", {"x": np.arange(10)})
    print(sorted(set(client.sample("t", 64).data["x"].tolist())) == list(range(10)))
"""
    env = {k: v for k, v in os.environ.items() if k != "REPLAYD_BIN"}
    env.update(PYTHONPATH=str(REPO / "client" / "python"),
               PATH=f"{prefix / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin")
    result = run([sys.executable, "-c", script], env=env, timeout=120)
    assert result.stdout.split() == [str(server), "True"], result.stdout
