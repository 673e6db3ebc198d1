"""``mel-gateway support agent add|list|remove``: the people who log in to the console."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from typing import Any, TextIO

from gateway.bootstrap import open_store
from gateway.errors import BadRequest
from gateway.settings import Settings
from gateway.support_agents import add_agent, list_agents, remove_agent

__all__ = ["register", "run_support"]


def register(sub: Any) -> None:
    support = sub.add_parser("support", help="support console agents (see docs/console.md)")
    ssub = support.add_subparsers(dest="support_command", required=True)
    agent = ssub.add_parser("agent", help="the people who log in to /console/")
    asub = agent.add_subparsers(dest="agent_command", required=True)
    add = asub.add_parser("add", help="create an agent (the password is read, never an argument)")
    add.add_argument("name", metavar="NAME")
    add.add_argument(
        "--password-stdin",
        action="store_true",
        help="read the password from the first line of standard input (else: prompt)",
    )
    add.add_argument("--replace", action="store_true", help="give an existing agent a new password")
    listing = asub.add_parser("list", help="the agents")
    listing.add_argument("--json", action="store_true", help="one JSON document")
    remove = asub.add_parser("remove", help="remove an agent and end its logins")
    remove.add_argument("name", metavar="NAME")
    support.set_defaults(run=lambda settings, args: asyncio.run(run_support(settings, args)))


def _password(args: argparse.Namespace, stdin: TextIO) -> str:
    if args.password_stdin:
        line = stdin.readline()
        password = line.removesuffix("\n").removesuffix("\r")
    elif stdin.isatty():
        password = getpass.getpass("password: ")
        if getpass.getpass("again: ") != password:
            raise BadRequest("the two passwords differ")
    else:
        raise BadRequest("no terminal to ask the password on: pass --password-stdin")
    if not password:
        raise BadRequest("empty password")
    return password


async def run_support(
    settings: Settings,
    args: argparse.Namespace,
    *,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
) -> int:
    stdin = stdin or sys.stdin
    out = out or sys.stdout
    async with open_store(settings) as store:
        if args.agent_command == "add":
            password = _password(args, stdin)
            record = await add_agent(store, args.name, password, replace=args.replace)
            verb = "updated" if args.replace else "added"
            print(f"agent {record.name} {verb}: log in at /console/", file=out)
        elif args.agent_command == "remove":
            await remove_agent(store, args.name)
            print(f"agent {args.name.strip()} removed (logins ended)", file=out)
        else:
            agents = await list_agents(store)
            if args.json:
                print(json.dumps({"agents": [a.as_json() for a in agents]}), file=out)
            elif not agents:
                print("no agents: add one with `mel-gateway support agent add NAME`", file=out)
            else:
                for agent in agents:
                    print(f"{agent.name}\tsince {agent.created_at}", file=out)
    return 0
