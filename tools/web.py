"""Web tools: fetch_tool_call (an HTTP request from the VM), web_fetch_tool_call (a page as
markdown) and web_search_tool_call (through a SearXNG-compatible API, --web-search-endpoint).

HTTP goes through one pooled `httpx.AsyncClient` per daemon (`daemon.service(HttpClient)`).
HTML becomes markdown with `markdownify` over BeautifulSoup: MIT-licensed (html2text is GPL),
and the parsed tree lets us drop scripts, styles and page chrome and read the title first.
httpx, BeautifulSoup and markdownify are imported on first use, not at daemon start.
"""

from __future__ import annotations

import asyncio
import codecs
import errno
import logging
import re
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent.v1.web_pb2 import (
    FetchArgs,
    FetchResult,
    FetchSuccess,
    WebFetchArgs,
    WebFetchResult,
    WebFetchSuccess,
    WebSearchArgs,
    WebSearchReference,
    WebSearchResult,
    WebSearchSuccess,
)
from exec_daemon.kernel.addresses import parse_networks
from exec_daemon.kernel.config import off_without
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.spec import Effect, Hooks, RunModeRule, Subject, ToolSpec, no_subject
from exec_daemon.kernel.state import Daemon

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS = 30_000
MAX_TIMEOUT_MS = 600_000
DEFAULT_MAX_BYTES = 5 * 1024 * 1024
# Stays well under the daemon's message limit, whatever a call asks for.
MAX_BYTES_CAP = 32 * 1024 * 1024
MAX_REDIRECTS = 20
WEB_FETCH_MAX_BYTES = 5 * 1024 * 1024
MARKDOWN_MAX_CHARS = 200_000
SEARCH_TIMEOUT_SECONDS = 30.0
SEARCH_MAX_RESULTS = 10
_METHOD = re.compile(r"^[A-Za-z]{1,20}$")
_TEXT_TYPES = re.compile(
    r"^(text/|application/(json|xml|javascript|ecmascript|x-www-form-urlencoded|x-sh|toml|yaml|x-yaml)"
    r"|application/[\w.+-]+\+(json|xml))"
)
# Page chrome and code that is never part of a page's readable text.
_NOT_CONTENT = (
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "canvas",
    "iframe",
    "nav",
    "footer",
    "form",
    "button",
    "head",
)


class HttpClient:
    """The daemon's pooled HTTP client (closed at shutdown)."""

    def __init__(self, daemon: Daemon) -> None:
        import httpx

        from tools.public_network import AddressRules, PublicOnlyTransport

        config = daemon.config
        rules = AddressRules(
            allowed_private=parse_networks(config.fetch_allow_private),
            own_ports=frozenset({config.port, config.pty_websocket_port, config.ide_port}),
        )
        self.client = httpx.AsyncClient(
            transport=PublicOnlyTransport(rules),
            follow_redirects=True,
            max_redirects=MAX_REDIRECTS,
            headers={"user-agent": "exec-daemon (Cursor agent VM)"},
        )

    async def aclose(self) -> None:
        await self.client.aclose()


@dataclass
class Fetched:
    final_url: str
    status_code: int
    headers: dict[str, str]
    content_type: str
    body: bytes
    truncated: bool
    charset: str | None
    elapsed_ms: int


def _validate_url(url: str) -> None:
    import httpx

    if not url:
        raise CodedError(ErrorCode.INVALID_URL, "url is required")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise CodedError(ErrorCode.INVALID_URL, f"invalid URL {url!r}: {exc}") from None
    if parsed.scheme not in ("http", "https"):
        raise CodedError(
            ErrorCode.INVALID_URL, f"invalid URL {url!r}: only http and https are fetched"
        )
    if not parsed.host:
        raise CodedError(ErrorCode.INVALID_URL, f"invalid URL {url!r}: no host")


def _header_map(headers: httpx.Headers) -> dict[str, str]:
    merged: dict[str, str] = {}
    for name, value in headers.multi_items():
        merged[name] = f"{merged[name]}, {value}" if name in merged else value
    return merged


async def fetch_url(
    daemon: Daemon,
    url: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Fetched:
    """One request (redirects followed), body cut at `max_bytes`; CodedError when it fails."""
    import httpx

    from tools.public_network import AddressRefused, HostUnresolvable

    _validate_url(url)
    if not _METHOD.match(method):
        raise CodedError(ErrorCode.INVALID_ARGUMENT, f"invalid HTTP method {method!r}")
    seconds = min(timeout_ms or DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS) / 1000
    client = daemon.service(HttpClient).client
    started = time.monotonic()
    request = client.build_request(
        method.upper(), url, headers=headers, content=body or None, timeout=seconds
    )
    try:
        async with asyncio.timeout(seconds):
            response = await client.send(request, stream=True)
            try:
                data, truncated = await _read_capped(response, max_bytes)
            finally:
                await response.aclose()
    except AddressRefused as exc:
        raise CodedError(ErrorCode.PRIVATE_ADDRESS, f"not fetching {url}: {exc}") from None
    except HostUnresolvable as exc:
        raise CodedError(ErrorCode.DNS_FAILURE, f"{url}: {exc}") from None
    except TimeoutError:
        raise CodedError(ErrorCode.TIMEOUT, f"{url} did not answer within {seconds:g} s") from None
    except httpx.TimeoutException:
        raise CodedError(ErrorCode.TIMEOUT, f"{url} did not answer within {seconds:g} s") from None
    except httpx.TooManyRedirects:
        raise CodedError(
            ErrorCode.TOO_MANY_REDIRECTS, f"{url} redirected more than {MAX_REDIRECTS} times"
        ) from None
    except httpx.UnsupportedProtocol as exc:
        raise CodedError(ErrorCode.INVALID_URL, f"cannot fetch {url}: {exc}") from None
    except httpx.ConnectError as exc:
        raise _connect_failure(url, exc) from None
    except httpx.HTTPError as exc:
        log.info("fetching %s failed: %r", url, exc)
        raise CodedError(
            ErrorCode.REQUEST_FAILED, f"fetching {url} failed: {type(exc).__name__}"
        ) from None
    content_type = response.headers.get("content-type", "")
    return Fetched(
        final_url=str(response.url),
        status_code=response.status_code,
        headers=_header_map(response.headers),
        content_type=content_type,
        body=data,
        truncated=truncated,
        charset=response.charset_encoding,
        elapsed_ms=int((time.monotonic() - started) * 1000),
    )


async def _read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        if size + len(chunk) > max_bytes:
            chunks.append(chunk[: max_bytes - size])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


def _connect_failure(url: str, exc: Exception) -> CodedError:
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, socket.gaierror):
            return CodedError(
                ErrorCode.DNS_FAILURE, f"cannot resolve the host of {url}: {cause.strerror}"
            )
        if isinstance(cause, ConnectionRefusedError) or (
            isinstance(cause, OSError) and cause.errno == errno.ECONNREFUSED
        ):
            return CodedError(ErrorCode.CONNECTION_REFUSED, f"{url}: connection refused")
        cause = cause.__cause__ or cause.__context__
    text = str(exc)
    if "Name or service not known" in text or "nodename nor servname" in text:
        return CodedError(ErrorCode.DNS_FAILURE, f"cannot resolve the host of {url}")
    if "refused" in text.lower():
        return CodedError(ErrorCode.CONNECTION_REFUSED, f"{url}: connection refused")
    return CodedError(
        ErrorCode.CONNECT_FAILED, f"cannot connect to {url}: {text or type(exc).__name__}"
    )


def is_text(content_type: str, body: bytes) -> bool:
    media = content_type.split(";")[0].strip().lower()
    if media:
        return bool(_TEXT_TYPES.match(media))
    if b"\x00" in body[:8192]:
        return False
    try:
        body[:8192].decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the sniff boundary is still text.
        return exc.start >= len(body[:8192]) - 3
    return True


def decode_text(body: bytes, charset: str | None) -> str:
    encoding = "utf-8"
    if charset:
        try:
            encoding = codecs.lookup(charset).name
        except LookupError:
            log.info("unknown charset %r; decoding as UTF-8", charset)
    return body.decode(encoding, errors="replace")


async def fetch(args: FetchArgs, ctx: CallContext) -> FetchResult:
    max_bytes = min(args.max_bytes or DEFAULT_MAX_BYTES, MAX_BYTES_CAP)
    try:
        fetched = await fetch_url(
            ctx.daemon,
            args.url,
            method=args.method or "GET",
            headers=dict(args.headers),
            body=args.body,
            timeout_ms=args.timeout_ms,
            max_bytes=max_bytes,
        )
    except CodedError as failure:
        return FetchResult(error={"code": failure.code, "message": failure.message})
    success = FetchSuccess(
        url=args.url,
        final_url=fetched.final_url,
        status_code=fetched.status_code,
        headers=fetched.headers,
        content_type=fetched.content_type,
        truncated=fetched.truncated,
        elapsed_ms=fetched.elapsed_ms,
    )
    if is_text(fetched.content_type, fetched.body):
        success.text = decode_text(fetched.body, fetched.charset)
    else:
        success.body = fetched.body
    return FetchResult(success=success)


# --- web_fetch: a page as markdown ---------------------------------------------------------------


# Methods that ask for something without changing it (RFC 9110's safe methods, less TRACE).
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _fetch_subject(args: FetchArgs) -> Subject:
    safe = (args.method or "GET").upper() in SAFE_METHODS
    return Subject(url=args.url, effects=Effect.NONE if safe else None)


FETCH = ToolSpec(
    "fetch_tool_call",
    fetch,
    # A request other than GET/HEAD/OPTIONS may change things on the server.
    effects=Effect.MACHINE,
    run_mode=RunModeRule.FETCH_ALLOWLIST,
    hooks=Hooks("Fetch", claude_name="WebFetch"),
    subject=_fetch_subject,
)


def html_to_markdown(html: str) -> tuple[str, str]:
    """(title, markdown) of an HTML page, without scripts, styles and navigation."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    title = _title(soup)
    for tag in soup.find_all(_NOT_CONTENT):
        tag.decompose()
    root = soup.find("main") or soup.find("article") or soup.body or soup
    markdown = MarkdownConverter(heading_style="ATX", bullets="-", strip=["img"]).convert_soup(root)
    return title, _tidy(markdown)


def _title(soup: Any) -> str:
    for candidate in (
        soup.find("meta", property="og:title"),
        soup.title,
        soup.find("h1"),
    ):
        if candidate is None:
            continue
        text = candidate.get("content") if candidate.name == "meta" else candidate.get_text()
        if text and text.strip():
            return " ".join(str(text).split())
    return ""


def _tidy(markdown: str) -> str:
    lines = [line.rstrip() for line in markdown.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"


def _page_to_markdown(fetched: Fetched) -> tuple[str, str]:
    media = fetched.content_type.split(";")[0].strip().lower()
    text = decode_text(fetched.body, fetched.charset)
    if media in ("text/html", "application/xhtml+xml") or (
        not media and re.search(r"<html|<body|<!doctype html", text[:2048], re.I)
    ):
        return html_to_markdown(text)
    if "json" in media:
        return "", f"```json\n{text}\n```\n"
    return "", text


async def web_fetch(args: WebFetchArgs, ctx: CallContext) -> WebFetchResult:
    try:
        fetched = await fetch_url(
            ctx.daemon,
            args.url,
            headers={"accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5"},
            timeout_ms=args.timeout_ms,
            max_bytes=WEB_FETCH_MAX_BYTES,
        )
    except CodedError as failure:
        return WebFetchResult(error={"code": failure.code, "message": failure.message})
    if not is_text(fetched.content_type, fetched.body):
        return WebFetchResult(
            error={
                "code": "unsupported_content",
                "message": f"{fetched.final_url} is {fetched.content_type or 'binary data'}, "
                "not a page; use fetch for raw bytes",
            }
        )
    title, markdown = await asyncio.to_thread(_page_to_markdown, fetched)
    truncated = fetched.truncated or len(markdown) > MARKDOWN_MAX_CHARS
    return WebFetchResult(
        success=WebFetchSuccess(
            url=args.url,
            final_url=fetched.final_url,
            title=title,
            markdown=markdown[:MARKDOWN_MAX_CHARS],
            content_type=fetched.content_type,
            truncated=truncated,
            status_code=fetched.status_code,
        )
    )


WEB_FETCH = ToolSpec(
    "web_fetch_tool_call",
    web_fetch,
    effects=Effect.NONE,  # GET only
    run_mode=RunModeRule.FETCH_ALLOWLIST,
    hooks=Hooks("WebFetch"),
    subject=lambda args: Subject(url=args.url),
)


class SearchEndpoint:
    """The search API of --web-search-endpoint (SearXNG's JSON API: GET /search?q=...&format=json).

    Its own client, not the agent's public-only one: the operator chose the endpoint, and a
    SearXNG instance usually runs on a private address beside the VM."""

    def __init__(self, daemon: Daemon) -> None:
        import httpx

        endpoint = (daemon.config.web_search_endpoint or "").rstrip("/")
        self.url = endpoint if endpoint.endswith("/search") else f"{endpoint}/search"
        self.client = httpx.AsyncClient(
            timeout=SEARCH_TIMEOUT_SECONDS, headers={"accept": "application/json"}
        )

    async def search(self, term: str) -> list[WebSearchReference]:
        import httpx

        try:
            response = await self.client.get(self.url, params={"q": term, "format": "json"})
        except httpx.TimeoutException:
            raise CodedError(
                ErrorCode.TIMEOUT,
                f"the search endpoint did not answer within {SEARCH_TIMEOUT_SECONDS:g} s",
            ) from None
        except httpx.HTTPError as exc:
            raise CodedError(
                ErrorCode.UNAVAILABLE,
                f"cannot reach the search endpoint {self.url}: {type(exc).__name__}",
            ) from None
        if response.status_code != 200:
            raise CodedError(
                ErrorCode.REQUEST_FAILED,
                f"the search endpoint answered HTTP {response.status_code} "
                "(SearXNG needs `json` among search.formats in its settings.yml)",
            )
        try:
            results = response.json()["results"]
            return [_reference(item) for item in results[:SEARCH_MAX_RESULTS]]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise CodedError(
                ErrorCode.REQUEST_FAILED,
                "the search endpoint's answer is not SearXNG's JSON (no `results` list)",
            ) from None

    async def aclose(self) -> None:
        await self.client.aclose()


def _reference(item: dict[str, Any]) -> WebSearchReference:
    return WebSearchReference(
        title=str(item.get("title") or ""),
        url=str(item["url"]),
        chunk=str(item.get("content") or ""),
    )


async def web_search(args: WebSearchArgs, ctx: CallContext) -> WebSearchResult:
    """Searches the web through --web-search-endpoint: titles, URLs and snippets."""
    if not ctx.daemon.config.web_search_endpoint:
        reason = off_without("web search", "--web-search-endpoint")
        return WebSearchResult(
            error={
                "code": "unavailable",
                "message": f"{reason}; use fetch or web_fetch with a known URL instead",
            }
        )
    term = args.search_term.strip()
    if not term:
        return WebSearchResult(error={"code": "invalid_argument", "message": "no search_term"})
    try:
        references = await ctx.daemon.service(SearchEndpoint).search(term)
    except CodedError as failure:
        return WebSearchResult(error={"code": failure.code, "message": failure.message})
    return WebSearchResult(success=WebSearchSuccess(references=references))


WEB_SEARCH = ToolSpec(
    "web_search_tool_call",
    web_search,
    effects=Effect.NONE,
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("WebSearch"),
    subject=no_subject,
)
