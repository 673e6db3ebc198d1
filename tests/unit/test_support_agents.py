"""Support agents' passwords (salted scrypt, parameters stored with the hash), names, and
console agents counting as configured support."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gateway.errors import BadRequest
from gateway.settings import Settings
from gateway.support_agents import (
    SCRYPT,
    ScryptParams,
    agent_key,
    check_name,
    check_password,
    hash_password,
    verify_password,
)

FAST = ScryptParams(n=2**8, r=8, p=1)


def test_a_password_hash_is_salted_names_its_parameters_and_verifies() -> None:
    one = hash_password("correct horse", FAST)
    two = hash_password("correct horse", FAST)
    assert one != two  # a fresh salt each time
    scheme, n, r, p, salt, _key = one.split("$")
    assert (scheme, n, r, p) == ("scrypt", "256", "8", "1")
    assert len(salt) == 24  # 16 bytes, base64
    assert "correct horse" not in one
    assert verify_password("correct horse", one)
    assert verify_password("correct horse", two)
    assert not verify_password("correct hors", one)
    assert not verify_password("", one)


def test_the_default_parameters_are_owasps_scrypt_equivalent() -> None:
    assert (SCRYPT.n, SCRYPT.r, SCRYPT.p) == (2**15, 8, 3)
    assert SCRYPT.salt_bytes >= 16


@pytest.mark.parametrize(
    "stored",
    ["", "plain", "bcrypt$1$2$3$4$5", "scrypt$x$8$1$AAAA$BBBB", "scrypt$256$8$1$!!$??"],
)
def test_a_malformed_stored_hash_never_verifies(stored: str) -> None:
    assert not verify_password("anything", stored)


def test_names_and_passwords_are_checked() -> None:
    assert check_name("  Ana ") == "Ana"
    assert check_name("joão.silva") == "joão.silva"
    assert agent_key("  ANA ") == "ana"
    for bad in ("", "-ana", "a b", "x" * 41, "ana<script>"):
        with pytest.raises(BadRequest):
            check_name(bad)
    with pytest.raises(BadRequest, match="8 to 1024"):
        check_password("curta")
    assert check_password("longa-o-bastante") == "longa-o-bastante"


def test_console_agents_make_support_configured() -> None:
    noon = datetime(2026, 6, 3, 15, 0, tzinfo=UTC)  # 12:00 in São Paulo
    night = datetime(2026, 6, 3, 3, 0, tzinfo=UTC)
    plain = Settings(_env_file=None)  # type: ignore[call-arg]
    assert plain.support_status(noon) == "none"
    assert plain.support_status(noon, agents=True) == "available"
    hours = Settings(_env_file=None, support_hours="09:00-18:00")  # type: ignore[call-arg]
    assert hours.support_status(night, agents=True) == "out_of_hours"
    assert hours.support_status(noon, agents=False) == "none"
