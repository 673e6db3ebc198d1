"""Webhook replay: find, export, re-sign and re-send recorded deliveries; diff the replies.

The gateway records every webhook delivery in ``{MEL_REDIS_PREFIX}:raw``; this package
reads that stream (or an export file), rewrites and re-signs deliveries for another
gateway, sends them with rate, concurrency and per-thread order, and compares the
replies. ``mel-gateway replay …`` is its command line (``gateway.replay.cli``); the user
guide and the export format are in ``docs/replay.md``.
"""

from gateway.replay.cli import (
    CONFIRM_ABOVE,
    LIST_LIMIT,
    add_replay_parser,
    arun_replay,
    run_replay,
)
from gateway.replay.diff import (
    Comparison,
    DiffReport,
    ReplyTracker,
    compare,
    original_replies,
    replay_and_compare,
)
from gateway.replay.filters import Filters, StatusFilter, parse_speed, parse_status, parse_when
from gateway.replay.records import (
    EXPORT_FORMAT,
    ExportLineError,
    RawDelivery,
    RawLog,
    RecordError,
    export_line,
    read_export,
)
from gateway.replay.redact import Redactor
from gateway.replay.resign import FreshIds, Prepared, Secrets, prepare, target_url
from gateway.replay.sender import Outcome, SendOptions, SendReport, run_send, send_all

__all__ = [
    "CONFIRM_ABOVE",
    "EXPORT_FORMAT",
    "LIST_LIMIT",
    "Comparison",
    "DiffReport",
    "ExportLineError",
    "Filters",
    "FreshIds",
    "Outcome",
    "Prepared",
    "RawDelivery",
    "RawLog",
    "RecordError",
    "Redactor",
    "ReplyTracker",
    "Secrets",
    "SendOptions",
    "SendReport",
    "StatusFilter",
    "add_replay_parser",
    "arun_replay",
    "compare",
    "export_line",
    "original_replies",
    "parse_speed",
    "parse_status",
    "parse_when",
    "prepare",
    "read_export",
    "replay_and_compare",
    "run_replay",
    "run_send",
    "send_all",
    "target_url",
]
