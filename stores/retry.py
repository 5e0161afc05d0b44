"""Retries with exponential backoff when a data store is down for a moment.

Only transient errors are retried (`StoreError.transient`: connection refused or reset, the server
shutting down or starting up, a deadlock or serialization failure): never SQL errors, never a
rejected password. A write whose connection was lost in flight (`maybe_applied`) may have committed,
so it is retried only when doing it twice is harmless: ledgered writes (the ledger skips what took
effect) and upserts.

A `RetryPolicy` gives the number of attempts (default 5, 1 = no retry) and the first wait; the
waits between attempts double from it (default 500 ms, ±20% jitter): 0.5 + 1 + 2 + 4 s, at most
~10 s of waiting in all. The stores use the policy they are given (stores/bindings.py carries it);
the deployer sets it from `CEP_STORE_RETRIES` and `CEP_STORE_RETRY_BASE_MS` (deployer/settings.py).
When the last attempt fails, the error says so, with the store's name and redacted URL (every
StoreError carries them).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from stores.errors import StoreError

T = TypeVar("T")
log = logging.getLogger("paascep.stores")

DEFAULT_TRIES = 5
DEFAULT_BASE_MS = 500
MAX_WAIT_S = 10.0


@dataclass(frozen=True)
class RetryPolicy:
    tries: int = DEFAULT_TRIES
    base_s: float = DEFAULT_BASE_MS / 1000
    max_wait_s: float = MAX_WAIT_S

    def delay(self, attempt: int) -> float:
        """The wait after failed attempt number `attempt` (1-based)."""
        return self.base_s * 2 ** (attempt - 1) * random.uniform(0.8, 1.2)


def call_with_retries(
    fn: Callable[[], T],
    *,
    idempotent: bool,
    policy: RetryPolicy | None = None,
    on_retry: Callable[[StoreError], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`fn()`, again after a transient StoreError, up to the policy's attempts and total wait."""
    policy = policy or RetryPolicy()
    start = time.monotonic()
    waited = 0.0
    attempt = 1
    while True:
        try:
            return fn()
        except StoreError as e:
            if not e.transient or (e.maybe_applied and not idempotent):
                raise
            wait = policy.delay(attempt)
            if attempt >= policy.tries or waited + wait > policy.max_wait_s:
                raise _gave_up(e, attempt, time.monotonic() - start) from e
            log.warning("%s; retrying in %.2f s (attempt %d of %d)", e, wait, attempt + 1, policy.tries)
            if on_retry is not None:
                on_retry(e)
            sleep(wait)
            waited += wait
            attempt += 1


def _gave_up(e: StoreError, attempts: int, elapsed: float) -> StoreError:
    tried = f"after {attempts} attempt{'s' if attempts != 1 else ''} in {elapsed:.1f} s"
    return type(e)(
        f"{e.detail} ({tried}; CEP_STORE_RETRIES sets the number of attempts)",
        store=e.store,
        url=e.url,
        sqlstate=e.sqlstate,
        transient=e.transient,
        maybe_applied=e.maybe_applied,
        about_event=e.about_event,
    )
