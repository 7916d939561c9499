"""Process entry points for the multi-process tests (importable by spawned children)."""
from __future__ import annotations

import numpy as np

import replayd

ID_STRIDE = 1_000_000


def item(i: int, explorer: int):
    return {"id": i, "explorer": explorer, "obs": np.full(4, i % 1000, np.float32)}


def explorer(client: replayd.Client, table: str, explorer_id: int, n: int, batch: int,
             results) -> None:
    """Inserts n items through a writer and reports (explorer, ids, keys)."""
    ids = explorer_id * ID_STRIDE + np.arange(n)
    with client.writer(table, batch=batch, keep_keys=True) as writer:
        for i in ids.tolist():
            writer.append(item(i, explorer_id))
    results.put((explorer_id, ids.tolist(), writer.keys.tolist()))
    client.close()
