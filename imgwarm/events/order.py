"""Ordering: per source key, the newest event handled is kept in Redis, so that an event that
comes late (S3 delivers at least once, in no set order) never undoes a newer one, and one that
comes again is dropped as a duplicate.

What orders two events of one key: their ``sequencer``s (S3's and EventBridge's; AWS: compare
them as hex numbers after padding the shorter with leading zeros, and only for the same key),
else, when either has none (some webhooks, moto), their event times (milliseconds). Two events
of the same time and no sequencer: the same kind is a duplicate; a different kind is taken
(the one that arrives last wins; reconcile sets right what that gets wrong).

A change is first checked (``check``), its job queued, and only then recorded (``commit``): a
listener killed between the two handles the message again when it comes back (at-least-once),
instead of taking it for a duplicate of itself. The record of a key lives ``ORDER_TTL``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from imgwarm.events.notification import Change
from imgwarm.store.references import key_digest

if TYPE_CHECKING:
    import redis

Verdict = Literal["new", "duplicate", "older"]
ORDER_TTL = 7 * 24 * 3600  # seconds: longer than any redelivery (SQS keeps a message 14 days
# at most, but one that old has long been caught by reconcile)
PREFIX = "imgwarm:listen:order:"

# KEYS[1]: the key's record (a hash: seq, time, kind). ARGV: sequencer ('' for none), time,
# kind, ttl, mode ('check' or 'commit'). Returns 'new', 'duplicate' or 'older'; 'commit'
# writes the record when the change is not older.
_SCRIPT = """
local seq, t, kind, ttl, mode = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
local old = redis.call('HMGET', KEYS[1], 'seq', 'time', 'kind')
if old[2] then
  local cmp
  if seq ~= '' and old[1] and old[1] ~= '' then
    local a, b = seq, old[1]
    if #a < #b then a = string.rep('0', #b - #a) .. a end
    if #b < #a then b = string.rep('0', #a - #b) .. b end
    if a > b then cmp = 1 elseif a < b then cmp = -1 else cmp = 0 end
  else
    local ot = tonumber(old[2]) or 0
    if t > ot then cmp = 1 elseif t < ot then cmp = -1 else cmp = 0 end
  end
  if cmp < 0 then return 'older' end
  if cmp == 0 and (seq ~= '' or kind == old[3]) then
    if mode == 'commit' then redis.call('EXPIRE', KEYS[1], ttl) end
    return 'duplicate'
  end
end
if mode == 'commit' then
  redis.call('HSET', KEYS[1], 'seq', seq, 'time', ARGV[2], 'kind', kind)
  redis.call('EXPIRE', KEYS[1], ttl)
end
return 'new'
"""


def order_key(key: str) -> str:
    return PREFIX + key_digest(key)


class Order:
    """The per-key records, in one Redis (the events one, else the broker's)."""

    def __init__(self, client: redis.Redis, ttl: int = ORDER_TTL) -> None:
        self.client = client
        self.ttl = ttl
        self._script = client.register_script(_SCRIPT)

    def _run(self, change: Change, mode: str) -> Verdict:
        found = self._script(keys=[order_key(change.key)],
                             args=[change.sequencer, f"{change.time:.3f}", change.kind,
                                   self.ttl, mode])
        verdict = found.decode() if isinstance(found, bytes) else str(found)
        assert verdict in ("new", "duplicate", "older"), verdict
        return verdict  # type: ignore[return-value]

    def check(self, change: Change) -> Verdict:
        """Is this change newer than the last one handled for its key?"""
        return self._run(change, "check")

    def commit(self, change: Change) -> Verdict:
        """Record the change as the newest handled (unless a newer one was meanwhile)."""
        return self._run(change, "commit")
