"""A fake OpenAI-compatible LLM on loopback that speaks the chat-completions wire format.

The real openai SDK (``AsyncOpenAI(base_url=fake.base_url)``) talks to it, so "the LLM
was (not) called" is observed at the HTTP level::

    async with FakeLLM.running(api_key="sk-test") as fake:
        fake.script(tool_call("budgetTotal", {"month": "2026-06"}), "Vocês gastaram R$ 10,00.")
        ...  # point OpenAICompatibleLLM at fake.base_url
        assert fake.call_count == 2
        assert fake.tool_messages()[0]["content"].startswith("{")

Implements ``POST /v1/chat/completions`` (and ``/chat/completions``) and ``GET /v1/models``.
Each request takes the next scripted item — a text reply (a plain ``str`` or
:func:`text`), a tool call (:func:`tool_call` / :func:`tool_calls`), an HTTP error
(:func:`error`), a hang until the client gives up (:func:`hang`) or any raw body
(:func:`raw`, :func:`no_choices`) — and, once the script is empty, asks ``responder``
(default: the text ``"ok"``). Latency: a global ``delay`` plus ``latency_by_model``.
Every response carries ``usage`` (scripted, or roughly 4 characters a token).

With ``validate=True`` (default) requests are checked like the real API checks them
(roles, tool messages answering the assistant's ``tool_calls``, tool schemas), so a
client bug fails here as it would in production, with a 400.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web

from tests.fakes._server import LoopbackServer

__all__ = [
    "DEFAULT_REPLY",
    "Failure",
    "FakeLLM",
    "FakeToolCall",
    "Hang",
    "Raw",
    "RecordedCall",
    "Reply",
    "Responder",
    "Scripted",
    "echo_responder",
    "error",
    "hang",
    "no_choices",
    "raw",
    "start_fake_llm",
    "text",
    "tool_call",
    "tool_calls",
]

DEFAULT_REPLY = "ok"
_ROLES = {"system", "developer", "user", "assistant", "tool"}


# -- what a request can be answered with -------------------------------------------------


@dataclass(frozen=True)
class FakeToolCall:
    """One function call in an assistant message; ``arguments`` is JSON text."""

    name: str
    arguments: str = "{}"
    id: str = field(default_factory=lambda: f"call_{secrets.token_hex(8)}")


@dataclass(frozen=True)
class Reply:
    """A successful completion: text and/or tool calls. ``None`` fields are computed."""

    content: str | None = DEFAULT_REPLY
    tool_calls: tuple[FakeToolCall, ...] = ()
    finish_reason: str | None = None  # default: "tool_calls" when there are calls, else "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model: str | None = None  # default: the requested model
    delay: float = 0.0


@dataclass(frozen=True)
class Failure:
    """An HTTP error with OpenAI's error body."""

    status: int = 500
    message: str = "The server had an error while processing your request."
    type: str = "server_error"
    code: str | None = None
    delay: float = 0.0


@dataclass(frozen=True)
class Hang:
    """No answer for ``seconds`` (default: until the client gives up or the fake stops)."""

    seconds: float = 3600.0


@dataclass(frozen=True)
class Raw:
    """Any JSON body, verbatim (malformed completions, odd endpoints)."""

    body: Any
    status: int = 200
    delay: float = 0.0


Scripted = Reply | Failure | Hang | Raw | str
"""A scripted answer; a plain ``str`` is a text reply."""

Responder = Callable[[dict[str, Any]], Scripted | Awaitable[Scripted]]
"""Answers a request (its JSON body) when the script is empty."""


def text(content: str, **kwargs: Any) -> Reply:
    """A text reply (``finish_reason="stop"``)."""
    return Reply(content=content, **kwargs)


def tool_call(
    name: str,
    arguments: Mapping[str, Any] | str | None = None,
    *,
    id: str | None = None,
    content: str | None = None,
    **kwargs: Any,
) -> Reply:
    """An assistant message calling one tool; ``arguments`` as a dict or raw JSON text
    (raw text lets a test send invalid JSON)."""
    return tool_calls((name, arguments, id) if id else (name, arguments), content=content, **kwargs)


def tool_calls(
    *calls: FakeToolCall
    | tuple[str, Mapping[str, Any] | str | None]
    | tuple[str, Mapping[str, Any] | str | None, str],
    content: str | None = None,
    **kwargs: Any,
) -> Reply:
    """An assistant message calling several tools in one round."""
    built: list[FakeToolCall] = []
    for call in calls:
        if isinstance(call, FakeToolCall):
            built.append(call)
            continue
        name, arguments, *rest = call
        args = arguments if isinstance(arguments, str) else json.dumps(dict(arguments or {}))
        built.append(FakeToolCall(name, args, *rest) if rest else FakeToolCall(name, args))
    return Reply(content=content, tool_calls=tuple(built), **kwargs)


def error(
    status: int = 500, message: str | None = None, *, code: str | None = None, delay: float = 0.0
) -> Failure:
    """An HTTP error answer (500 server error, 429 rate limit, 401, ...)."""
    kind = {
        400: "invalid_request_error",
        401: "invalid_request_error",
        404: "invalid_request_error",
        429: "rate_limit_exceeded",
    }.get(status, "server_error")
    return Failure(status, message or f"fake LLM error {status}", kind, code, delay)


def hang(seconds: float = 3600.0) -> Hang:
    """Never answer in time: the client's timeout fires."""
    return Hang(seconds)


def raw(body: Any, status: int = 200, *, delay: float = 0.0) -> Raw:
    return Raw(body, status, delay)


def no_choices() -> Raw:
    """A 200 completion with an empty ``choices`` list."""
    return Raw(
        {
            "id": f"chatcmpl-{secrets.token_hex(12)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "fake",
            "choices": [],
            "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1},
        }
    )


def echo_responder(request: dict[str, Any]) -> Reply:
    """A PT-BR echo of the last user message: ``"Recebi: …"``."""
    last = next((m for m in reversed(request.get("messages", [])) if m.get("role") == "user"), None)
    said = str(last.get("content") or "") if last else ""
    return Reply(content=f"Recebi: {said}" if said else DEFAULT_REPLY)


# -- the server ------------------------------------------------------------------------------


@dataclass
class RecordedCall:
    """A request as received, and the HTTP status it was answered with (0: not answered,
    e.g. the client gave up while the fake was waiting)."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    status: int = 0

    @property
    def model(self) -> str | None:
        model = self.body.get("model")
        return model if isinstance(model, str) else None


def _tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


class FakeLLM(LoopbackServer):
    """The chat-completions endpoint of an OpenAI-compatible API, recording every call."""

    def __init__(
        self,
        api_key: str | None = None,
        *,
        responder: Responder | None = None,
        delay: float = 0.0,
        latency_by_model: Mapping[str, float] | None = None,
        validate: bool = True,
        host: str = "127.0.0.1",
    ) -> None:
        self.api_key = api_key  # when set, requests need "Authorization: Bearer <api_key>"
        self.responder = responder
        self.delay = delay  # seconds before every answer
        self.latency_by_model = dict(latency_by_model or {})
        self.validate = validate
        super().__init__()
        self.host = host
        self.requests: list[RecordedCall] = []
        # model name → responder, used before the script: e.g. a router model that always
        # answers its JSON while the script drives the agent's model
        self.by_model: dict[str, Responder] = {}
        self.root_url = ""
        self._script: deque[Scripted] = deque()
        self._changed = asyncio.Condition()
        self._closing = asyncio.Event()

    def routes(self, app: web.Application) -> None:
        for prefix in ("/v1", ""):
            app.router.add_post(f"{prefix}/chat/completions", self._complete)
            app.router.add_get(f"{prefix}/models", self._models)

    def runner_options(self) -> dict[str, Any]:
        # handler_cancellation: a client that gives up (timeout) cancels the hanging handler.
        return {"access_log": None, "handler_cancellation": True, "shutdown_timeout": 1.0}

    async def start(self) -> None:
        await super().start()
        self.root_url = self.base_url
        self.base_url = f"{self.root_url}/v1"  # what AsyncOpenAI(base_url=...) wants

    async def stop(self) -> None:
        self._closing.set()
        await super().stop()

    # ------------------------------------------------------------------ scripting

    def script(self, *items: Scripted | Iterable[Scripted]) -> Self:
        """Queue answers, used in order by the next requests (lists are flattened)."""
        for item in items:
            if isinstance(item, Reply | Failure | Hang | Raw | str):
                self._script.append(item)
            else:
                self._script.extend(item)
        return self

    @property
    def pending(self) -> int:
        """Scripted answers not used yet."""
        return len(self._script)

    def reset(self) -> None:
        """Forget the calls and the script."""
        self.requests.clear()
        self._script.clear()

    # ------------------------------------------------------------------ inspection

    @property
    def calls(self) -> list[dict[str, Any]]:
        """The JSON bodies of every chat-completions request received, in order."""
        return [call.body for call in self.requests]

    @property
    def call_count(self) -> int:
        return len(self.requests)

    def calls_for(self, model: str) -> list[dict[str, Any]]:
        return [call.body for call in self.requests if call.model == model]

    @property
    def last_call(self) -> dict[str, Any]:
        if not self.requests:
            raise AssertionError("the fake LLM received no call")
        return self.requests[-1].body

    def tool_messages(self, call: int = -1) -> list[dict[str, Any]]:
        """The ``role: tool`` messages (tool results) sent in a call (default: the last)."""
        if not self.requests:
            raise AssertionError("the fake LLM received no call")
        messages = self.requests[call].body.get("messages", [])
        return [m for m in messages if isinstance(m, dict) and m.get("role") == "tool"]

    async def wait_for_calls(
        self,
        n: int,
        timeout: float = 5.0,
    ) -> list[dict[str, Any]]:
        """Wait until at least ``n`` calls arrived; all calls so far."""
        async with self._changed:
            try:
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: len(self.requests) >= n), timeout
                )
            except TimeoutError:
                raise AssertionError(
                    f"expected {n} LLM calls within {timeout}s, got {len(self.requests)}"
                ) from None
        return self.calls

    # ------------------------------------------------------------------ handlers

    async def _models(self, request: web.Request) -> web.Response:
        if (denied := self._auth_error(request)) is not None:
            return denied
        models = sorted({call.model for call in self.requests if call.model} | {"fake"})
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in models]
        return web.json_response({"object": "list", "data": data})

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        if not isinstance(body, dict):
            return await self._record(request, {}, _error_response(400, "body must be JSON"))
        if (denied := self._auth_error(request)) is not None:
            return await self._record(request, body, denied)
        if self.validate and (problem := _request_problem(body)) is not None:
            return await self._record(request, body, _error_response(400, problem))
        item = await self._next(body)
        model = str(body["model"])
        wait = self.delay + self.latency_by_model.get(model, 0.0)
        if isinstance(item, Hang):
            wait += item.seconds
        elif not isinstance(item, str):
            wait += item.delay
        # recorded when received, so tests can watch calls that are still waiting
        recorded = RecordedCall(request.path, dict(request.headers), body)
        await self._add(recorded)
        if wait > 0:
            with suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), wait)
        response = self._respond(item, body)
        recorded.status = response.status
        return response

    async def _next(self, body: dict[str, Any]) -> Scripted:
        responder = self.by_model.get(str(body.get("model")))
        if responder is None:
            if self._script:
                return self._script.popleft()
            responder = self.responder
        if responder is None:
            return Reply()
        answer = responder(body)
        if inspect.isawaitable(answer):
            answer = await answer
        return answer

    def _respond(self, item: Scripted, body: dict[str, Any]) -> web.Response:
        if self._closing.is_set():
            return _error_response(503, "the fake LLM is shutting down")
        if isinstance(item, str):
            item = Reply(content=item)
        if isinstance(item, Hang):
            return _error_response(504, "the fake LLM hung and gave up")
        if isinstance(item, Failure):
            return _error_response(item.status, item.message, item.type, item.code)
        if isinstance(item, Raw):
            return web.json_response(item.body, status=item.status)
        return web.json_response(_completion(item, body))

    def _auth_error(self, request: web.Request) -> web.Response | None:
        if self.api_key is None:
            return None
        if request.headers.get("Authorization") == f"Bearer {self.api_key}":
            return None
        return _error_response(
            401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key"
        )

    async def _record(
        self, request: web.Request, body: dict[str, Any], response: web.Response
    ) -> web.Response:
        await self._add(RecordedCall(request.path, dict(request.headers), body, response.status))
        return response

    async def _add(self, call: RecordedCall) -> None:
        async with self._changed:
            self.requests.append(call)
            self._changed.notify_all()


async def start_fake_llm(**kwargs: Any) -> FakeLLM:
    """Create and start a :class:`FakeLLM` (the caller stops it: ``await fake.stop()``)."""
    fake = FakeLLM(**kwargs)
    await fake.start()
    return fake


# -- wire format -----------------------------------------------------------------------------


def _error_response(
    status: int, message: str, kind: str = "invalid_request_error", code: str | None = None
) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return web.json_response(body, status=status)


def _completion(reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in reply.tool_calls
        ]
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    prompt = reply.prompt_tokens
    if prompt is None:
        prompt = _tokens(json.dumps(request.get("messages", []), ensure_ascii=False))
        if request.get("tools"):
            prompt += _tokens(json.dumps(request["tools"], ensure_ascii=False))
    completion = reply.completion_tokens
    if completion is None:
        produced = (reply.content or "") + "".join(
            call.name + call.arguments for call in reply.tool_calls
        )
        completion = _tokens(produced)
    return {
        "id": f"chatcmpl-{secrets.token_hex(12)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model or request.get("model", "fake"),
        "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def _request_problem(body: dict[str, Any]) -> str | None:
    """What the real API would reject in this request, or ``None``."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter"
    if body.get("stream"):
        return "the fake LLM does not stream"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            return f"{where}: invalid role"
        role = message["role"]
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                return (
                    f"{where}: messages with role 'tool' must be a response to a preceding "
                    "message with 'tool_calls'"
                )
            open_calls.discard(call_id)
            continue
        if open_calls:
            return (
                f"{where}: an assistant message with 'tool_calls' must be followed by tool "
                f"messages responding to each 'tool_call_id' (missing: {sorted(open_calls)})"
            )
        if role == "assistant" and message.get("tool_calls"):
            for call in message["tool_calls"]:
                function = call.get("function") if isinstance(call, dict) else None
                if (
                    not isinstance(function, dict)
                    or not call.get("id")
                    or call.get("type") != "function"
                    or not isinstance(function.get("name"), str)
                    or not isinstance(function.get("arguments"), str)
                ):
                    return f"{where}: malformed tool_calls entry"
                open_calls.add(call["id"])
        elif not isinstance(message.get("content"), str | list):
            return f"{where}: 'content' is required"
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not tools:
            return "'tools' must be a non-empty array"
        for index, tool in enumerate(tools):
            function = tool.get("function") if isinstance(tool, dict) else None
            if tool.get("type") != "function" or not isinstance(function, dict):
                return f"tools[{index}]: must be {{'type': 'function', 'function': {{...}}}}"
            if not isinstance(function.get("name"), str):
                return f"tools[{index}].function.name is required"
            if "parameters" in function and not isinstance(function["parameters"], dict):
                return f"tools[{index}].function.parameters must be a JSON schema object"
    elif body.get("tool_choice") is not None:
        return "'tool_choice' is only allowed when 'tools' are specified"
    return None
