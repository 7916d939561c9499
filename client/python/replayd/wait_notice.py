"""Saying why a blocking call waits.

A call that waits without a timeout (sample, insert, a Sampler's next batch, a Writer's
full window) logs, after `WAIT_NOTICE_S` seconds, one warning on the ``replayd`` logger
naming the table and what holds it (any other call logs that no reply has come:
`log_silence`), e.g.

    replayd: sample of 256 items from table 'replay' has waited 5 s: the table holds 10
    items and its rate limiter samples from 1000 (min_size_to_sample)

A call given a timeout logs nothing: it fails when its timeout passes, and the
TimeoutError of a sample or insert held by the rate limiter carries the same reason
(`with_reason`). Without logging configured, Python prints warnings to stderr. Silence them
with ``logging.getLogger("replayd").setLevel(logging.ERROR)``.
"""
from __future__ import annotations

import logging
from typing import Optional

from .client_interface import ClientLike
from .errors import ReplayError, TimeoutError
from .limiter_state import insert_state, sample_state

__all__ = ["WAIT_NOTICE_S", "LOG", "notices", "why_waiting", "log_wait", "log_silence",
           "with_reason"]

#: Seconds a blocking call without a timeout waits before it logs why (once per call; once
#: per Sampler or Writer until it has been unblocked).
WAIT_NOTICE_S = 5.0

LOG = logging.getLogger("replayd")

_STATE_TIMEOUT_S = 2.0  # for the info request that finds out why


def notices(timeout: Optional[float]) -> bool:
    """Whether a wait bounded by `timeout` seconds (None: unbounded) logs a notice: only
    an unbounded one does; a bounded one ends in an error that says why."""
    return timeout is None


def why_waiting(client: ClientLike, op: str, table: str, n: int) -> str:
    """Why `op` ("sample" or "insert") of `n` items of `table` waits now, in words, from
    the table's INFO (one round trip of at most 2 s; its failure is reported, not raised)."""
    try:
        info = client.table_info(table, timeout=_STATE_TIMEOUT_S)
        state = sample_state(info, n) if op == "sample" else insert_state(info, n)
    except ReplayError as exc:
        return f"the table's state could not be read ({exc})"
    if state == "ready":
        return ("the rate limiter would let it through now (the server may be busy, or the "
                "reply is on its way)")
    return state[len("waits: "):] if state.startswith("waits: ") else state


def log_wait(client: ClientLike, op: str, table: str, n: int, waited_s: float) -> None:
    """Logs one warning: `op` of `n` items of `table` has waited `waited_s` seconds, and
    why (`why_waiting`)."""
    preposition = "from" if op == "sample" else "into"
    LOG.warning("replayd: %s of %d items %s table '%s' has waited %g s: %s", op, n,
                preposition, table, round(waited_s, 1), why_waiting(client, op, table, n))


def log_silence(address: str, op: str, waited_s: float) -> None:
    """Logs one warning: a call without a timeout that does not wait for a rate limiter
    (ping, info, update_priorities, ...) has had no reply from `address` for `waited_s`
    seconds. It goes on waiting; this says so instead of waiting without a word."""
    LOG.warning("replayd: no reply to %s from %s for %g s: the server may be frozen, "
                "overloaded or unreachable (give the call a timeout to fail instead)", op,
                address, round(waited_s, 1))


def with_reason(client: ClientLike, op: str, table: str, n: int,
                error: ReplayError) -> ReplayError:
    """`error`, when it is the server's timeout of a rate-limited `op`, as a TimeoutError
    whose message ends with why the table held it at that moment (`why_waiting`: one
    round trip); any other error unchanged."""
    if not isinstance(error, TimeoutError) or "was not admitted within" not in error.message:
        return error
    why = why_waiting(client, "sample" if op == "sample" else "insert", table, n)
    return TimeoutError(f"{error.message}; at the timeout: {why}", error.code)
