"""Values worked out by a database read and kept a while in the process."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Expiring(Generic[K, V]):
    """Each key's value, kept ``ttl_s`` seconds, for at most ``size`` keys (the least recently
    stored out first); shared by the threads of a process."""

    def __init__(self, ttl_s: float, size: int) -> None:
        self._ttl = ttl_s
        self._max = size
        self._kept: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    async def value(self, key: K, work_out: Callable[[], Awaitable[V]]) -> V:
        """``key``'s value as kept, or worked out again (``work_out``) once it is ``ttl_s`` old."""
        now = time.monotonic()
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and now - kept[0] <= self._ttl:
            return kept[1]
        value = await work_out()
        with self._lock:
            self._kept[key] = (now, value)
            self._kept.move_to_end(key)
            while len(self._kept) > self._max:
                self._kept.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
