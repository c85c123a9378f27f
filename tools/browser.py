"""The browserUse subagent's browser: a headless Chromium the daemon starts (--browser-enabled;
--chrome-executable-path, else `chromium` or `google-chrome` on PATH), driven through the
DevTools protocol over a pipe (`--remote-debugging-pipe`: no port another process could reach).

One browser per daemon, started on first use like an agent's command (the sandbox's decision for
a call that asked for nothing, confined whenever --sandbox-enabled), with a throw-away profile;
each subagent gets a page of its own (1280x800). The subagent's tools (BROWSER_TOOLS) navigate
(http and https only: no file://, data: or javascript: URL reads around the file tools' rules),
click and type into an element found by CSS selector or by accessible name (real input events
at its center), read the page's text and accessibility tree, and take a screenshot (PNG, sent
to the model as an image). The browser ends with the daemon, its profile removed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import tempfile
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from exec_daemon.kernel.config import off_without
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.processes import Child, SpawnSpec, close_fds, spawn
from exec_daemon.kernel.sandboxing import AS_REQUESTED, SandboxDemand, Sandboxing
from exec_daemon.kernel.state import Daemon

VIEWPORT = (1280, 800)
START_SECONDS = 30.0
CALL_SECONDS = 30.0
LOAD_SECONDS = 20.0
MAX_PAGES = 8
MAX_TEXT_CHARS = 20_000
# Accessibility roles that say nothing the page's text does not.
_QUIET_ROLES = {"none", "generic", "InlineTextBox", "StaticText", "LineBreak", "RootWebArea"}
_PROFILE_PREFIX = "exec-daemon-browser-"
_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class BrowserFailed(CodedError):
    pass


class _Pipe:
    """The DevTools protocol over Chromium's pipe: NUL-terminated JSON messages."""

    def __init__(
        self, reader: asyncio.StreamReader, transport: asyncio.BaseTransport, write_fd: int
    ) -> None:
        self._reader = reader
        self._transport = transport
        self._write_fd = write_fd
        self._next_id = 0
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        # Messages of concurrent calls must not interleave on the pipe.
        self._writing = asyncio.Lock()
        self._reading = asyncio.create_task(self._read())
        self.gone = False

    async def _read(self) -> None:
        try:
            while True:
                raw = await self._reader.readuntil(b"\0")
                message = json.loads(raw[:-1])
                waiter = self._waiting.pop(message.get("id", -1), None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(message)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, OSError):
            pass
        finally:
            self.gone = True
            for waiter in self._waiting.values():
                if not waiter.done():
                    waiter.set_exception(BrowserFailed(ErrorCode.UNAVAILABLE, "the browser exited"))
            self._waiting.clear()

    async def call(
        self, method: str, params: dict[str, Any] | None = None, session: str = ""
    ) -> dict[str, Any]:
        if self.gone:
            raise BrowserFailed(ErrorCode.UNAVAILABLE, "the browser exited")
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[self._next_id] = waiter
        data = json.dumps(message).encode() + b"\0"
        async with self._writing:
            await asyncio.to_thread(_write_all, self._write_fd, data)
        try:
            async with asyncio.timeout(CALL_SECONDS):
                answer = await waiter
        except TimeoutError:
            self._waiting.pop(message["id"], None)
            raise BrowserFailed(
                ErrorCode.TIMEOUT, f"the browser did not answer {method} in {CALL_SECONDS:g} s"
            ) from None
        if "error" in answer:
            why = answer["error"].get("message", "failed")
            raise BrowserFailed(ErrorCode.FAILED_PRECONDITION, f"{method}: {why}")
        result: dict[str, Any] = answer.get("result") or {}
        return result

    def close(self) -> None:
        self._reading.cancel()
        self._transport.close()
        close_fds(self._write_fd)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


@dataclass
class _Running:
    child: Child
    pipe: _Pipe
    profile: str


def browser_executable(configured: str | None) -> str:
    """--chrome-executable-path, else the first Chromium or Chrome on PATH."""
    if configured:
        found = shutil.which(configured)
        if found is None:
            raise BrowserFailed(
                ErrorCode.UNAVAILABLE,
                f"--chrome-executable-path {configured} is not an executable file",
            )
        return found
    for name in _BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    raise BrowserFailed(
        ErrorCode.UNAVAILABLE,
        "no Chromium or Chrome on PATH: install chromium or give --chrome-executable-path",
    )


class Browser:
    """The daemon's browser (started on first use) and a page per subagent."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon
        self._running: _Running | None = None
        self._starting = asyncio.Lock()
        # Each subagent's page: (its session, its target).
        self._pages: OrderedDict[str, tuple[str, str]] = OrderedDict()

    async def _browser(self) -> _Running:
        async with self._starting:
            if self._running is not None and not self._running.pipe.gone:
                return self._running
            if self._running is not None:
                await self._stop(self._running)
                self._pages.clear()
            self._running = await self._start()
            return self._running

    async def _start(self) -> _Running:
        config = self._daemon.config
        if not config.browser_enabled:
            raise BrowserFailed(
                ErrorCode.UNAVAILABLE, off_without("the browserUse subagent", "--browser-enabled")
            )
        executable = browser_executable(config.chrome_executable_path)
        demand = SandboxDemand(confined=True) if config.sandbox_enabled else AS_REQUESTED
        decision = await self._daemon.service(Sandboxing).decide(None, demand)
        if decision.refusal:
            raise BrowserFailed(ErrorCode.FAILED_PRECONDITION, decision.refusal)
        profile = tempfile.mkdtemp(prefix=_PROFILE_PREFIX)
        to_browser, commands = os.pipe2(os.O_CLOEXEC)
        answers, from_browser = os.pipe2(os.O_CLOEXEC)
        # The pipe is the browser's fds 3 (what it reads) and 4 (what it writes).
        remap = f'exec "$@" 3<&{to_browser} 4>&{from_browser} {to_browser}<&- {from_browser}>&-'
        argv = ["bash", "-c", remap, "browser", executable, *_flags(profile)]
        spec = SpawnSpec(
            argv=tuple(argv),
            cwd=profile,
            env={**self._daemon.env.snapshot(), "HOME": profile},
            pass_fds=(to_browser, from_browser),
            writable=(profile,),
        )
        try:
            child = await spawn(spec, decision.confinement)
        # OSError, or the sandbox's refusal to confine it (its reason is the message).
        except Exception as exc:
            close_fds(commands, answers)
            await asyncio.to_thread(shutil.rmtree, profile, True)
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise BrowserFailed(
                ErrorCode.UNAVAILABLE, f"the browser cannot be started ({why})"
            ) from None
        finally:
            close_fds(to_browser, from_browser)
        reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
        loop = asyncio.get_running_loop()
        transport, _protocol = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(answers, "rb", buffering=0)
        )
        running = _Running(child, _Pipe(reader, transport, commands), profile)
        try:
            async with asyncio.timeout(START_SECONDS):
                await running.pipe.call("Browser.getVersion")
        except (TimeoutError, BrowserFailed):
            await self._stop(running)
            raise BrowserFailed(
                ErrorCode.UNAVAILABLE, f"the browser {executable} did not start"
            ) from None
        return running

    async def page(self, agent_id: str) -> tuple[_Pipe, str]:
        """The browser's pipe and the session of `agent_id`'s page (made on first use)."""
        running = await self._browser()
        kept = self._pages.get(agent_id)
        if kept is not None:
            self._pages.move_to_end(agent_id)
            return running.pipe, kept[0]
        target = await running.pipe.call("Target.createTarget", {"url": "about:blank"})
        attached = await running.pipe.call(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
        )
        session = str(attached["sessionId"])
        width, height = VIEWPORT
        await running.pipe.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session,
        )
        self._pages[agent_id] = (session, str(target["targetId"]))
        while len(self._pages) > MAX_PAGES:
            _old, (_session, forgotten) = self._pages.popitem(last=False)
            with contextlib.suppress(BrowserFailed):
                await running.pipe.call("Target.closeTarget", {"targetId": forgotten})
        return running.pipe, session

    async def _stop(self, running: _Running) -> None:
        running.pipe.close()
        await running.child.terminate(grace=2.0)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(running.child.wait(), 5.0)
        await asyncio.to_thread(shutil.rmtree, running.profile, True)

    async def aclose(self) -> None:
        if self._running is not None:
            await self._stop(self._running)
            self._running = None


def _flags(profile: str) -> list[str]:
    width, height = VIEWPORT
    flags = [
        "--headless=new",
        "--remote-debugging-pipe",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
    ]
    # Chromium refuses to run as root with its own sandbox on.
    if os.geteuid() == 0:
        flags.append("--no-sandbox")
    return [*flags, "about:blank"]


# --- the subagent's tools ------------------------------------------------------------------------


def _function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties},
        },
    }


_TARGET = {
    "selector": {"type": "string", "description": "A CSS selector."},
    "name": {"type": "string", "description": "Its accessible name (label, text, aria-label)."},
}
BROWSER_TOOLS = [
    _function(
        "browser_navigate",
        "Open a URL (http or https) in your browser page and wait for it to load.",
        {"url": {"type": "string"}},
    ),
    _function("browser_click", "Click the element found by `selector` or by `name`.", _TARGET),
    _function(
        "browser_type",
        "Click the element found by `selector` or `name`, type `text` into it, and press Enter "
        "when `submit` is true.",
        {**_TARGET, "text": {"type": "string"}, "submit": {"type": "boolean"}},
    ),
    _function("browser_read", "The page's title, URL, text and accessibility tree.", {}),
    _function("browser_screenshot", "A screenshot of the page (1280x800).", {}),
]
BROWSER_TOOL_NAMES = frozenset(tool["function"]["name"] for tool in BROWSER_TOOLS)


@dataclass(frozen=True)
class BrowserAnswer:
    text: str
    png: bytes = b""


async def run_browser_tool(
    daemon: Daemon, agent_id: str, name: str, arguments: dict[str, Any]
) -> BrowserAnswer:
    """Runs one of BROWSER_TOOLS on `agent_id`'s page. Raises CodedError."""
    pipe, session = await daemon.service(Browser).page(agent_id)
    page = _Page(pipe, session)
    if name == "browser_navigate":
        return await page.navigate(str(arguments.get("url") or ""))
    if name == "browser_click":
        found = await page.find(arguments)
        await page.click(found)
        await page.settle()
        return BrowserAnswer(f"clicked the {found['tag']} at ({found['x']:.0f}, {found['y']:.0f})")
    if name == "browser_type":
        found = await page.find(arguments)
        await page.click(found)
        text = str(arguments.get("text") or "")
        await pipe.call("Input.insertText", {"text": text}, session)
        if arguments.get("submit"):
            await page.enter()
            await page.settle()
        return BrowserAnswer(f"typed {len(text)} characters into the {found['tag']}")
    if name == "browser_read":
        return BrowserAnswer(await page.read())
    if name == "browser_screenshot":
        shot = await pipe.call("Page.captureScreenshot", {"format": "png"}, session)
        return BrowserAnswer("a screenshot of the page", base64.b64decode(shot["data"]))
    raise CodedError(ErrorCode.INVALID_ARGUMENT, f"no browser tool {name!r}")


_FIND = """(() => {
  const selector = %s, name = %s;
  const norm = (s) => (s || '').replace(/\\s+/g, ' ').trim().toLowerCase();
  let element = null;
  if (selector) {
    element = document.querySelector(selector);
  } else {
    const want = norm(name);
    const label = (e) => norm(e.getAttribute('aria-label')
      || (e.labels && e.labels.length ? e.labels[0].innerText : '')
      || e.getAttribute('placeholder') || e.getAttribute('title') || e.getAttribute('alt')
      || e.innerText || e.value);
    const all = [...document.querySelectorAll(
      'a,button,input,textarea,select,summary,label,[role],[onclick],[tabindex]')];
    element = all.find((e) => label(e) === want) || all.find((e) => label(e).includes(want));
  }
  if (!element) return null;
  element.scrollIntoView({block: 'center', inline: 'center'});
  const box = element.getBoundingClientRect();
  return {x: box.left + box.width / 2, y: box.top + box.height / 2,
          tag: element.tagName.toLowerCase()};
})()"""

_READ = """({title: document.title, url: location.href,
  text: document.body ? document.body.innerText : ''})"""


class _Page:
    def __init__(self, pipe: _Pipe, session: str) -> None:
        self._pipe = pipe
        self._session = session

    async def evaluate(self, expression: str) -> Any:
        answer = await self._pipe.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            self._session,
        )
        if "exceptionDetails" in answer:
            details = answer["exceptionDetails"]
            why = (details.get("exception") or {}).get("description") or details.get("text")
            raise CodedError(ErrorCode.FAILED_PRECONDITION, f"the page's script failed: {why}")
        return (answer.get("result") or {}).get("value")

    async def navigate(self, url: str) -> BrowserAnswer:
        scheme = urlsplit(url).scheme.lower()
        if scheme not in ("http", "https"):
            raise CodedError(
                ErrorCode.INVALID_ARGUMENT,
                f"the browser opens http and https URLs only, not {url[:200]!r}",
            )
        answer = await self._pipe.call("Page.navigate", {"url": url}, self._session)
        if answer.get("errorText"):
            raise CodedError(ErrorCode.REQUEST_FAILED, f"cannot open {url}: {answer['errorText']}")
        await self.settle()
        title = await self.evaluate("document.title")
        return BrowserAnswer(f"opened {url} (title: {title!r})")

    async def settle(self) -> None:
        """Waits (bounded) until the page has loaded, after a navigation a click may start."""
        await asyncio.sleep(0.1)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LOAD_SECONDS
        while loop.time() < deadline and not self._pipe.gone:
            with contextlib.suppress(CodedError):
                if await self.evaluate("document.readyState") == "complete":
                    return
            await asyncio.sleep(0.1)

    async def find(self, arguments: dict[str, Any]) -> dict[str, Any]:
        selector = str(arguments.get("selector") or "")
        name = str(arguments.get("name") or "")
        if not (selector or name):
            raise CodedError(ErrorCode.INVALID_ARGUMENT, "give the element's selector or name")
        found = await self.evaluate(_FIND % (json.dumps(selector), json.dumps(name)))
        if not isinstance(found, dict):
            what = f"selector {selector!r}" if selector else f"name {name!r}"
            raise CodedError(ErrorCode.NOT_FOUND, f"no element on the page with {what}")
        return found

    async def click(self, found: dict[str, Any]) -> None:
        at = {"x": found["x"], "y": found["y"]}
        await self._pipe.call(
            "Input.dispatchMouseEvent", {"type": "mouseMoved", **at}, self._session
        )
        for kind in ("mousePressed", "mouseReleased"):
            await self._pipe.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "button": "left", "clickCount": 1, **at},
                self._session,
            )

    async def enter(self) -> None:
        key = {"key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13}
        await self._pipe.call(
            "Input.dispatchKeyEvent", {"type": "keyDown", "text": "\r", **key}, self._session
        )
        await self._pipe.call("Input.dispatchKeyEvent", {"type": "keyUp", **key}, self._session)

    async def read(self) -> str:
        page = await self.evaluate(_READ) or {}
        tree = await self._pipe.call("Accessibility.getFullAXTree", {}, self._session)
        lines = []
        for node in tree.get("nodes") or ():
            role = ((node.get("role") or {}).get("value")) or ""
            name = ((node.get("name") or {}).get("value")) or ""
            if node.get("ignored") or role in _QUIET_ROLES or not (role and name):
                continue
            lines.append(f"{role} {json.dumps(str(name), ensure_ascii=False)}")
        text = (
            f"title: {page.get('title', '')}\nurl: {page.get('url', '')}\n\n"
            f"text:\n{page.get('text', '')}\n\naccessibility tree:\n" + "\n".join(lines)
        )
        if len(text) > MAX_TEXT_CHARS:
            text = text[:MAX_TEXT_CHARS] + f"\n[cut: {len(text)} characters in all]"
        return text
