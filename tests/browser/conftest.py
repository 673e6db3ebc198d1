"""The console in a real browser: the e2e gateway (real app, real Redis, fake providers)
and Debian's Chromium driven by Playwright, one fresh browser (and profile) per test.

Screenshots go to ``tmp_path`` unless ``MEL_CONSOLE_SCREENSHOTS`` names a folder (the
docs' images: ``MEL_CONSOLE_SCREENSHOTS=docs/console make test ARGS=tests/browser``)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.browser.chromium import ARGS, CHROMIUM
from tests.e2e import conftest as e2e
from tests.e2e import console
from tests.e2e.conftest import Gateway
from tests.e2e.console import PASSWORD

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page

# the e2e fixtures, shared: the gateway, and the fake providers it talks to
fake_graph = e2e.fake_graph
fake_llm = e2e.fake_llm
fake_twilio = e2e.fake_twilio
start_gateway = e2e.start_gateway
start = console.start  # agents exist before the gateway starts

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        # launch() runs Chromium on a fresh temporary profile (user-data dir) of its own
        chromium = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield chromium
        finally:
            await chromium.close()


class Console:
    """One agent's browser context on the console, recording every dialog it sees."""

    def __init__(self, context: BrowserContext, page: Page, gw: Gateway) -> None:
        self.context = context
        self.page = page
        self.gw = gw
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    async def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        await dialog.dismiss()

    async def login(self, name: str, password: str = PASSWORD) -> None:
        page = self.page
        await page.get_by_test_id("login-name").fill(name)
        await page.get_by_test_id("login-password").fill(password)
        await page.get_by_test_id("login-submit").click()

    def item(self, thread_id: str) -> Any:
        return self.page.locator(f'[data-testid="handoff-item"][data-thread-id="{thread_id}"]')


@pytest.fixture
async def console(browser: Browser, tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """``await console(gw, viewport=DESKTOP)``: a fresh context on ``/console/``."""
    opened: list[BrowserContext] = []

    async def open_console(gw: Gateway, viewport: dict[str, int] = DESKTOP) -> Console:
        context = await browser.new_context(viewport=viewport, locale="pt-BR")  # type: ignore[arg-type]
        opened.append(context)
        page = await context.new_page()
        page.set_default_timeout(10_000)
        view = Console(context, page, gw)
        await page.goto(gw.url("/console/"))
        return view

    yield open_console
    for context in opened:
        await context.close()


@pytest.fixture
def shot(tmp_path: Path) -> Callable[..., Any]:
    """``await shot(page, "queue")``: a screenshot, for the docs when asked."""
    folder = Path(os.environ.get("MEL_CONSOLE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)

    async def take(page: Page, name: str, *, toast: bool = False) -> Path:
        path = folder / f"{name}.png"
        if not toast:  # a passing notice would hide part of the screen
            await page.evaluate("document.getElementById('toast').hidden = true")
        await page.screenshot(path=str(path))
        return path

    return take
