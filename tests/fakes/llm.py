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
(roles, tool messages answering the assistant's ``tool_calls``, tool schemas, image parts:
user messages only, well-formed base64 data URLs of a supported image), so a client bug
fails here as it would in production, with a 400. ``vision_models`` (default: every model)
names the models that accept images; :meth:`FakeLLM.images` decodes the images a call sent.

Transcription: ``POST /v1/audio/transcriptions`` (and ``/audio/transcriptions``) parses
the multipart form like the real endpoint (``file`` and ``model`` required; with
``validate``, a file extension the API reads, a non-empty file, a known
``response_format``, an ISO-639-1 ``language``), records each request as a
:class:`TranscriptionCall` in ``fake.transcriptions`` and answers with the next item of
:meth:`FakeLLM.script_transcripts` — a transcript (a ``str`` or :func:`transcribed`), an
:func:`error`, a :func:`hang` or a :func:`raw` body — else ``transcriber`` (a callable),
else :data:`DEFAULT_TRANSCRIPT`, shaped by ``response_format`` (``json``: ``{"text",
"usage"}``, ``text``: plain text, ``verbose_json``, ``srt``, ``vtt``)::

    fake.script_transcripts("gastei cinquenta no mercado", error(400), hang())
    ...
    assert fake.transcriptions[0].language == "pt"
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import inspect
import json
import re
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import BodyPartReader, hdrs, web

from tests.fakes._server import LoopbackServer

__all__ = [
    "AUDIO_EXTENSIONS",
    "DEFAULT_REPLY",
    "DEFAULT_TRANSCRIPT",
    "MAX_AUDIO_BYTES",
    "Failure",
    "FakeLLM",
    "FakeToolCall",
    "Hang",
    "Raw",
    "RecordedCall",
    "Reply",
    "Responder",
    "Scripted",
    "SentImage",
    "Transcribed",
    "TranscriptionCall",
    "TranscriptionResponder",
    "TranscriptionScripted",
    "echo_responder",
    "error",
    "hang",
    "no_choices",
    "raw",
    "start_fake_llm",
    "text",
    "tool_call",
    "tool_calls",
    "transcribed",
]

DEFAULT_REPLY = "ok"
DEFAULT_TRANSCRIPT = "gastei cinquenta reais no mercado"
MAX_AUDIO_BYTES = 25 * 1024 * 1024  # the real endpoint's limit
AUDIO_EXTENSIONS = ("flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm")
_RESPONSE_FORMATS = {"json", "text", "srt", "verbose_json", "vtt", "diarized_json"}
_ROLES = {"system", "developer", "user", "assistant", "tool"}
_DATA_URL = re.compile(r"^data:(?P<type>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)$", re.DOTALL)
_IMAGE_MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}


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


@dataclass(frozen=True)
class Transcribed:
    """A successful transcription. ``seconds`` set: the usage is a duration (how
    ``whisper-1`` bills); else tokens (``None`` counts: ~1 audio token per KB, ~4
    characters a text token)."""

    text: str = DEFAULT_TRANSCRIPT
    seconds: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    delay: float = 0.0


TranscriptionScripted = Transcribed | Failure | Hang | Raw | str
"""A scripted transcription answer; a plain ``str`` is the transcript text."""

TranscriptionResponder = Callable[
    ["TranscriptionCall"], TranscriptionScripted | Awaitable[TranscriptionScripted]
]
"""Answers a transcription request when the transcription script is empty."""


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


def transcribed(text: str, **kwargs: Any) -> Transcribed:
    """A transcript (``seconds=``, ``input_tokens=``, ``output_tokens=``, ``delay=``)."""
    return Transcribed(text, **kwargs)


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


@dataclass
class TranscriptionCall:
    """A transcription request as received: the form's text ``fields``, the ``file``
    part (its name, content type and bytes), and the status it was answered with."""

    path: str
    headers: dict[str, str]
    fields: dict[str, str]
    filename: str | None = None
    content_type: str | None = None
    audio: bytes | None = None
    status: int = 0

    @property
    def model(self) -> str | None:
        return self.fields.get("model")

    @property
    def language(self) -> str | None:
        return self.fields.get("language")

    @property
    def response_format(self) -> str:
        return self.fields.get("response_format") or "json"

    @property
    def size(self) -> int:
        """The audio's length in bytes (0 when no file was sent)."""
        return len(self.audio or b"")


@dataclass(frozen=True)
class SentImage:
    """An image part of a chat request: which message it was in, and its decoded bytes
    (``data`` is ``None`` for an http(s) URL, kept in ``url``)."""

    message_index: int
    content_type: str | None
    data: bytes | None
    url: str
    detail: str | None = None


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
        transcriber: TranscriptionResponder | None = None,
        vision_models: Collection[str] | None = None,
    ) -> None:
        self.api_key = api_key  # when set, requests need "Authorization: Bearer <api_key>"
        self.responder = responder
        self.delay = delay  # seconds before every answer
        self.latency_by_model = dict(latency_by_model or {})
        self.validate = validate
        self.transcriber = transcriber
        # None: every model reads images; else image parts to another model are a 400
        self.vision_models = None if vision_models is None else frozenset(vision_models)
        super().__init__()
        self.host = host
        self.requests: list[RecordedCall] = []
        # model name → responder, used before the script: e.g. a router model that always
        # answers its JSON while the script drives the agent's model
        self.by_model: dict[str, Responder] = {}
        self.root_url = ""
        self._script: deque[Scripted] = deque()
        self.transcriptions: list[TranscriptionCall] = []
        self._transcripts: deque[TranscriptionScripted] = deque()
        self._changed = asyncio.Condition()
        self._closing = asyncio.Event()

    def routes(self, app: web.Application) -> None:
        for prefix in ("/v1", ""):
            app.router.add_post(f"{prefix}/chat/completions", self._complete)
            app.router.add_get(f"{prefix}/models", self._models)
            app.router.add_post(f"{prefix}/audio/transcriptions", self._transcribe)

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

    def script_transcripts(
        self, *items: TranscriptionScripted | Iterable[TranscriptionScripted]
    ) -> Self:
        """Queue transcription answers, used in order (lists are flattened)."""
        for item in items:
            if isinstance(item, Transcribed | Failure | Hang | Raw | str):
                self._transcripts.append(item)
            else:
                self._transcripts.extend(item)
        return self

    @property
    def pending_transcripts(self) -> int:
        return len(self._transcripts)

    def reset(self) -> None:
        """Forget the calls and the scripts."""
        self.requests.clear()
        self._script.clear()
        self.transcriptions.clear()
        self._transcripts.clear()

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

    def images(self, call: int = -1) -> list[SentImage]:
        """The image parts sent in a chat call (default: the last), decoded, in order."""
        if not self.requests:
            raise AssertionError("the fake LLM received no call")
        found: list[SentImage] = []
        for index, message in enumerate(self.requests[call].body.get("messages", [])):
            content = message.get("content") if isinstance(message, dict) else None
            for part in content if isinstance(content, list) else ():
                if not isinstance(part, dict) or part.get("type") != "image_url":
                    continue
                image = part.get("image_url") or {}
                url = str(image.get("url", ""))
                match = _DATA_URL.match(url)
                kind = match["type"] if match else None
                data = base64.b64decode(match["data"]) if match else None
                found.append(SentImage(index, kind, data, url, image.get("detail")))
        return found

    @property
    def last_transcription(self) -> TranscriptionCall:
        if not self.transcriptions:
            raise AssertionError("the fake LLM received no transcription request")
        return self.transcriptions[-1]

    async def wait_for_transcriptions(
        self, n: int, timeout: float = 5.0
    ) -> list[TranscriptionCall]:
        """Wait until at least ``n`` transcription requests arrived; all of them so far."""
        async with self._changed:
            try:
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: len(self.transcriptions) >= n), timeout
                )
            except TimeoutError:
                raise AssertionError(
                    f"expected {n} transcription requests within {timeout}s, "
                    f"got {len(self.transcriptions)}"
                ) from None
        return list(self.transcriptions)

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
        if self.validate and (problem := _request_problem(body, self.vision_models)) is not None:
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

    async def _transcribe(self, request: web.Request) -> web.StreamResponse:
        call = TranscriptionCall(request.path, dict(request.headers), {})
        if (denied := self._auth_error(request)) is not None:
            return await self._record_transcription(call, denied)
        if request.content_type != "multipart/form-data":
            problem = _error_response(
                400, "Invalid Content-Type header (expected multipart/form-data)."
            )
            return await self._record_transcription(call, problem)
        try:
            too_large = await _read_form(request, call)
        except ValueError as exc:
            return await self._record_transcription(call, _error_response(400, str(exc)))
        if too_large:
            message = f"Maximum content size limit ({MAX_AUDIO_BYTES}) exceeded."
            return await self._record_transcription(call, _error_response(413, message))
        if (problem := _transcription_problem(call, self.validate)) is not None:
            return await self._record_transcription(call, problem)
        item = await self._next_transcript(call)
        wait = self.delay
        if isinstance(item, Hang):
            wait += item.seconds
        elif not isinstance(item, str):
            wait += item.delay
        await self._add_transcription(call)  # recorded when received, like chat calls
        if wait > 0:
            with suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), wait)
        response = self._transcription_response(item, call)
        call.status = response.status
        return response

    async def _next_transcript(self, call: TranscriptionCall) -> TranscriptionScripted:
        if self._transcripts:
            return self._transcripts.popleft()
        if self.transcriber is None:
            return Transcribed()
        answer = self.transcriber(call)
        if inspect.isawaitable(answer):
            answer = await answer
        return answer

    def _transcription_response(
        self, item: TranscriptionScripted, call: TranscriptionCall
    ) -> web.Response:
        if self._closing.is_set():
            return _error_response(503, "the fake LLM is shutting down")
        if isinstance(item, str):
            item = Transcribed(item)
        if isinstance(item, Hang):
            return _error_response(504, "the fake LLM hung and gave up")
        if isinstance(item, Failure):
            return _error_response(item.status, item.message, item.type, item.code)
        if isinstance(item, Raw):
            if isinstance(item.body, str):
                return web.Response(text=item.body, status=item.status)
            return web.json_response(item.body, status=item.status)
        return _transcription(item, call)

    async def _record_transcription(
        self, call: TranscriptionCall, response: web.Response
    ) -> web.Response:
        call.status = response.status
        await self._add_transcription(call)
        return response

    async def _add_transcription(self, call: TranscriptionCall) -> None:
        async with self._changed:
            self.transcriptions.append(call)
            self._changed.notify_all()

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
    status: int,
    message: str,
    kind: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return web.json_response(body, status=status)


async def _read_form(request: web.Request, call: TranscriptionCall) -> bool:
    """Read the multipart form into ``call``; ``True`` when the file is over the limit."""
    reader = await request.multipart()
    while (part := await reader.next()) is not None:
        if not isinstance(part, BodyPartReader):
            raise ValueError("nested multipart bodies are not supported")
        if part.filename is None and part.name != "file":
            call.fields[str(part.name)] = await part.text()
            continue
        data = bytearray()
        while chunk := await part.read_chunk():
            data.extend(chunk)
            if len(data) > MAX_AUDIO_BYTES:
                return True
        call.filename = part.filename
        call.content_type = part.headers.get(hdrs.CONTENT_TYPE)
        call.audio = bytes(data)
    return False


def _transcription_problem(call: TranscriptionCall, validate: bool) -> web.Response | None:
    """The 400 the real endpoint would answer this form with, or ``None``."""
    if call.audio is None:
        return _error_response(
            400,
            "Missing required parameter: 'file'.",
            code="missing_required_parameter",
            param="file",
        )
    if not call.model:
        return _error_response(400, "you must provide a model parameter", param="model")
    if not validate:
        return None
    name = call.filename or ""
    extension = name.rpartition(".")[2].lower() if "." in name else ""
    if extension not in AUDIO_EXTENSIONS:
        return _error_response(
            400,
            f"Invalid file format. Supported formats: {list(AUDIO_EXTENSIONS)}",
            code="invalid_value",
            param="file",
        )
    if not call.audio:
        return _error_response(
            400,
            "Audio file is too short. Minimum audio length is 0.1 seconds.",
            code="audio_too_short",
            param="file",
        )
    if call.response_format not in _RESPONSE_FORMATS:
        return _error_response(
            400,
            f"Invalid value: '{call.response_format}'. Supported values are: "
            f"{sorted(_RESPONSE_FORMATS)}.",
            code="invalid_value",
            param="response_format",
        )
    if call.language is not None and not re.fullmatch(r"[a-z]{2}", call.language):
        return _error_response(
            400,
            f"Invalid language '{call.language}'. Language parameter must be specified in "
            "ISO-639-1 format.",
            code="invalid_value",
            param="language",
        )
    return None


def _transcription(item: Transcribed, call: TranscriptionCall) -> web.Response:
    """A 200 transcription in the requested ``response_format``."""
    usage: dict[str, Any]
    if item.seconds is not None:
        usage = {"type": "duration", "seconds": item.seconds}
    else:
        audio_tokens = item.input_tokens
        if audio_tokens is None:
            audio_tokens = max(1, call.size // 1000)
        output = item.output_tokens if item.output_tokens is not None else _tokens(item.text)
        usage = {
            "type": "tokens",
            "input_tokens": audio_tokens,
            "input_token_details": {"text_tokens": 0, "audio_tokens": audio_tokens},
            "output_tokens": output,
            "total_tokens": audio_tokens + output,
        }
    fmt = call.response_format
    if fmt == "text":
        return web.Response(text=item.text + "\n", content_type="text/plain")
    if fmt in ("srt", "vtt"):
        cue = "00:00:00,000 --> 00:00:01,000" if fmt == "srt" else "00:00:00.000 --> 00:00:01.000"
        head = "1\n" if fmt == "srt" else "WEBVTT\n\n"
        return web.Response(text=f"{head}{cue}\n{item.text}\n", content_type="text/plain")
    body: dict[str, Any] = {"text": item.text, "usage": usage}
    if fmt == "verbose_json":
        duration = item.seconds if item.seconds is not None else 1.0
        body = {
            "task": "transcribe",
            "language": call.language or "portuguese",
            "duration": duration,
            "text": item.text,
            "segments": [],
            "usage": {"type": "duration", "seconds": duration},
        }
    return web.json_response(body)


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


def _request_problem(
    body: dict[str, Any], vision_models: Collection[str] | None = None
) -> str | None:
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
        if isinstance(message.get("content"), list):
            reads_images = vision_models is None or body["model"] in vision_models
            problem = _content_problem(where, role, message["content"], reads_images)
            if problem is not None:
                return problem
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


def _content_problem(where: str, role: str, parts: list[Any], reads_images: bool) -> str | None:
    """What the real API rejects in a list ``content``: images outside user messages,
    unknown part types, image URLs that are not http(s) or a base64 data URL of an image."""
    if not parts:
        return f"{where}.content: must be a non-empty array"
    for index, part in enumerate(parts):
        here = f"{where}.content[{index}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            if not isinstance(part.get("text"), str):
                return f"{here}.text: expected a string"
            continue
        if kind != "image_url":
            return f"{here}.type: unsupported content part type {kind!r}"
        if role != "user":
            return f"{here}: image_url content parts are only allowed in user messages"
        if not reads_images:
            return "Invalid content type. image_url is only supported by certain models."
        image = part.get("image_url")
        if not isinstance(image, dict) or not isinstance(image.get("url"), str):
            return f"{here}.image_url.url: expected a string"
        if image.get("detail") not in (None, "auto", "low", "high"):
            return f"{here}.image_url.detail: must be one of 'auto', 'low', 'high'"
        if (problem := _image_url_problem(image["url"])) is not None:
            return f"Invalid image URL: '{here}.image_url.url'. {problem}"
    return None


def _image_url_problem(url: str) -> str | None:
    if url.startswith(("http://", "https://")):
        return None
    match = _DATA_URL.match(url)
    if match is None:
        return "Expected a base64-encoded data URL with an image MIME type or an http(s) URL."
    kind = match["type"].lower()
    if kind not in _IMAGE_MAGIC:
        return (
            f"Unsupported MIME type {kind!r}: use image/jpeg, image/png, image/gif or image/webp."
        )
    try:
        data = base64.b64decode(match["data"], validate=True)
    except binascii.Error:
        return "The data URL is not valid base64."
    if not any(data.startswith(magic) for magics in _IMAGE_MAGIC.values() for magic in magics):
        return "You uploaded an unsupported image. Please make sure your image is valid."
    return None
