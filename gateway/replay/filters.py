"""Which recorded deliveries a command works on: time window, provider, thread, status, text.

Times: ISO 8601 (a time without an offset is local time, as ``date`` prints it) or
relative to now (``30m``, ``2h``, ``3d``, ``1w``). Statuses: an exact code (``403``), a
class (``2xx``, ``4xx``, ``5xx``), ``ok`` (= 2xx) or ``failed`` (= anything but 2xx);
several separated by commas.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from channels import thread_matcher
from gateway.replay.records import RawDelivery

__all__ = ["Filters", "StatusFilter", "parse_speed", "parse_status", "parse_when"]

_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_when(value: str, *, now: datetime | None = None) -> datetime:
    """``"2h"`` → now minus two hours; ``"2026-06-02T21:00"`` → that local time (aware).

    Raises ``ValueError`` with a message a user can act on.
    """
    now = now or datetime.now(UTC)
    match = _RELATIVE.match(value)
    if match:
        amount, unit = float(match.group(1)), match.group(2).lower()
        return now - timedelta(seconds=amount * _UNITS[unit])
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{value!r} is neither an ISO time (2026-06-02T21:00, 2026-06-02T21:00-03:00) "
            "nor a relative one (30m, 2h, 3d, 1w)"
        ) from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time of this machine (TZ)
    return when


def parse_speed(value: str) -> float:
    """``"10x"`` / ``"10"`` / ``"0.5x"`` → the pacing factor (original gaps divided by it)."""
    text = value.strip().lower().removesuffix("x")
    try:
        factor = float(text)
    except ValueError:
        raise ValueError(f"speed {value!r}: use a factor like 1x, 10x or 0.5x") from None
    if factor <= 0:
        raise ValueError(f"speed {value!r}: must be more than 0")
    return factor


@dataclass(frozen=True, slots=True)
class StatusFilter:
    """A set of accepted HTTP statuses, from ``--status``; ``str()`` gives it back."""

    spec: str
    tests: tuple[Callable[[int], bool], ...]

    def __call__(self, status: int) -> bool:
        return any(test(status) for test in self.tests)

    def __str__(self) -> str:
        return self.spec


def _status_class(klass: int) -> Callable[[int], bool]:
    return lambda status: status // 100 == klass


def _status_code(code: int) -> Callable[[int], bool]:
    return lambda status: status == code


def parse_status(value: str) -> StatusFilter:
    tests: list[Callable[[int], bool]] = []
    for part in (p.strip().lower() for p in value.split(",")):
        if not part:
            continue
        if part in ("failed", "error", "non-2xx"):
            tests.append(lambda s: not 200 <= s < 300)
        elif part == "ok":
            tests.append(lambda s: 200 <= s < 300)
        elif re.fullmatch(r"[1-5]xx", part):
            tests.append(_status_class(int(part[0])))
        elif re.fullmatch(r"[1-5]\d\d", part):
            tests.append(_status_code(int(part)))
        else:
            raise ValueError(
                f"status {part!r}: use a code (403), a class (2xx, 4xx, 5xx), ok or failed"
            )
    if not tests:
        raise ValueError("status: give at least one of 403, 2xx, 4xx, 5xx, ok, failed")
    return StatusFilter(value, tuple(tests))


def _thread_matcher(value: str) -> Callable[[Sequence[str]], bool]:
    """A thread id matches itself; a phone number matches the threads of that user."""
    match = thread_matcher(value)
    return lambda threads: any(match(t) for t in threads)


@dataclass(frozen=True)
class Filters:
    """What ``list``, ``export``, ``send`` and ``diff`` select. Empty: everything."""

    since: datetime | None = None
    until: datetime | None = None
    provider: str | None = None
    thread: str | None = None
    message_id: str | None = None
    status: StatusFilter | None = None
    text: str | None = None
    limit: int | None = None
    ids: tuple[str, ...] = ()
    only_messages: bool = False  # diff: inbound deliveries that were accepted
    _thread_match: Callable[[Sequence[str]], bool] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.thread:
            object.__setattr__(self, "_thread_match", _thread_matcher(self.thread))

    def matches(self, d: RawDelivery) -> bool:
        if self.ids and d.id not in self.ids:
            return False
        when = d.when
        if self.since is not None and when < self.since:
            return False
        if self.until is not None and when > self.until:
            return False
        if self.provider and d.provider != self.provider:
            return False
        if self.status is not None and not self.status(d.status):
            return False
        if self.only_messages and not (200 <= d.status < 300 and d.messages):
            return False
        if self._thread_match is not None and not self._thread_match(d.threads):
            return False
        if (
            self.message_id
            and self.message_id not in d.messages
            and self.message_id not in d.body.decode("utf-8", "replace")
        ):
            return False
        return not self.text or self.text.casefold() in d.searchable_text.casefold()

    def describe(self) -> str:
        """The filters in words, for "no delivery matches …" messages."""
        parts = []
        if self.ids:
            parts.append("id " + ", ".join(self.ids))
        if self.since:
            parts.append(f"since {self.since.isoformat(timespec='seconds')}")
        if self.until:
            parts.append(f"until {self.until.isoformat(timespec='seconds')}")
        for name in ("provider", "thread", "message_id", "status", "text"):
            value = getattr(self, name)
            if value:
                parts.append(f"{name.replace('_', '-')} {value}")
        return ", ".join(parts) or "no filter"
