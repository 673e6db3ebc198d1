"""The three canonical PT-BR replies of spec 023, byte for byte.

They are the spec's strings verbatim (the spec prints them between curly quotes, which are
not part of the strings; the em dashes are). Tone is owned by code review, not by a prompt.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "GUARD_RESPONSE_FRUSTRATED",
    "GUARD_RESPONSE_HUMAN_REQUEST",
    "GUARD_RESPONSE_LOOP",
]

GUARD_RESPONSE_FRUSTRATED: Final = (
    "Vi que tu tá frustrado e eu entendo. Bora tentar de outro jeito — "
    "me conta o que tu precisa em 1 frase curta?"
)
GUARD_RESPONSE_LOOP: Final = (
    "Acho que travei. Não consegui te ajudar com isso. "
    "Quer reformular ou esperar um humano entrar pra te ajudar mais tarde?"
)
GUARD_RESPONSE_HUMAN_REQUEST: Final = (
    "Por enquanto só eu (mel) por aqui — sem humano. "
    "Anoto o pedido pra avisar quando suporte entrar. "
    "Enquanto isso, posso te ajudar com orçamento, metas ou fatura?"
)
