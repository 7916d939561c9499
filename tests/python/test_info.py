"""`info(table)` and `table_info(table)` return that table's INFO dict; `info()` and
`server_info()` the server's picture with every table's."""
from __future__ import annotations

import numpy as np
import pytest

import replayd


def test_info_of_a_table_is_its_info_dict(client, table_name):
    client.create_table(table_name, {"x": (np.float32, ())}, 100)
    client.insert(table_name, {"x": np.zeros(7, np.float32)})
    info = client.info(table_name)
    assert info["size"] == 7 and info["capacity"] == 100
    assert info["name"] == table_name
    same = client.table_info(table_name)
    assert same.keys() == info.keys() and same["description"] == info["description"]


def test_info_without_a_table_is_the_servers_with_every_table(client, table_name):
    client.create_table(table_name, {"x": (np.float32, ())}, 100)
    whole = client.info()
    assert whole.keys() == client.server_info().keys() >= {"server", "tables"}
    assert table_name in [t["name"] for t in whole["tables"]]
    assert whole["server"]["protocol"] == 1


def test_info_of_a_missing_table_is_not_found(client):
    with pytest.raises(replayd.NotFound):
        client.info("no_such_table")
