"""What every event payload is: a frozen pydantic model that knows its event type."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CATALOGUE", "Omitted", "Payload", "payload_type"]

_T = TypeVar("_T")


def _is_none(value: object) -> bool:
    return value is None


Omitted = Annotated[_T | None, Field(exclude_if=_is_none)]
"""A field left out of the event's data when it is None (rather than ``null``); give it
``= None``."""

CATALOGUE: dict[str, type[Payload]] = {}
"""Every domain event type → its payload model."""


class Payload(BaseModel):
    """The ``data`` of one event. Subclasses set ``TYPE``, the event's type."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    TYPE: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("TYPE")
        if kind is not None:
            if kind in CATALOGUE:
                raise TypeError(f"event type {kind!r} is declared twice")
            CATALOGUE[kind] = cls

    def data(self) -> dict[str, Any]:
        """The JSON-ready ``data`` of the event envelope."""
        return self.model_dump(mode="json")


def payload_type(kind: str) -> type[Payload]:
    """The payload model of an event type; ``KeyError`` for one not in the catalogue."""
    return CATALOGUE[kind]
