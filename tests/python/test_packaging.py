"""The client installs with pip into a fresh virtual environment, leaves the checkout as it
found it, carries its type information, and passes mypy --strict."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Set

import pytest

import replayd
from conftest import REPO, server_binary

# scripts/sanitize runs this suite again against a sanitizer build of the server: a type
# check starts no server, so it runs once, in the plain run.
NO_SERVER_CHECK = pytest.mark.skipif("ASAN_OPTIONS" in os.environ,
                                     reason="checks no server (run in the plain suite)")

PACKAGE = REPO / "client" / "python"


def tree(root: Path) -> Set[str]:
    """Every file and directory under `root` except bytecode caches (which tests running
    from the checkout write anyway)."""
    found = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in dirnames + filenames:
            found.add(os.path.relpath(os.path.join(dirpath, name), root))
    return found


def readme_install_lines() -> List[str]:
    """The lines of the first code block of client/python/README.md: how to install."""
    text = (PACKAGE / "README.md").read_text()
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


def readme_line(word: str) -> str:
    lines = [line for line in readme_install_lines() if word in line]
    assert len(lines) == 1, f"one install line with {word!r} expected: {readme_install_lines()}"
    return lines[0]


def run_in_user_dir(line: str, cwd: Path) -> "subprocess.CompletedProcess[str]":
    """Runs a README line with bash in `cwd`, where ./client is the checkout's (so that
    what the line creates, such as venv/, lands there), as a user's shell would: no
    PYTHONPATH, the rest of the environment as it is."""
    (cwd / "client").symlink_to(REPO / "client")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(["bash", "-c", line], cwd=str(cwd), env=env, capture_output=True,
                          text=True, timeout=600)


def need_hatchling() -> None:
    try:
        import hatchling  # noqa: F401  (the build backend, needed without build isolation)
    except ImportError:
        pytest.skip("python3-hatchling is not installed (scripts/setup-deps installs it)")


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv made by the README's venv line, run as written in a fresh directory."""
    need_hatchling()
    where = tmp_path_factory.mktemp("user")
    before = tree(PACKAGE)
    result = run_in_user_dir(readme_line("venv"), where)
    assert result.returncode == 0, result.stdout + result.stderr
    after = tree(PACKAGE)
    assert after == before, f"pip install left files in the checkout: {sorted(after - before)}"
    return where / "venv"


def test_readme_install_lines_come_first_and_need_no_index():
    lines = readme_install_lines()
    assert lines[0].startswith("/usr/bin/python3 -m venv"), lines
    for line in lines:
        if "pip install" in line:
            assert "--no-build-isolation" in line and "--no-deps" in line, line


@NO_SERVER_CHECK
def test_readme_system_wide_install_line_installs_for_debians_python(tmp_path):
    """The system-wide line, as root, into a staging root (`--root`) instead of /: what
    it installs lands in /usr/local's dist-packages, importable by /usr/bin/python3."""
    need_hatchling()
    line = readme_line("--break-system-packages")
    assert line.startswith("sudo /usr/bin/python3 -m pip install "), line
    root = tmp_path / "root"
    result = run_in_user_dir(line[len("sudo "):] + f" --root {root}", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    site = list(root.glob("usr/local/lib/python3*/dist-packages"))
    assert len(site) == 1 and (site[0] / "replayd" / "py.typed").exists(), sorted(
        str(p) for p in root.rglob("*"))[:20]
    assert (root / "usr" / "local" / "bin" / "replayd-cli").exists()
    out = subprocess.run(["/usr/bin/python3", "-c", "import replayd; print(replayd.__file__)"],
                         env={"PYTHONPATH": str(site[0]), "PATH": os.environ["PATH"]},
                         cwd=str(tmp_path), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and Path(out.stdout.strip()).is_relative_to(site[0]), out


def venv_python(venv: Path, code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=str(venv),
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip()


def test_pip_install_puts_the_package_and_its_typing_marker_in_the_venv(venv):
    out = venv_python(venv, "import os, replayd; d = os.path.dirname(replayd.__file__); "
                            "print(d); print(os.path.exists(os.path.join(d, 'py.typed')))")
    location, typed = out.splitlines()
    assert Path(location).is_relative_to(venv), location
    assert typed == "True"


def test_installed_version_is_the_package_version(venv):
    out = venv_python(venv, "import importlib.metadata as m, replayd; "
                            "print(m.version('replayd'), replayd.__version__)")
    installed, module = out.split()
    assert installed == module


@NO_SERVER_CHECK
def test_package_passes_mypy_strict():
    mypy = shutil.which("mypy")
    if mypy is None:
        pytest.skip("mypy is not installed (scripts/setup-deps installs Debian's mypy)")
    result = subprocess.run([mypy, "--strict", "--config-file", str(PACKAGE / "pyproject.toml"),
                             "--cache-dir", os.devnull, "replayd"], cwd=str(PACKAGE),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_installed_package_gives_pytest_the_replayd_server_fixture(venv, tmp_path):
    test_file = tmp_path / "test_user.py"
    test_file.write_text("import replayd\n\n"
                         "def test_user(replayd_server):\n"
                         "    assert replayd.Client(replayd_server.address).tables() == []\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["REPLAYD_BIN"] = str(server_binary())
    result = subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", "-q",
                             "-p", "no:cacheprovider", str(test_file)], cwd=str(tmp_path),
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_installed_console_script_runs_the_cli(venv):
    result = subprocess.run([str(venv / "bin" / "replayd-cli"), "--version"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"replayd-cli {replayd.__version__}"


@NO_SERVER_CHECK
def test_installed_package_passes_mypy_strict_without_the_checkouts_config(venv, tmp_path):
    """`mypy --strict -p replayd` as a user runs it on the installed package: no
    pyproject.toml overrides (torch followed, not skipped), replayd.torch included."""
    if subprocess.run([str(venv / "bin" / "python"), "-c", "import mypy"],
                      capture_output=True, timeout=60).returncode != 0:
        pytest.skip("mypy is not installed (scripts/setup-deps installs Debian's mypy)")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    result = subprocess.run([str(venv / "bin" / "python"), "-m", "mypy", "--strict",
                             "--cache-dir", os.devnull, "-p", "replayd"], cwd=str(tmp_path),
                            env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    checked = int(result.stdout.split("no issues found in ")[1].split()[0])
    assert checked == len(list((PACKAGE / "replayd").rglob("*.py")))  # torch.py among them
    installed = venv_python(venv, "import replayd, os; print(os.path.dirname(replayd.__file__))")
    assert Path(installed).is_relative_to(venv)
