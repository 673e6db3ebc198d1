"""Households: the two partners of a couple share one ledger (each keeps their own
thread). The operations behind ``mel-gateway household`` and ``/support/households``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent import Ledger, LedgerError
from channels import MalformedPayload, is_bsuid, to_e164
from gateway.errors import BadRequest

__all__ = ["Household", "household_of", "link", "member_key", "unlink"]


@dataclass(frozen=True, slots=True)
class Household:
    id: str
    members: tuple[str, ...]

    def as_json(self) -> dict[str, object]:
        return {"household": self.id, "members": list(self.members)}


def member_key(value: str) -> str:
    """A partner as threads name them: a number in E.164 (any usual spelling) or Meta's
    business-scoped user id. ``BadRequest`` otherwise."""
    value = value.strip()
    if is_bsuid(value):
        return value
    try:
        return to_e164(value, field="number")
    except MalformedPayload as exc:
        raise BadRequest(exc.reason) from None


async def household_of(ledger: Ledger, value: str) -> Household:
    """The household of a number (or by its id)."""
    try:
        key = member_key(value)
    except BadRequest:
        key = ""
    household_id = await ledger.household_for(key) if key else value.strip()
    members = await ledger.members(household_id)
    if not members and key:
        members = {key}  # a number alone is its own household
    return Household(household_id, tuple(sorted(members)))


async def link(
    ledger: Ledger, numbers: Sequence[str], household_id: str | None = None
) -> Household:
    """Make ``numbers`` share one ledger: ``household_id``, or by default the household of
    the first number (its expenses stay where they are; the others join it)."""
    keys = [member_key(n) for n in numbers]
    if len(keys) < 2 and household_id is None:
        raise BadRequest("give two numbers (the two partners), or --household")
    target = household_id or await ledger.household_for(keys[0])
    try:
        await ledger.link_household(target, keys)
    except LedgerError as exc:
        raise BadRequest(str(exc)) from None
    return await household_of(ledger, keys[0])


async def unlink(ledger: Ledger, number: str) -> str | None:
    """Take a partner out of their household; the household left (None: in none)."""
    return await ledger.unlink(member_key(number))
