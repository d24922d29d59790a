"""Limits by what a request costs, not by how many come.

A user's writes of conversation state are limited in bytes a period: many small writes (fifty
new conversations in a second) pass, and a large one waits until what the user wrote before
has drained. The stall these limits guard against comes from megabytes, not from requests.
"""

from rest_framework.throttling import UserRateThrottle


class StateWriteThrottle(UserRateThrottle):
    """A user's writes of conversation state (creating a conversation, changing its state):
    at most `LANGHOST_STATE_WRITE_BYTES_PER_USER` bytes a period, counted in the cache (with
    Redis, across processes), so that no user keeps the process busy for everyone.

    A leaky bucket: each write adds its size (at least MIN_COST_BYTES, the work of any write)
    and the bucket drains at the rate; a write that would overflow it waits until it would
    not. One write larger than the whole budget passes into an empty bucket, and the next
    waits for all of it to drain."""

    scope = "state-writes"
    # Its own key: what the count-based throttle before it left in the cache is no bucket.
    cache_format = "throttle_%(scope)s_bytes_%(ident)s"
    MIN_COST_BYTES = 1024

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        if not self.num_requests:  # a budget of nothing: no write passes
            self.level, self.cost = 0.0, 0.0
            return self.throttle_failure()
        self.now = self.timer()
        level, at = self.cache.get(self.key, (0.0, self.now))
        self.level = max(0.0, level - (self.now - at) * self._drain_per_second)
        self.cost = max(_size(request), self.MIN_COST_BYTES)
        if self.level > 0 and self.level + self.cost > self.num_requests:
            return self.throttle_failure()
        self.cache.set(self.key, (self.level + self.cost, self.now), self._seconds_to_empty(
            self.level + self.cost) + 1)
        return True

    def wait(self) -> float:
        """Seconds until this write fits: until the bucket holds room for it, or is empty
        for a write larger than the whole budget."""
        if not self.num_requests:
            return self.duration
        return min(self.level, self.level + self.cost - self.num_requests) / self._drain_per_second

    @property
    def _drain_per_second(self) -> float:
        return self.num_requests / self.duration

    def _seconds_to_empty(self, level: float) -> int:
        return int(level / self._drain_per_second)


def _size(request) -> int:
    """The request body's size as received (spooled by the ASGI handler; a chunked body has no
    Content-Length to trust)."""
    return len(request.body)
