"""``mel-gateway replay`` against real gateways on loopback, with real Redis.

Record traffic on one gateway → list / filter / show → export (plain and redacted) →
send to a second gateway with another URL and other secrets → fresh ids get past its
dedupe → per-thread order under concurrency → dry runs send nothing → diff with an LLM
cassette: identical for an unchanged build, changed after a canonical reply changes.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import gateway.bootstrap as bootstrap
from agent.cassette import CassetteLLM
from agent.routing import session_control
from gateway.replay import Filters, RawDelivery, RawLog, export_line, read_export
from gateway.replay.cli import arun_replay, build_parser, run_replay
from gateway.settings import Settings
from guard import GUARD_RESPONSE_FRUSTRATED, ConversationGuard, GuardInput, GuardVerdict
from tests.e2e.conftest import ACCOUNT_SID, AUTH_TOKEN, META_SECRET, Gateway
from tests.fakes.llm import FakeLLM
from tests.fakes.payloads import meta_text_payload
from tests.fakes.twilio_api import FakeTwilioAPI

OTHER_TOKEN = "the-other-gateways-twilio-token"
OTHER_SECRET = "the-other-gateways-meta-secret"
ANA = "+5511999990000"
BRUNO = "+5511988887777"
CARLA = "+5521977776666"


class Cli:
    """Runs ``mel-gateway replay …`` in-process; keeps what it printed."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.out = ""
        self.err = ""

    async def __call__(self, *argv: str, stdin: Any = None) -> int:
        args = build_parser().parse_args(["replay", *argv])
        out, err = io.StringIO(), io.StringIO()
        code = await arun_replay(
            args, self.settings, stdout=out, stderr=err, stdin=stdin or io.StringIO()
        )
        self.out, self.err = out.getvalue(), err.getvalue()
        return code

    def json(self) -> Any:
        return json.loads(self.out)


def cli_settings(gw: Gateway, **overrides: Any) -> Settings:
    """The environment of an engineer's shell: the source's Redis, no secrets unless given."""
    values: dict[str, Any] = {
        "redis_url": gw.settings.redis_url,
        "mel_redis_prefix": gw.settings.mel_redis_prefix,
        "mel_data_dir": gw.settings.mel_data_dir,
        "meta_app_secret": "",  # "" → None: not the dev mode, no secret
        "twilio_auth_token": "x-unused",
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@pytest.fixture
async def other_twilio() -> AsyncIterator[FakeTwilioAPI]:
    """The Twilio REST API of the second gateway's account (its own token)."""
    async with FakeTwilioAPI(ACCOUNT_SID, OTHER_TOKEN) as fake:
        yield fake


@pytest.fixture
def start_other(
    other_twilio: FakeTwilioAPI, start_gateway: Callable[..., Any]
) -> Callable[..., Any]:
    """A second gateway: another port, another prefix, other webhook secrets."""

    async def start(prefix: str = "other", **overrides: Any) -> Gateway:
        gw: Gateway = await start_gateway(
            mel_redis_prefix=prefix,
            twilio_auth_token=OTHER_TOKEN,
            twilio_api_base_url=other_twilio.base_url,
            meta_app_secret=OTHER_SECRET,
            **overrides,
        )
        return gw

    return start


def resign_flags() -> list[str]:
    return ["--twilio-auth-token", OTHER_TOKEN, "--meta-app-secret", OTHER_SECRET]


async def record_traffic(gw: Gateway) -> None:
    """Three users, four accepted deliveries (one through Meta) and one forged."""
    assert (await gw.twilio("qual o total de junho?", user=ANA)).status == 200
    assert (await gw.twilio("oi mel", user=BRUNO)).status == 200
    assert (await gw.twilio("e o de maio?", user=ANA)).status == 200
    assert (await gw.meta(meta_text_payload("orçamento da casa", from_=CARLA))).status == 200
    assert (await gw.twilio("forjado", user=BRUNO, token="not-the-token")).status == 403
    await gw.wait_events("message.sent", 4)
    await gw.idle()


async def received_texts(gw: Gateway) -> dict[str, list[str]]:
    """What a gateway's turns read, per user number, in order."""
    out: dict[str, list[str]] = {}
    for e in await gw.events("message.received"):
        out.setdefault(e["thread_id"].rsplit(":", 1)[-1], []).append(e["data"]["text"])
    return out


# --- list, show ----------------------------------------------------------------------


async def test_list_filters_and_show(gateway: Gateway) -> None:
    await record_traffic(gateway)
    cli = Cli(cli_settings(gateway))

    assert await cli("list") == 0
    lines = cli.out.splitlines()
    assert lines[0].split() == ["ID", "RECEIVED", "PROVIDER", "USER", "STATUS", "PREVIEW"]
    assert len(lines) == 1 + 5 + 1
    assert ANA not in cli.out  # numbers are masked in the table
    assert "+55119****0000" in cli.out
    assert "qual o total de junho?" in cli.out
    assert "403" in lines[5]
    assert "forjado" in lines[5]  # a refused delivery still shows whose it was

    async def ids(*argv: str) -> list[str]:
        assert await cli("list", "--json", *argv) == 0
        return [d["preview"] for d in cli.json()]

    assert await ids("--status", "403") == ["forjado"]
    assert await ids("--status", "2xx", "--provider", "twilio") == [
        "qual o total de junho?", "oi mel", "e o de maio?",
    ]  # fmt: skip
    assert await ids("--provider", "meta") == ["orçamento da casa"]
    assert await ids("--thread", "+55 11 99999-0000") == ["qual o total de junho?", "e o de maio?"]
    assert await ids("--text", "ORÇAMENTO") == ["orçamento da casa"]
    assert await ids("--limit", "2") == ["orçamento da casa", "forjado"]  # the most recent
    assert await ids("--since", "10m") == await ids()
    assert await ids("--until", "10m") == []

    assert await cli("list", "--json", "--text", "junho") == 0
    [first] = cli.json()
    assert first["thread_ids"] == [f"twilio:+14155238886:{ANA}"]
    assert await cli("show", first["id"]) == 0
    assert "Body = qual o total de junho?" in cli.out
    assert "x-twilio-signature:" in cli.out
    sent = await gateway.events("message.sent")
    reply = next(e for e in sent if e["data"]["in_reply_to"] == first["message_ids"][0])
    assert json.dumps(reply["data"]["text"], ensure_ascii=False) in cli.out
    assert await cli("show", first["id"], "--json") == 0
    assert cli.json()["replies"] == {
        first["message_ids"][0]: {"text": reply["data"]["text"], "status": "sent"}
    }

    assert await cli("show", "1-0") == 1
    assert "no delivery with id 1-0" in cli.err
    assert await cli("list", "--text", "nada disso") == 0
    assert "no delivery matches (text nada disso)" in cli.out


async def test_run_replay_is_the_blocking_entry_point_mel_gateway_calls(
    gateway: Gateway, start_other: Callable[..., Any], capsys: pytest.CaptureFixture[str]
) -> None:
    await gateway.twilio("oi", user=ANA)
    await gateway.idle()
    other: Gateway = await start_other()
    args = build_parser().parse_args(
        ["replay", "send", "--to", other.url(""), *resign_flags(), "--json"]
    )
    code = await asyncio.to_thread(run_replay, args, cli_settings(gateway))
    assert code == 0
    out = capsys.readouterr().out  # the gateway's own log lines are in there too
    summary, _end = json.JSONDecoder().raw_decode(out, out.index('{\n  "send"'))
    assert summary["send"]["by_status"] == {"2xx": 1}
    await other.wait_events("message.sent", 1)


# --- export, send --------------------------------------------------------------------


async def test_export_then_send_to_another_gateway_re_signed(
    gateway: Gateway, start_other: Callable[..., Any], tmp_path: Path
) -> None:
    await record_traffic(gateway)
    other: Gateway = await start_other()
    cli = Cli(cli_settings(gateway))
    plain, redacted = tmp_path / "plain.jsonl", tmp_path / "redacted.jsonl"

    assert await cli("export", "--status", "2xx", "-o", str(plain)) == 0
    assert "exported 4 deliveries" in cli.err
    items = list(read_export(plain))
    assert all(isinstance(i, RawDelivery) for i in items)
    assert [len(i.replies) for i in items] == [1, 1, 1, 1]  # type: ignore[union-attr]
    assert await cli("export", "--status", "2xx", "--redact", "-o", str(redacted)) == 0
    text = redacted.read_text()
    for number in (ANA, BRUNO, CARLA):
        assert number.removeprefix("+") not in text
    assert "Ana" not in text  # the profile name

    # the second gateway has another URL and other secrets: signatures are recomputed
    assert await cli("send", "--file", str(plain), "--to", other.url(""), *resign_flags()) == 0
    assert "sent          4 of 4" in cli.out
    assert "  2xx         4" in cli.out
    await other.wait_events("message.sent", 4)
    assert await received_texts(other) == {
        ANA: ["qual o total de junho?", "e o de maio?"],
        BRUNO: ["oi mel"],
        CARLA: ["orçamento da casa"],
    }

    # a redacted export replays too (into a fresh prefix: other numbers, other threads)
    third: Gateway = await start_other("third")
    assert await cli("send", "--file", str(redacted), "--to", third.url(""),
                     *resign_flags(), "--json") == 0  # fmt: skip
    assert cli.json()["send"]["by_status"] == {"2xx": 4}
    await third.wait_events("message.received", 4)
    users = set(await received_texts(third))
    assert len(users) == 3
    assert all(u.startswith("+999") for u in users)


async def test_without_the_targets_secrets_the_original_signatures_go_and_are_refused(
    gateway: Gateway, start_other: Callable[..., Any]
) -> None:
    await record_traffic(gateway)
    other: Gateway = await start_other()
    cli = Cli(cli_settings(gateway, twilio_auth_token=""))
    assert await cli("send", "--status", "2xx", "--to", other.url(""), "--json") == 1
    assert "no twilio secret for the target: 3 deliveries keep their original signature" in cli.err
    assert "no meta secret for the target: 1 delivery keeps its original signature" in cli.err
    summary = cli.json()["send"]
    assert summary["by_status"] == {"4xx": 4}
    assert summary["original_signatures"] == 4
    assert summary["failed"] == 4
    assert await other.events("message.received") == []


async def test_fresh_ids_get_past_the_targets_dedupe(
    gateway: Gateway, start_other: Callable[..., Any]
) -> None:
    await record_traffic(gateway)
    other: Gateway = await start_other()
    cli = Cli(cli_settings(gateway))
    send = ["send", "--status", "2xx", "--to", other.url(""), *resign_flags(), "--json"]
    assert await cli(*send) == 0
    await other.wait_events("message.sent", 4)
    await other.idle()

    assert await cli(*send) == 0  # accepted (2xx) but dropped as duplicates
    await other.idle()
    assert len(await other.events("message.received")) == 4

    assert await cli(*send, "--fresh-ids") == 0
    received = await other.wait_events("message.received", 8)
    assert len(received) == 8
    new_ids = {e["data"]["message_id"] for e in received[4:]}
    old_ids = {e["data"]["message_id"] for e in received[:4]}
    assert not new_ids & old_ids
    assert all(i.startswith(("SM", "wamid.")) for i in new_ids)
    await other.wait_events("message.sent", 8)


async def test_per_thread_order_is_kept_under_concurrency(
    gateway: Gateway, start_other: Callable[..., Any], fake_llm: FakeLLM
) -> None:
    users = [f"+55119000000{i:02d}" for i in range(4)]
    for n in range(5):
        for user in users:
            assert (await gateway.twilio(f"{user[-2:]}: mensagem {n}", user=user)).status == 200
    await gateway.wait_events("message.sent", 20, timeout=30)
    await gateway.idle()
    other: Gateway = await start_other()
    fake_llm.delay = 0.05
    cli = Cli(cli_settings(gateway))
    assert await cli("send", "--to", other.url(""), *resign_flags(), "--concurrency", "16",
                     "--fresh-ids") == 0  # fmt: skip
    await other.wait_events("message.sent", 20, timeout=30)
    got = await received_texts(other)
    for user in users:
        assert got[user] == [f"{user[-2:]}: mensagem {n}" for n in range(5)]


async def test_dry_run_sends_nothing(gateway: Gateway, start_other: Callable[..., Any]) -> None:
    await record_traffic(gateway)
    other: Gateway = await start_other()
    cli = Cli(cli_settings(gateway))
    assert await cli("send", "--to", other.url(""), *resign_flags(), "--dry-run") == 0
    assert "dry run: 5 deliveries would be sent" in cli.out
    assert "nothing was sent" in cli.out
    assert len(cli.out.splitlines()) == 6
    assert other.url("/webhooks/twilio") in cli.out
    assert "signature recomputed" in cli.out
    assert await other.store.redis.xlen(other.store.keys.raw) == 0


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_more_than_fifty_deliveries_need_a_confirmation(
    gateway: Gateway, start_other: Callable[..., Any], tmp_path: Path
) -> None:
    await gateway.twilio("oi", user=ANA)
    await gateway.idle()
    [recorded] = await RawLog(gateway.store.redis, gateway.store.keys.raw).select(Filters())
    path = tmp_path / "many.jsonl"
    ms = recorded.sort_key[0]
    path.write_text(
        "".join(export_line(replace(recorded, id=f"{ms}-{n}")) + "\n" for n in range(51))
    )
    other: Gateway = await start_other()
    cli = Cli(cli_settings(gateway))
    send = ["send", "--file", str(path), "--to", other.url(""), *resign_flags(), "--fresh-ids"]

    assert await cli(*send) == 2  # no terminal to ask on
    assert "refusing to send 51 deliveries" in cli.err
    assert "pass --yes" in cli.err
    assert await cli(*send, stdin=FakeTerminal("n\n")) == 2
    assert "Send 51 deliveries to" in cli.err
    assert await other.store.redis.xlen(other.store.keys.raw) == 0

    assert await cli(*send, stdin=FakeTerminal("y\n")) == 0
    assert await other.store.redis.xlen(other.store.keys.raw) == 51


async def test_bad_input_is_reported_counted_and_the_run_goes_on(
    gateway: Gateway, start_other: Callable[..., Any], tmp_path: Path
) -> None:
    await record_traffic(gateway)
    other: Gateway = await start_other()
    cli = Cli(cli_settings(gateway))
    path = tmp_path / "mixed.jsonl"
    assert await cli("export", "--status", "2xx", "-o", str(path)) == 0
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], '{"id": "broken', *lines[1:]]) + "\n")

    # a corrupt line, and Meta deliveries rewritten (fresh ids) with no Meta secret
    assert await cli("send", "--file", str(path), "--to", other.url(""), "--fresh-ids",
                     "--twilio-auth-token", OTHER_TOKEN, "--json") == 1  # fmt: skip
    assert "line 2: not valid JSON" in cli.err
    assert "no meta secret for the target (META_APP_SECRET (--meta-app-secret))" in cli.err
    summary = cli.json()["send"]
    assert (summary["sent"], summary["skipped"], summary["failed"]) == (3, 2, 2)
    assert summary["by_status"] == {"2xx": 3}

    # an unknown id, and a target that refuses connections
    [first] = [json.loads(lines[0])["id"]]
    assert await cli("send", "--id", first, "--id", "42-0", "--to", "http://127.0.0.1:9",
                     *resign_flags(), "--json") == 1  # fmt: skip
    assert "no delivery with id 42-0" in cli.err
    summary = cli.json()["send"]
    assert (summary["sent"], summary["errors"], summary["skipped"]) == (0, 1, 1)
    assert any("cannot connect to http://127.0.0.1:9" in p for p in summary["problems"])

    assert await cli("send", "--file", str(tmp_path / "nope.jsonl"), "--to", "http://x") == 2
    assert "no such file" in cli.err


# --- diff with a cassette ------------------------------------------------------------


def use_cassette(monkeypatch: pytest.MonkeyPatch, path: Path, mode: str) -> None:
    """Gateways started from now on talk to the LLM through a cassette."""
    real = bootstrap.MeteredLLM

    def metered(inner: Any, metrics: Any) -> Any:
        return real(CassetteLLM(inner, path, mode), metrics)  # type: ignore[arg-type]

    monkeypatch.setattr(bootstrap, "MeteredLLM", metered)


async def test_diff_is_identical_with_a_cassette_and_shows_a_changed_guard_reply(
    start_gateway: Callable[..., Any],
    fake_llm: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    calls = 0

    def unreproducible(request: dict[str, Any]) -> str:
        nonlocal calls
        calls += 1
        return f"resposta nº {calls} para: {request['messages'][-1]['content']}"

    fake_llm.responder = unreproducible
    cassette = tmp_path / "llm.jsonl"
    use_cassette(monkeypatch, cassette, "record")
    source: Gateway = await start_gateway()
    await source.twilio("oi, tudo bem?", user=ANA)
    await source.twilio("esse bot é uma porra, não funciona NADA", user=BRUNO)
    await source.meta(meta_text_payload("quanto gastamos?", from_=CARLA))
    await source.wait_events("message.sent", 3)
    await source.idle()
    await source.twilio("e o mês passado?", user=ANA)
    await source.wait_events("message.sent", 4)
    await source.idle()
    recorded = fake_llm.call_count
    assert recorded > 0

    # an unchanged build, answering from the cassette: every reply identical
    use_cassette(monkeypatch, cassette, "replay")
    same: Gateway = await start_gateway(mel_redis_prefix="same")
    cli = Cli(cli_settings(source, meta_app_secret=META_SECRET, twilio_auth_token=AUTH_TOKEN))
    assert await cli("diff", "--since", "10m", "--to", same.url(""), "--target-prefix", "same",
                     "--wait", "20", "--json") == 0  # fmt: skip
    report = cli.json()
    assert report["summary"] == {"identical": 4, "changed": 0, "missing": 0, "new": 0}
    assert fake_llm.call_count == recorded  # replayed without calling the model
    assert all(m["original"] == m["target"] for m in report["messages"])

    # a deliberate change of a canonical reply: exactly that reply shows up
    new_reply = "Poxa, sinto muito. Me diz em poucas palavras o que tu precisa?"

    class ChangedGuard:
        @staticmethod
        def evaluate(guard_input: GuardInput) -> GuardVerdict:
            verdict = ConversationGuard.evaluate(guard_input)
            if verdict.kind == "frustrated":
                return GuardVerdict(True, "frustrated", new_reply)
            return verdict

    monkeypatch.setattr(session_control, "ConversationGuard", ChangedGuard)
    changed: Gateway = await start_gateway(mel_redis_prefix="changed")
    assert await cli("diff", "--since", "10m", "--to", changed.url(""),
                     "--target-prefix", "changed", "--wait", "20") == 1  # fmt: skip
    assert "identical 3" in " ".join(cli.out.split())
    assert "changed 1" in " ".join(cli.out.split())
    assert "CHANGED  twilio:+55119****7777" in cli.out
    assert f"-{GUARD_RESPONSE_FRUSTRATED}" in cli.out
    assert f"+{new_reply}" in cli.out
    assert fake_llm.call_count == recorded

    # diffing again into the same target: the tool warns that threads have a history
    assert await cli("diff", "--since", "10m", "--to", changed.url(""),
                     "--target-prefix", "changed", "--wait", "20", "--json") == 1  # fmt: skip
    assert "already has a history in the target" in cli.err


async def test_diff_from_an_export_file_needs_no_source(
    start_gateway: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "llm.jsonl"
    use_cassette(monkeypatch, cassette, "record")
    source: Gateway = await start_gateway()
    await source.twilio("qual o saldo?", user=ANA)
    await source.wait_events("message.sent", 1)
    await source.idle()
    cli = Cli(cli_settings(source, twilio_auth_token=AUTH_TOKEN))
    path = tmp_path / "export.jsonl"
    assert await cli("export", "-o", str(path), "--redact") == 0
    # the source is gone (another prefix stands for another machine); the file is enough
    use_cassette(monkeypatch, cassette, "replay")
    target: Gateway = await start_gateway(mel_redis_prefix="local")
    cli = Cli(cli_settings(source, mel_redis_prefix="nowhere", twilio_auth_token=AUTH_TOKEN))
    assert await cli("diff", "--file", str(path), "--to", target.url(""), "--target-prefix",
                     "local", "--wait", "20", "--json") == 0  # fmt: skip
    assert cli.json()["summary"]["identical"] == 1
