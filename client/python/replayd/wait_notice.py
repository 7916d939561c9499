"""Saying why a blocking call waits: after `WAIT_NOTICE_S` seconds, a call that waits for a
table's rate limiter (sample, insert, a Sampler's next batch, a Writer's full window) logs
one warning on the ``replayd`` logger naming the table and what holds it (any other call
logs that no reply has come: `log_silence`), e.g.

    replayd: sample of 256 items from table 'replay' has waited 5 s: the table holds 10
    items and its rate limiter samples from 1000 (min_size_to_sample)

Without logging configured, Python prints warnings to stderr. Silence them with
``logging.getLogger("replayd").setLevel(logging.ERROR)``.
"""
from __future__ import annotations

import logging

from .client_interface import ClientLike
from .errors import ReplayError
from .limiter_state import insert_state, sample_state

__all__ = ["WAIT_NOTICE_S", "LOG", "log_wait", "log_silence"]

#: Seconds a blocking call waits before it logs why (once per call; once per Sampler or
#: Writer until it has been unblocked).
WAIT_NOTICE_S = 5.0

LOG = logging.getLogger("replayd")

_STATE_TIMEOUT_S = 2.0  # for the info request that finds out why


def log_wait(client: ClientLike, op: str, table: str, n: int, waited_s: float) -> None:
    """Logs one warning: `op` ("sample" or "insert") of `n` items of `table` has waited
    `waited_s` seconds, and why, from the table's INFO (one round trip of at most 2 s;
    its failure is reported instead of raised)."""
    try:
        info = client.table_info(table, timeout=_STATE_TIMEOUT_S)
        state = sample_state(info, n) if op == "sample" else insert_state(info, n)
        if state == "ready":
            why = ("the rate limiter would let it through now (the server may be busy, or "
                   "the reply is on its way)")
        else:
            why = state[len("waits: "):] if state.startswith("waits: ") else state
    except ReplayError as exc:
        why = f"the table's state could not be read ({exc})"
    preposition = "from" if op == "sample" else "into"
    LOG.warning("replayd: %s of %d items %s table '%s' has waited %g s: %s", op, n,
                preposition, table, round(waited_s, 1), why)


def log_silence(address: str, op: str, waited_s: float) -> None:
    """Logs one warning: a call that does not wait for a rate limiter (ping, info,
    update_priorities, ...) has had no reply from `address` for `waited_s` seconds. Without
    a timeout it goes on waiting; this says so instead of waiting without a word."""
    LOG.warning("replayd: no reply to %s from %s for %g s: the server may be frozen, "
                "overloaded or unreachable (give the call a timeout to fail instead)", op,
                address, round(waited_s, 1))
