"""A frozen copy of guard v1 (the guard as of commit d4dd466), kept only so that
``bench/guard_bench.py`` can time v1 and the current guard on the same messages in the
same run. Do not edit or import it from product code; it is never updated.
"""

from bench.guard_v1._guard import (
    ConversationGuard,
    GuardInput,
    GuardKind,
    GuardVerdict,
    MessageLike,
)

__all__ = ["ConversationGuard", "GuardInput", "GuardKind", "GuardVerdict", "MessageLike"]
