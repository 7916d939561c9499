"""The server's command table is the one source of truth for operations, error codes and
dtypes (`replayd --describe-protocol`): docs/PROTOCOL.md, docs/CONFIG.md and both clients'
constants must agree with it. Each test names what disagrees."""
import json
import re
import subprocess
import sys

import pytest

from conftest import REPO, server_binary

PROTOCOL = (REPO / "docs" / "PROTOCOL.md").read_text()
CONFIG = (REPO / "docs" / "CONFIG.md").read_text()


@pytest.fixture(scope="module")
def protocol():
    out = subprocess.run([str(server_binary()), "--describe-protocol"], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def doc_section(text, heading_pattern):
    """The text from the first heading matching `heading_pattern` to the next heading."""
    match = re.search(heading_pattern, text, re.MULTILINE)
    assert match, f"no heading matching {heading_pattern!r}"
    rest = text[match.end():]
    end = re.search(r"^#{2,3} ", rest, re.MULTILINE)
    return rest[:end.start()] if end else rest


def test_the_operations_table_of_protocol_md_is_generated_from_the_server():
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "protocol-tables"), "--check",
                             "--binary", str(server_binary())], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_operation_has_a_section_naming_each_key_it_reads(protocol):
    waiting = doc_section(PROTOCOL, r"^### Waiting")
    for op in protocol["ops"]:
        section = doc_section(PROTOCOL, rf"^### .*`{op['name']}`")
        for field in op["fields"]:
            if field == "timeout_ms":
                assert f"`{op['name']}`" in waiting and "`timeout_ms`" in waiting, op["name"]
            else:
                assert f'"{field}"' in section, f"docs/PROTOCOL.md: op {op['name']} reads {field!r}"


def test_the_error_code_table_lists_exactly_the_servers_codes(protocol):
    section = doc_section(PROTOCOL, r"^## Requests and replies")
    documented = re.findall(r"^\| `([a-z_]+)` +\|", section, re.MULTILINE)
    assert documented == protocol["errors"]


def test_the_dtypes_are_those_of_the_server(protocol):
    line = next(l for l in PROTOCOL.splitlines() if l.startswith("dtypes are numpy's names"))
    line += PROTOCOL.split(line, 1)[1].split("\n\n", 1)[0]
    assert re.findall(r"`([a-z0-9]+)`", line) == protocol["dtypes"]


def test_the_python_client_knows_every_code_dtype_and_only_real_ops(protocol):
    from replayd import errors, schema
    assert set(protocol["errors"]) <= set(errors._BY_CODE), "replayd.errors lacks a wire code"
    assert list(schema.WIRE_DTYPES) == protocol["dtypes"]
    ops = {op["name"] for op in protocol["ops"]}
    sources = "\n".join(p.read_text() for p in (REPO / "client" / "python" / "replayd").glob("*.py"))
    used = set(re.findall(r'"op":\s*"(\w+)"', sources))
    used |= set(re.findall(r'keyed_request\("(\w+)"', sources))
    assert used and used <= ops, f"the Python client sends unknown ops {used - ops}"


def test_the_cpp_client_knows_every_code_dtype_and_only_real_ops(protocol):
    cpp = REPO / "client" / "cpp" / "replayd_client"
    error_names = re.findall(r'ErrorCode::\w+, "(\w+)"', (cpp / "error.cpp").read_text())
    assert set(protocol["errors"]) <= set(error_names), "the C++ client lacks a wire code"
    dtype_names = re.findall(r'DType::\w+, "(\w+)"', (cpp / "dtype.cpp").read_text())
    assert dtype_names == protocol["dtypes"]
    sources = "\n".join(p.read_text() for p in cpp.glob("*.cpp"))
    used = set(re.findall(r'\\"op\\":\\"(\w+)\\"', sources))
    used |= set(re.findall(r'table_request\("(\w+)"', sources))
    ops = {op["name"] for op in protocol["ops"]}
    assert used and used <= ops, f"the C++ client sends unknown ops {used - ops}"


def test_config_md_documents_every_flag_of_replayd_help():
    out = subprocess.run([str(server_binary()), "--help"], check=True, capture_output=True,
                         text=True).stdout
    flags = set(re.findall(r"^\s+(?:-\w,)?(--[a-z][a-z-]*)", out, re.MULTILINE))
    assert "--config" in flags and "--describe-protocol" in flags
    missing = sorted(f for f in flags if f"`{f}" not in CONFIG)
    assert not missing, f"docs/CONFIG.md misses flags {missing}"


def test_config_md_documents_every_limit_the_server_reports(server):
    from replayd import Client
    with Client(server.unix_address) as client:
        limits = client.server["limits"]
    missing = sorted(k for k in limits if f"`{k}`" not in CONFIG)
    assert not missing, f"docs/CONFIG.md misses limits {missing}"
