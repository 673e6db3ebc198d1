"""``python -m gateway.replay list …``: the replay command without ``mel-gateway``."""

from __future__ import annotations

import sys

from gateway.errors import ConfigError
from gateway.replay.cli import build_parser, run_replay
from gateway.settings import load_settings


def main() -> int:
    args = build_parser().parse_args(["replay", *sys.argv[1:]])
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"mel-gateway: {exc}", file=sys.stderr)
        return 2
    return run_replay(args, settings)


if __name__ == "__main__":
    sys.exit(main())
