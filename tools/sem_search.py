"""sem_search_tool_call (SemSearch): semantic code search over the workspace.

The workspace's text files (those the agent may see: .gitignore and .cursorignore apply) are
cut into chunks of a few dozen lines, each embedded with all-MiniLM-L6-v2 (tools/embeddings.py)
together with its path; a query is embedded the same way and the chunks closest to it (cosine)
come back with their scores.

The index lives in memory, one per daemon (= per workspace), built lazily by the first search
and refreshed by every later one: files are listed and stat'ed again, and only files whose size
or mtime changed are embedded again (deleted ones dropped). Embedding runs in worker threads,
a batch at a time, newest files first. It costs about 2 s of one core per 10 KB of code, so a
search waits for it at most SEARCH_WAIT_SECONDS; past that it answers from what is indexed (and
says so: `index_complete`, counts, a note) while indexing goes on for the next search.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from agent.v1.agent_pb2 import CodeChunk, SemSearchArgs, SemSearchResult, SemSearchSuccess
from agent.v1.common_pb2 import ToolError
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.errors import CodedError
from exec_daemon.kernel.paths import PathRefused, real_path
from exec_daemon.kernel.spec import Effect, Hooks, RunModeRule, Subject, ToolSpec
from exec_daemon.kernel.state import Daemon
from tools.workspace import (
    AgentPaths,
    CursorIgnore,
    display_path,
    relative_to_workspace,
    resolve_path,
)
from tools.workspace_files import list_files

if TYPE_CHECKING:
    from tools.embeddings import Embedder, Vectors

log = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
SEARCH_WAIT_SECONDS = 45.0
LIST_SECONDS = 60.0
MAX_INDEXED_FILES = 20_000
MAX_INDEXED_CHUNKS = 50_000
MAX_FILE_BYTES = 512 * 1024
CHUNK_MAX_LINES = 30
CHUNK_MIN_LINES = 8
# About 250 tokens of code (3.3 characters a token): a chunk fits the model's 256-token window.
CHUNK_MAX_CHARS = 800
# Files whose lines average longer than this are minified or data, not code to read.
MAX_AVERAGE_LINE_CHARS = 300
# Chunks embedded per worker-thread call: small enough that shutdown and new files are not
# kept waiting long.
EMBED_GROUP = 32
DEFAULT_RESULTS = 10
MAX_RESULTS = 50
MAX_RESULT_CHARS = 4000


@dataclass(frozen=True)
class Chunk:
    start_line: int  # 1-based, inclusive
    end_line: int
    text: str


@dataclass
class FileEntry:
    """An embedded file (a file is in the index only once all its chunks are embedded)."""

    stamp: tuple[int, int]  # (size, mtime_ns)
    chunks: list[Chunk]
    vectors: Vectors  # one row per chunk


def chunk_text(text: str) -> list[Chunk]:
    """Chunks of up to CHUNK_MAX_LINES lines / CHUNK_MAX_CHARS characters, cut at a blank line
    when one comes after CHUNK_MIN_LINES lines (so functions and paragraphs tend to stay whole).
    Blank-only chunks are dropped."""
    lines = text.splitlines()
    chunks: list[Chunk] = []
    start = 0
    while start < len(lines):
        end, size = start, 0
        while end < len(lines) and end - start < CHUNK_MAX_LINES:
            size += len(lines[end]) + 1
            end += 1
            if size >= CHUNK_MAX_CHARS:
                break
            if end - start >= CHUNK_MIN_LINES and end < len(lines) and not lines[end].strip():
                break
        body = "\n".join(lines[start:end])
        if body.strip():
            chunks.append(Chunk(start + 1, end, body))
        start = end
    return chunks


def _read_chunks(path: str) -> list[Chunk]:
    """The chunks of a text file; none for binary, huge or minified files."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError:
        return []
    if len(data) > MAX_FILE_BYTES or b"\0" in data[:8192]:
        return []
    text = data.decode("utf-8", "replace")
    if text and len(text) / (text.count("\n") + 1) > MAX_AVERAGE_LINE_CHARS:
        return []
    return chunk_text(text)


def _stamps(paths: list[str]) -> dict[str, tuple[int, int]]:
    stamps = {}
    for path in paths:
        with contextlib.suppress(OSError):
            info = os.stat(path)
            stamps[path] = (info.st_size, info.st_mtime_ns)
    return stamps


def _embedding_text(shown_path: str, chunk: Chunk) -> str:
    return f"{shown_path}\n{chunk.text}"


class ModelUnavailableError(Exception):
    pass


@dataclass
class IndexState:
    total_files: int = 0
    indexed_files: int = 0
    complete: bool = False
    files_truncated: bool = False
    chunks_truncated: bool = False


class SemanticIndex:
    """The workspace's chunk embeddings; one per daemon (`daemon.service(SemanticIndex)`)."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.files: dict[str, FileEntry] = {}
        self.state = IndexState()
        self._embedder: Embedder | None = None
        self._model_lock = asyncio.Lock()
        self._refresh: asyncio.Task[None] | None = None
        self._stop = threading.Event()

    async def embedder(self) -> Embedder:
        async with self._model_lock:
            if self._embedder is None:
                self._embedder = await asyncio.to_thread(_load_embedder)
            return self._embedder

    async def refreshed(self, wait_seconds: float) -> IndexState:
        """Brings the index up to date, waiting at most `wait_seconds` (indexing goes on after)."""
        if self._refresh is None or self._refresh.done():
            self._refresh = asyncio.create_task(self._update())
        task = self._refresh
        # asyncio.wait never cancels `task`: an aborted search leaves indexing running.
        await asyncio.wait([task], timeout=wait_seconds)
        if task.done():
            task.result()  # raises what the indexing raised (the model missing, ...)
        return replace(self.state, complete=task.done())

    async def _update(self) -> None:
        workspace = Path(self.daemon.workspace)
        paths, more = await list_files(self.daemon, workspace, MAX_INDEXED_FILES, LIST_SECONDS)
        stamps = await asyncio.to_thread(_stamps, paths)
        for gone in set(self.files) - set(stamps):
            del self.files[gone]
        changed = [path for path, stamp in stamps.items() if self._entry_stamp(path) != stamp]
        # Newest first: what the agent just worked on is likeliest to be searched for.
        changed.sort(key=lambda path: stamps[path][1], reverse=True)
        self.state = IndexState(total_files=len(stamps), files_truncated=more)
        self.state.indexed_files = len(stamps) - len(changed)
        if changed:
            embedder = await self.embedder()
            await self._embed_files(embedder, changed, stamps)

    def _entry_stamp(self, path: str) -> tuple[int, int] | None:
        entry = self.files.get(path)
        return entry.stamp if entry is not None else None

    def _chunk_count(self) -> int:
        return sum(len(entry.chunks) for entry in self.files.values())

    async def _embed_files(
        self, embedder: Embedder, paths: list[str], stamps: dict[str, tuple[int, int]]
    ) -> None:
        workspace = self.daemon.workspace
        budget = MAX_INDEXED_CHUNKS - self._chunk_count()
        queue = list(paths)
        while queue and not self._stop.is_set():
            group: list[tuple[str, list[Chunk]]] = []
            size = 0
            while queue and size < EMBED_GROUP:
                path = queue.pop(0)
                chunks = await asyncio.to_thread(_read_chunks, path)
                old = self.files.pop(path, None)
                budget += len(old.chunks) if old else 0
                if len(chunks) > budget:
                    self.state.chunks_truncated = True
                    continue
                budget -= len(chunks)
                group.append((path, chunks))
                size += len(chunks)
            texts = [
                _embedding_text(display_path(workspace, path), chunk)
                for path, chunks in group
                for chunk in chunks
            ]
            vectors = await asyncio.to_thread(embedder.embed, texts)
            row = 0
            for path, chunks in group:
                self.files[path] = FileEntry(stamps[path], chunks, vectors[row : row + len(chunks)])
                row += len(chunks)
                self.state.indexed_files += 1

    def candidates(self, within: list[str]) -> list[tuple[str, FileEntry]]:
        """The embedded files under the `within` directories (all when empty), with chunks."""
        prefixes = [directory.rstrip("/") + "/" for directory in within]
        return [
            (path, entry)
            for path, entry in self.files.items()
            if entry.chunks and (not prefixes or path.startswith(tuple(prefixes)))
        ]

    async def aclose(self) -> None:
        self._stop.set()
        if self._refresh is not None and not self._refresh.done():
            self._refresh.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._refresh


def rank(
    candidates: list[tuple[str, FileEntry]], query: Vectors, limit: int
) -> list[tuple[float, str, Chunk]]:
    """The `limit` chunks closest to `query` (vectors are unit length: cosine = dot product)."""
    import numpy as np

    if not candidates:
        return []
    matrix = np.concatenate([entry.vectors for _, entry in candidates])
    owners = [(path, chunk) for path, entry in candidates for chunk in entry.chunks]
    scores = matrix @ query
    best = np.argsort(-scores, kind="stable")[:limit]
    return [(float(scores[index]), *owners[index]) for index in best]


def _load_embedder() -> Embedder:
    try:
        from tools.embeddings import Embedder, ModelUnavailable
    except ImportError as exc:
        raise ModelUnavailableError(
            f"semantic search needs numpy and tokenizers, which are not installed ({exc.name})"
        ) from None
    try:
        return Embedder.load()
    except ModelUnavailable as exc:
        raise ModelUnavailableError(str(exc)) from None
    except ImportError as exc:
        raise ModelUnavailableError(
            f"semantic search needs {exc.name}, which is not installed"
        ) from None


def _error(code: str, message: str) -> SemSearchResult:
    return SemSearchResult(error=ToolError(code=code, message=message))


def _directories(ctx: CallContext, targets: list[str]) -> list[str] | SemSearchResult:
    workspace = ctx.daemon.workspace
    directories = []
    rules = ctx.daemon.service(AgentPaths)
    for target in targets:
        try:
            absolute = Path(real_path(resolve_path(workspace, target), rules))
        except PathRefused as refused:
            code = "invalid_argument" if refused.kind == "invalid" else "permission_denied"
            return _error(code, refused.reason)
        except OSError:
            return _error("not_a_directory", f"{target} is not a directory of the workspace")
        inside = relative_to_workspace(workspace, absolute) is not None
        if not inside and relative_to_workspace(os.path.realpath(workspace), absolute) is None:
            return _error(
                "invalid_argument",
                f"{target} is outside the workspace; sem_search searches the workspace only",
            )
        if ctx.daemon.service(CursorIgnore).is_ignored(absolute, True):
            return _error(
                "permission_denied", f"{target} is hidden from the agent by .cursorignore"
            )
        if not absolute.is_dir():
            return _error("not_a_directory", f"{target} is not a directory of the workspace")
        directories.append(str(absolute))
    return directories


def _note(state: IndexState) -> str:
    notes = []
    if not state.complete:
        notes.append(
            f"the index is still being built ({state.indexed_files} of {state.total_files} files "
            "so far): these results cover only the indexed files; search again later for more"
        )
    if state.files_truncated:
        notes.append(f"only the first {MAX_INDEXED_FILES} files of the workspace are indexed")
    if state.chunks_truncated:
        notes.append(f"the index is full ({MAX_INDEXED_CHUNKS} chunks): some files are left out")
    return "; ".join(notes)


async def sem_search(args: SemSearchArgs, ctx: CallContext) -> SemSearchResult:
    query = args.query.strip()
    if not query:
        return _error("invalid_argument", "query is empty")
    directories = _directories(ctx, list(args.target_directories))
    if isinstance(directories, SemSearchResult):
        return directories
    index = ctx.daemon.service(SemanticIndex)
    try:
        embedder = await index.embedder()
        state = await index.refreshed(SEARCH_WAIT_SECONDS)
    except ModelUnavailableError as exc:
        return _error("unavailable", str(exc))
    except CodedError as failure:
        return _error(failure.code, failure.message)
    query_vector = (await asyncio.to_thread(embedder.embed, [query]))[0]
    limit = min(args.max_results or DEFAULT_RESULTS, MAX_RESULTS)
    hits = await asyncio.to_thread(rank, index.candidates(directories), query_vector, limit)
    workspace = ctx.daemon.workspace
    return SemSearchResult(
        success=SemSearchSuccess(
            results=[
                CodeChunk(
                    path=display_path(workspace, path),
                    start_line=chunk.start_line,
                    end_line=chunk.end_line,
                    contents=chunk.text[:MAX_RESULT_CHARS],
                    score=score,
                )
                for score, path, chunk in hits
            ],
            index_complete=state.complete,
            indexed_files=state.indexed_files,
            total_files=state.total_files,
            note=_note(state),
            model=MODEL_NAME,
        )
    )


SEM_SEARCH = ToolSpec(
    "sem_search_tool_call",
    sem_search,
    effects=Effect.NONE,  # its index lives in the daemon's cache, not in the workspace
    run_mode=RunModeRule.UNGATED,
    hooks=Hooks("SemSearch"),
    subject=lambda args: Subject(paths_read=tuple(args.target_directories)),
)
