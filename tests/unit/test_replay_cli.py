"""The ``replay`` command line: arguments, as a user types them."""

from __future__ import annotations

import argparse
import io

import pytest

from gateway.replay.cli import build_parser, parse_rate


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["replay", *argv])


def test_list_filters_parse() -> None:
    args = parse("list", "--since", "2h", "--status", "5xx,403", "--thread", "+5511999990000",
                 "--text", "fatura", "--limit", "20", "--provider", "twilio", "--json")  # fmt: skip
    assert args.replay_command == "list"
    assert args.status(503)
    assert args.status(403)
    assert not args.status(200)
    assert args.limit == 20


def test_send_options_parse() -> None:
    args = parse("send", "--file", "x.jsonl", "--to", "http://127.0.0.1:8080",
                 "--rate", "600/m", "--concurrency", "4", "--speed", "10x",
                 "--fresh-ids", "--dry-run", "--yes")  # fmt: skip
    assert args.rate == 10.0
    assert args.speed == 10.0
    assert args.fresh_ids
    assert args.dry_run
    assert args.yes


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["list", "--since", "ontem"], "relative one"),
        (["list", "--status", "6xx"], "status"),
        (["list", "--limit", "0"], "at least 1"),
        (["send", "--to", "http://x", "--rate", "fast"], "N/s"),
        (["send", "--to", "http://x", "--speed", "0x"], "more than 0"),
        (["send"], "--to"),
        (["export"], "--output"),
    ],
)
def test_bad_arguments_say_what_is_wrong(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        parse(*argv)
    assert exc.value.code == 2
    assert complaint in capsys.readouterr().err


def test_rates() -> None:
    assert parse_rate("10/s") == 10
    assert parse_rate("5") == 5
    assert parse_rate("120/min") == 2


def test_list_shows_the_50_most_recent_unless_told() -> None:
    assert parse("list").limit is None  # the command applies its default of 50
    assert parse("list", "--all").all


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal() -> None:
    from gateway.replay import Outcome, RawDelivery, Secrets, prepare
    from gateway.replay.output import Progress as _Progress

    d = RawDelivery("1-0", "", "twilio", "POST", "/webhooks/twilio", "", {}, b"", 200)
    p = prepare(d, "http://127.0.0.1:1", Secrets())
    screen = Terminal()
    bar = _Progress(4, screen)
    bar(Outcome(p, status=200))
    bar(Outcome(p, status=500))
    bar.close()
    assert screen.getvalue().endswith("\r[###############...............] 2/4  1 failed\n")
    pipe = io.StringIO()
    quiet = _Progress(4, pipe)
    quiet(Outcome(p, status=200))
    quiet.close()
    assert pipe.getvalue() == ""
