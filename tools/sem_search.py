"""sem_search_tool_call (SemSearch): semantic code search over the workspace.

The workspace's text files (those the agent may see: .gitignore and .cursorignore apply) are
cut into chunks of a few dozen lines. Each chunk is embedded, with its path, by a static model
distilled from all-MiniLM-L6-v2 (tools/static_embeddings.py: the mean of per-token vectors,
about a second of one core for 2 MB of code) and is also searchable by its words (BM25). A
query is ranked both ways and the two rankings are fused (reciprocal rank fusion): hybrid
ranking found more of the expected files than either alone (scripts/bench_sem_search.py).

The index is one per daemon (`daemon.service(SemanticIndex)`): `start()` (server.py, at daemon
start) builds it in the background and then follows the workspace through a file watcher
(watchfiles, inotify): an edit or a deletion of an indexed file updates that file; a new file has
its folder listed one level deep (it may be ignored), a new folder is listed whole; a changed ignore
file (.gitignore, .ignore, .rgignore, .cursorignore) has the workspace listed again. Files are read,
chunked and embedded in a process of the index's own (at idle CPU priority, a small batch at a time;
it also keeps the vector store, and embeds the queries), so that work never holds the daemon's GIL
nor takes its CPU; unused for INDEX_PROCESS_IDLE_SECONDS it ends (its ~80-120 MB go back to the
machine) and the next request starts another (~0.5 s: the model loads again); the daemon lists
files, installs the results and ranks (in a worker thread, with the interpreter's switch interval
lowered while an update runs). Files are first read and chunked (their words are then searchable),
then embedded. A search first makes sure it sees the agent's latest edit: it asks for a refresh
(files listed and stat'ed, only changed ones read) when that is cheap, else gives the watcher the
moment it needs to report a change; it waits for the update at most SEARCH_WAIT_SECONDS: before the
index is complete it answers from what is indexed plus the lexical ranking, and says how complete
the index is (`index_complete`, `indexed_files` of `total_files`, a note).

Embeddings persist in `<terminals folder>/sem-index/` (the daemon's own folder, which the file
tools refuse to write and sandboxes mount read-only), keyed by the hash of the model, the
file's path and its content: a restart or a branch switch embeds only what changed. Without
the static model's weights (or numpy/tokenizers) the search is lexical only and says so.

Public surface (also used by scripts/bench_sem_search.py and scripts/bench_scale.py):
`SemanticIndex(daemon)`, `await index.start()`, `await index.ready(timeout)` (True when the
index is complete), `index.state` (IndexState: total/lexical/indexed file counts, complete),
`await index.search(query, directories, limit)` -> ([(score, absolute path, Chunk)], IndexState)
(`directories`: absolute, empty for all), `await index.aclose()`. A benchmark builds one with
`Daemon(DaemonConfig(..., terminals_folder=<where the store goes>))` and
`daemon.provide(SemanticIndex, lambda d: SemanticIndex(d, embedder_factory=..., hybrid=...))`;
the `embedder_factory` is called in the index process, so it must pickle (no lambda).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import hashlib
import logging
import math
import os
import pickle
import re
import struct
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from agent.v1.agent_pb2 import CodeChunk, SemSearchArgs, SemSearchResult, SemSearchSuccess
from agent.v1.common_pb2 import ToolError
from exec_daemon.kernel.context import CallContext
from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.paths import PathRefused, ensure_daemon_folder, real_path
from exec_daemon.kernel.processes import end_with_parent, make_undumpable
from exec_daemon.kernel.runner import PIPE, Helper, start_helper
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
    import sqlite3  # the index process's only (VectorStore)

    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]
    # Kept vectors are half precision, as in the store: half the memory, the same ranking.
    HalfVectors = npt.NDArray[np.float16]

log = logging.getLogger(__name__)

LEXICAL_MODEL_NAME = "lexical (BM25)"
# A search waits this long at most for an update already running (an edit just made).
SEARCH_WAIT_SECONDS = 1.0
LIST_SECONDS = 60.0
MAX_INDEXED_FILES = 100_000
MAX_INDEXED_CHUNKS = 200_000
MAX_FILE_BYTES = 512 * 1024
CHUNK_MAX_LINES = 30
CHUNK_MIN_LINES = 8
# About 250 tokens of code (3.3 characters a token).
CHUNK_MAX_CHARS = 800
# Files whose lines average longer than this are minified or data, not code to read.
MAX_AVERAGE_LINE_CHARS = 300
# Files read and chunked per worker call, chunks embedded per worker call: small enough that
# a search, an edit or shutdown is not kept waiting long, and that other calls' p99 stays near
# its idle value while the index builds (64/512 made it 5-9x idle, 16/128 1.2-1.8x, at no cost
# in indexing time: scripts/bench_scale.py --index-only).
READ_GROUP = 16
EMBED_GROUP = 128
# The watcher's batching of events (ms): an editor's write-rename-chmod is one change.
WATCH_DEBOUNCE_MS = 50
# How long a change takes at most to reach the index through the watcher.
WATCH_REPORT_SECONDS = 2 * WATCH_DEBOUNCE_MS / 1000
# A search refreshes the index itself (lists and stats every file) in a workspace of at most
# this many files (~0.1 s, about the watcher's delay; at 100k files a second or two); in a
# larger one it relies on the watcher.
SEARCH_REFRESH_MAX_FILES = 5_000
# The watcher's new files are looked for in their folders alone, up to this many folders (more,
# or a changed ignore file: the workspace is listed again).
MAX_FOLDERS_LISTED_APART = 32
IGNORE_FILES = frozenset({".gitignore", ".ignore", ".rgignore", ".cursorignore"})
WORKER_NICENESS = 10
# While the worker indexes, the event loop's thread waits for the GIL after each wake-up; the
# interpreter hands it over only every switch interval (5 ms by default), so a small call's
# several wake-ups each waited up to 5 ms (p99 7x idle, scripts/bench_scale.py). Lowered while
# an update runs, the loop gets it back sooner; restored after.
INDEXING_SWITCH_INTERVAL_S = 0.0001
# While an update runs, a full garbage collection waits for this many collections of the middle
# generation (10 by default). Each file's entry stays tracked (its word counts are dicts) and a
# full collection walks them all: at 100k files 0.1-0.3 s of the whole daemon, several times
# during a build, as the index grows. After the update the default comes back.
INDEXING_FULL_COLLECTION_THRESHOLD = 10_000
# Reciprocal rank fusion's constant (Cormack et al. 2009) and the BM25 parameters.
RRF_K = 60
# Files whose vectors a search multiplies with the query at once (see _similarities).
SIMILARITY_BLOCK = 256
BM25_K1 = 1.2
BM25_B = 0.75
INDEX_FOLDER_NAME = "sem-index"
# The index process ends after this long without a request (the next one starts another).
INDEX_PROCESS_IDLE_SECONDS = 300.0
DEFAULT_RESULTS = 10
MAX_RESULTS = 50
MAX_RESULT_CHARS = 4000

_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|[0-9]+")


class Chunk(NamedTuple):
    start_line: int  # 1-based, inclusive
    end_line: int
    text: str


@dataclass(slots=True)
class FileEntry:
    """A chunked file: searchable by its words at once, by meaning once `vectors` is set.

    Its chunks are kept as plain tuples (a `Chunk` is made for a search's hits) and their words
    as plain str -> int dicts, which the garbage collector stops tracking: its full collections
    then walk two objects per file (the entry, the tuple of dicts), not dozens (at 100k files,
    lists of dataclass chunks and Counters made each one a 0.2-0.4 s pause of the daemon)."""

    stamp: tuple[int, int]  # (size, mtime_ns)
    key: str  # the store's key: model, path and content hashed
    chunks: tuple[tuple[int, int, str], ...]  # Chunk's fields
    terms: tuple[dict[str, int], ...]  # each chunk's words, for BM25
    vectors: HalfVectors | None = None  # one unit row per chunk


class Embedder(Protocol):
    name: str
    dimension: int

    def embed(self, texts: list[str]) -> Vectors: ...


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


def words(text: str) -> list[str]:
    """Lower-case words, identifiers split at case changes and underscores (parseUnifiedDiff,
    parse_unified_diff: parse, unified, diff)."""
    return [word.lower() for word in _WORD.findall(text) if len(word) > 1]


def _read_text(path: str) -> bytes | None:
    """A text file's bytes; None for unreadable, binary, huge or minified files."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_FILE_BYTES or b"\0" in data[:8192]:
        return None
    if data and len(data) / (data.count(b"\n") + 1) > MAX_AVERAGE_LINE_CHARS:
        return None
    return data


def _folders_to_list(paths: Iterable[str]) -> dict[str, bool]:
    """The folders to list for new `paths`: a new folder whole (True), a new file's folder one
    level deep (False); paths gone since are left out."""
    folders: dict[str, bool] = {}
    for path in paths:
        if os.path.isdir(path) and not os.path.islink(path):
            folders[path] = True
        elif os.path.lexists(path):
            folders.setdefault(os.path.dirname(path), False)
    return folders


def _stamps(paths: list[str]) -> dict[str, tuple[int, int]]:
    stamps = {}
    for path in paths:
        with contextlib.suppress(OSError):
            info = os.stat(path)
            stamps[path] = (info.st_size, info.st_mtime_ns)
    return stamps


def embedding_text(shown_path: str, chunk: tuple[int, int, str]) -> str:
    return f"{shown_path}\n{chunk[2]}"


class VectorStore:
    """Chunk vectors on disk (SQLite), keyed by FileEntry.key. Used from the worker thread only."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            import sqlite3

            self._db = sqlite3.connect(self.path, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, data BLOB NOT NULL)"
            )
        return self._db

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        db = self._open()
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            marks = ",".join("?" * len(part))
            query = f"SELECT key, data FROM vectors WHERE key IN ({marks})"
            found.update(db.execute(query, part).fetchall())
        return found

    def put_many(self, rows: list[tuple[str, bytes]]) -> None:
        db = self._open()
        with db:
            db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


# -- the index process -----------------------------------------------------------------------
# Reading, chunking, hashing and embedding run in a Python process of the index's own (a helper
# of the daemon's, at idle CPU priority). In a thread of the daemon that work held the GIL
# the event loop needs: other calls' p99 rose to 2.1-2.4x idle while a 100k-file tree was
# indexed, and a real tree's files paused the daemon for tenths of a second
# (scripts/bench_scale.py --index-only). The daemon keeps the index and ranks; the process
# reads, embeds and keeps the vector store. It answers requests (a function's name and its
# arguments) on its stdin, one at a time, with (ok, result) on its stdout; both pickled, each
# preceded by its length. Nothing the agent controls is unpickled: only these two processes
# write the pipes.


@dataclass
class _Model:
    name: str
    dimension: int  # 0: no model, the search is by words only
    lexical_only_reason: str = ""
    store_problem: str = ""


@dataclass
class _Child:
    workspace: Path
    model: _Model
    embedder: Embedder | None
    store: VectorStore | None


_CHILD: _Child | None = None  # set in the index process only, by _child_start


def _child_start(
    daemon: int, workspace: str, store_folder: str, factory: Callable[[], Embedder] | None
) -> None:
    """The index process's first request: it ends with the daemon (even one killed with
    SIGKILL), runs only on CPU time nothing else wants (SCHED_IDLE: at nice 10 it still took
    a share from the daemon's calls, whose p50 rose 1.5x while 100k files were indexed), is
    not dumpable; then the model and the store."""
    global _CHILD
    end_with_parent(daemon)
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, WORKER_NICENESS)
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    make_undumpable()
    try:
        embedder = (factory or _load_static_embedder)()
    except ModelUnavailableError as exc:
        _CHILD = _Child(Path(workspace), _Model(LEXICAL_MODEL_NAME, 0, str(exc)), None, None)
        return
    model = _Model(embedder.name, embedder.dimension)
    store = None
    try:
        ensure_daemon_folder(Path(store_folder), 0o700)
        store = VectorStore(Path(store_folder) / "vectors.sqlite")
    except OSError as exc:
        model.store_problem = f"{store_folder}: {exc}"
    _CHILD = _Child(Path(workspace), model, embedder, store)


def _child() -> _Child:
    assert _CHILD is not None, "called outside the index process"
    return _CHILD


def _child_model() -> _Model:
    return _child().model


def _child_read(group: list[tuple[str, tuple[int, int]]]) -> list[_Read]:
    """Reads, chunks and splits into words; vectors from the store where it keeps them."""
    child = _child()
    reads = []
    for path, stamp in group:
        data = _read_text(path)
        shown = display_path(child.workspace, path)
        if data is None:
            reads.append(_Read(path, stamp, FileEntry(stamp, "", (), ())))
            continue
        key = hashlib.sha256(f"{child.model.name}\0{shown}\0".encode() + data).hexdigest()
        chunks = tuple(
            (chunk.start_line, chunk.end_line, chunk.text)
            for chunk in chunk_text(data.decode("utf-8", "replace"))
        )
        terms = tuple(dict(Counter(words(embedding_text(shown, chunk)))) for chunk in chunks)
        reads.append(_Read(path, stamp, FileEntry(stamp, key, chunks, terms)))
    if child.store is not None:
        kept = child.store.get_many([read.entry.key for read in reads if read.entry])
        for read in reads:
            if read.entry is not None and read.entry.key in kept:
                read.entry.vectors = _unpack(
                    kept[read.entry.key], len(read.entry.chunks), child.model.dimension
                )
    return reads


def _child_embed(
    files: list[tuple[str, str, tuple[tuple[int, int, str], ...]]],
) -> tuple[list[HalfVectors], str]:
    """Embeds each (store key, shown path, chunks) file's chunks and keeps them in the store:
    the vectors per file, and why they could not be kept ("" when they were)."""
    import sqlite3

    import numpy as np

    child = _child()
    assert child.embedder is not None
    texts = [embedding_text(shown, chunk) for _key, shown, chunks in files for chunk in chunks]
    matrix = child.embedder.embed(texts).astype(np.float16)
    per_file, row = [], 0
    for _key, _shown, chunks in files:
        per_file.append(matrix[row : row + len(chunks)])
        row += len(chunks)
    if child.store is None:
        return per_file, ""
    try:
        child.store.put_many(
            [(key, _pack(vectors)) for (key, _s, _c), vectors in zip(files, per_file, strict=True)]
        )
    except sqlite3.Error as exc:
        return per_file, str(exc)
    return per_file, ""


def _child_embed_query(query: str) -> Vectors:
    embedder = _child().embedder
    assert embedder is not None
    return embedder.embed([query])[0]


_CHILD_FUNCTIONS: dict[str, Callable[..., Any]] = {
    function.__name__: function
    for function in (_child_start, _child_model, _child_read, _child_embed, _child_embed_query)
}
_SIZE = struct.Struct(">I")


def _child_main() -> None:
    """The index process's loop (`python -c` of INDEX_PROCESS_CODE): until its stdin ends."""
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not garble the answers
    while header := requests.read(_SIZE.size):
        request = requests.read(_SIZE.unpack(header)[0])
        try:
            name, args = pickle.loads(request)
            answer = (True, _CHILD_FUNCTIONS[name](*args))
        except Exception as exc:  # answered, so the next request finds the pipes in step
            answer = (False, f"{type(exc).__name__}: {exc}")
        data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        answers.write(_SIZE.pack(len(data)) + data)
        answers.flush()
    if _CHILD is not None and _CHILD.store is not None:
        _CHILD.store.close()


# Run isolated (-I: no PYTHONPATH, PYTHONHOME or user site, as the daemon itself in the image,
# scripts/image/exec-daemon), on the daemon's own code: the folder `tools` is imported from.
INDEX_PROCESS_CODE = (
    "import sys; sys.path.insert(0, sys.argv[1]); import tools.sem_search as s; s._child_main()"
)
CODE_ROOT = str(Path(__file__).resolve().parent.parent)


class IndexProcessEnded(CodedError):
    def __init__(self, why: str) -> None:
        super().__init__(ErrorCode.INTERNAL, f"the index process ended unexpectedly ({why})")


@dataclass
class _IndexProcess:
    """The daemon's side of the index process: one request at a time."""

    helper: Helper
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    broken: bool = False

    @classmethod
    async def start(cls, daemon: Daemon, factory: Callable[[], Embedder] | None) -> _IndexProcess:
        helper = await start_helper(
            [sys.executable, "-I", "-c", INDEX_PROCESS_CODE, CODE_ROOT],
            env=os.environ,  # the daemon's own environment, not the agent's
            stdin=PIPE,
            stdout=PIPE,
            stderr=sys.stderr.fileno(),
        )
        process = cls(helper)
        folder = Path(daemon.config.terminals_folder) / INDEX_FOLDER_NAME
        try:
            await process.call(
                _child_start, os.getpid(), str(daemon.workspace), str(folder), factory
            )
        except BaseException:
            await process.stop()
            raise
        return process

    async def call(self, function: Callable[..., T], *args: Any) -> T:
        request = pickle.dumps((function.__name__, args), protocol=pickle.HIGHEST_PROTOCOL)
        stdin, stdout = self.helper.process.stdin, self.helper.process.stdout
        assert stdin is not None and stdout is not None
        async with self.lock:
            if self.broken:
                raise IndexProcessEnded("an earlier request was cut short")
            try:
                stdin.write(_SIZE.pack(len(request)) + request)
                await stdin.drain()
                size = _SIZE.unpack(await stdout.readexactly(_SIZE.size))[0]
                answer = await stdout.readexactly(size)
            except (OSError, asyncio.IncompleteReadError) as exc:
                self.broken = True
                raise IndexProcessEnded(str(exc) or type(exc).__name__) from None
            except BaseException:  # cancelled mid-request: its answer would go to the next one
                self.broken = True
                raise
        ok, result = await asyncio.to_thread(with_numpy, pickle.loads, answer)
        if not ok:
            raise CodedError(ErrorCode.INTERNAL, f"the index process failed: {result}")
        return result  # type: ignore[no-any-return]

    async def stop(self) -> None:
        """Ends its input (it closes its store and exits), then it and anything it left."""
        stdin = self.helper.process.stdin
        if stdin is not None:
            stdin.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.helper.process.wait()), 2.0)
        await self.helper.stop()


def _lower_priority() -> None:
    """Runs in the worker thread: Linux's nice value is per thread."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WORKER_NICENESS)


@contextlib.contextmanager
def _indexing_interpreter() -> Iterator[None]:
    """While an update runs: the switch interval lowered (INDEXING_SWITCH_INTERVAL_S) and full
    collections deferred (INDEXING_FULL_COLLECTION_THRESHOLD); both restored after."""
    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(min(interval, INDEXING_SWITCH_INTERVAL_S))
    gc.set_threshold(*thresholds[:2], max(thresholds[2], INDEXING_FULL_COLLECTION_THRESHOLD))
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*thresholds)


@dataclass
class IndexState:
    total_files: int = 0
    lexical_files: int = 0  # read and chunked: searchable by words
    indexed_files: int = 0  # embedded too
    complete: bool = False
    files_truncated: bool = False
    chunks_truncated: bool = False
    # Why the search is by words only (the static model missing), else "".
    lexical_only_reason: str = ""


@dataclass
class _Read:
    path: str
    stamp: tuple[int, int]
    entry: FileEntry | None  # None: not text


T = TypeVar("T")


@dataclass
class SemanticIndex:
    """The workspace's chunks, words and vectors; one per daemon (`daemon.service(...)`)."""

    daemon: Daemon
    files: dict[str, FileEntry] = field(default_factory=dict)
    state: IndexState = field(default_factory=IndexState)
    # None: load the static model (tools/static_embeddings.py); benchmarks pass another.
    embedder_factory: Callable[[], Embedder] | None = None
    # Fuse the vector ranking with BM25's (False: by vectors alone, as before; for comparison).
    hybrid: bool = True
    process_idle_seconds: float = INDEX_PROCESS_IDLE_SECONDS

    def __post_init__(self) -> None:
        self._model: _Model | None = None  # known once the index process has started
        self._process: _IndexProcess | None = None
        self._process_used = 0.0  # the loop's time of its last request
        self._idle_stop: asyncio.Task[None] | None = None
        self._worker = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="sem-index", initializer=_lower_priority
        )
        self._update_task: asyncio.Task[None] | None = None
        self._full_update_asked = False
        self._touched: set[str] = set()  # indexed files the watcher saw change
        self._watch_task: asyncio.Task[None] | None = None
        # Told each batch of the watcher's changes as (added|modified|deleted, path): the
        # session record's hook (set by the composition root when it is kept).
        self.on_changes: Callable[[list[tuple[str, str]]], None] | None = None
        self._stop = threading.Event()
        self._stop_watching = asyncio.Event()
        self._chunk_count = 0
        # Files read but not embedded yet, oldest first (kept so no step scans every file).
        self._unembedded: dict[str, None] = {}
        self._document_frequency: Counter[str] = Counter()
        self._total_terms = 0
        self._updates = 0

    # -- life cycle ------------------------------------------------------------------------

    async def start(self, watch: bool = True) -> None:
        """Starts indexing in the background and, with `watch`, following the workspace."""
        self._schedule_update()
        if watch and self._watch_task is None:
            self._watch_task = asyncio.create_task(self._watch())

    async def ready(self, seconds: float) -> bool:
        """Waits up to `seconds` for the index to be complete (starting it if need be)."""
        if self._update_task is None:
            self._schedule_update()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            task = self._update_task
            assert task is not None
            if task.done():  # an update runs until no change is left
                return self.state.complete
            left = deadline - loop.time()
            if left <= 0:
                return False
            await asyncio.wait([task], timeout=left)

    async def aclose(self) -> None:
        self._stop.set()
        self._stop_watching.set()
        for task in (self._watch_task, self._update_task, self._idle_stop):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        process, self._process = self._process, None
        if process is not None:
            await process.stop()
        self._worker.shutdown(wait=True, cancel_futures=True)

    @property
    def updates(self) -> int:
        """How many updates have finished (tests and benchmarks poll it)."""
        return self._updates

    def _schedule_update(self, touched: Iterable[str] | None = None) -> None:
        """Asks for an update: of the `touched` paths (the watcher's: `_update_touched`), or,
        without them, of the whole workspace, listed again."""
        if touched is None:
            self._full_update_asked = True
        else:
            self._touched.update(touched)
        if self._update_task is None or self._update_task.done():
            self._update_task = asyncio.create_task(self._update_until_quiet())
        # else the running update takes it up when it ends (it may have listed before)

    async def _update_until_quiet(self) -> None:
        try:
            with _indexing_interpreter():
                while (self._full_update_asked or self._touched) and not self._stop.is_set():
                    touched, self._touched = self._touched, set()
                    if self._full_update_asked or self._needs_listing(touched):
                        self._full_update_asked = False
                        await self._update()
                    else:
                        await self._update_touched(touched)
        except CodedError as failure:
            log.warning("sem_search index: %s", failure.message)
        except Exception:
            log.exception("sem_search index: update failed")

    async def _watch(self) -> None:
        try:
            from watchfiles import awatch
        except ImportError:
            return
        workspace = str(self.daemon.workspace)
        git_folder = os.path.join(workspace, ".git") + "/"  # never listed: git's own churn
        try:
            async for changes in awatch(
                workspace,
                stop_event=self._stop_watching,
                debounce=WATCH_DEBOUNCE_MS,
                step=WATCH_DEBOUNCE_MS,
                recursive=True,
            ):
                touched = {path for _change, path in changes if not path.startswith(git_folder)}
                if touched:
                    self._schedule_update(touched)
                    if self.on_changes is not None:
                        self.on_changes(
                            [(c.name, p) for c, p in changes if not p.startswith(git_folder)]
                        )
        except Exception as exc:  # a watch limit reached, the workspace gone: searches refresh
            log.warning("sem_search index: not following changes (%s)", exc)
            self._watch_task = None

    async def _in_worker(self, function: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, with_numpy, function, *args)

    async def _in_process(self, function: Callable[..., T], *args: Any) -> T:
        """Runs `function` in the index process (started if need be; a dead one is replaced)."""
        if self._process is not None and self._process.broken:
            broken, self._process = self._process, None
            await broken.stop()
        if self._process is None:
            self._process = await _IndexProcess.start(self.daemon, self.embedder_factory)
        self._process_used = asyncio.get_running_loop().time()
        if self._idle_stop is None or self._idle_stop.done():
            self._idle_stop = asyncio.create_task(self._stop_process_when_idle())
        # No await before the call takes the process's lock: the idle stop cannot come between.
        return await self._process.call(function, *args)

    async def _stop_process_when_idle(self) -> None:
        loop = asyncio.get_running_loop()
        while self._process is not None:
            idle_for = loop.time() - self._process_used
            if idle_for < self.process_idle_seconds:
                await asyncio.sleep(self.process_idle_seconds - idle_for)
            elif self._process.lock.locked():  # a request still running
                self._process_used = loop.time()
            else:
                process, self._process = self._process, None
                await process.stop()

    # -- the model -------------------------------------------------------------------------

    async def _load_model(self) -> _Model:
        if self._model is None:
            model = await self._in_process(_child_model)
            if model.lexical_only_reason:
                self.state.lexical_only_reason = model.lexical_only_reason
                log.warning("sem_search: searching by words only: %s", model.lexical_only_reason)
            if model.store_problem:
                log.warning("sem_search: the index is not kept on disk: %s", model.store_problem)
            self._model = model
        return self._model

    @property
    def _has_model(self) -> bool:
        return self._model is not None and self._model.dimension > 0

    @property
    def model_name(self) -> str:
        return self._model.name if self._model is not None else LEXICAL_MODEL_NAME

    # -- updating --------------------------------------------------------------------------

    async def _update(self) -> None:
        workspace = Path(self.daemon.workspace)
        paths, more = await list_files(self.daemon, workspace, MAX_INDEXED_FILES, LIST_SECONDS)
        # In the worker: at 100k files, stat'ing and comparing take tenths of a second, which
        # the event loop would not serve calls during (the worker yields the GIL often).
        stamps, gone, changed = await self._in_worker(self._changes, paths)
        for path in gone:
            self._forget(path)
        reason = self.state.lexical_only_reason
        self.state = IndexState(
            total_files=len(stamps), files_truncated=more, lexical_only_reason=reason
        )
        await self._index(changed, stamps)

    def _needs_listing(self, touched: set[str]) -> bool:
        """Whether the watcher's changes need the whole workspace listed again: an ignore file
        changed (what is listed may change anywhere), new files in too many folders to list one
        by one, or an index already at its limit."""
        new_folders = {os.path.dirname(path) for path in touched if path not in self.files}
        return (
            (self.state.files_truncated and bool(new_folders))
            or len(new_folders) > MAX_FOLDERS_LISTED_APART
            or any(os.path.basename(path) in IGNORE_FILES for path in touched)
        )

    async def _update_touched(self, touched: set[str]) -> None:
        """The watcher's changes: indexed files edited or deleted are stat'ed and read again;
        new files are looked for in their folder alone (`_listed`)."""
        indexed = sorted(path for path in touched if path in self.files)
        stamps = await self._in_worker(_stamps, indexed)
        gone = [path for path in indexed if path not in stamps]
        for path in gone:
            self._forget(path)
        added = await self._in_worker(_stamps, await self._listed(touched - set(indexed)))
        self.state.total_files += len(added) - len(gone)
        if self.state.total_files > MAX_INDEXED_FILES:
            await self._update()  # the listing decides which files the index keeps
            return
        stamps.update(added)
        await self._index(
            [path for path in stamps if self._entry_stamp(path) != stamps[path]], stamps
        )

    async def _listed(self, new: set[str]) -> list[str]:
        """Of the `new` paths, the files the workspace's listing has (ignore rules apply): each
        new file's folder is listed one level deep, each new folder whole (a folder moved in
        is reported alone, not its files)."""
        folders = await self._in_worker(_folders_to_list, new)
        found: dict[str, None] = {}
        for folder, whole in folders.items():
            listed, _more = await list_files(
                self.daemon,
                Path(folder),
                MAX_INDEXED_FILES,
                LIST_SECONDS,
                depth=None if whole else 1,
            )
            found.update((path, None) for path in listed if whole or path in new)
        return [path for path in found if path not in self.files]

    async def _index(self, changed: list[str], stamps: dict[str, tuple[int, int]]) -> None:
        """Reads and chunks the `changed` files (their words are then searchable), then embeds
        what is not embedded yet."""
        await self._load_model()
        self._count()
        for start in range(0, len(changed), READ_GROUP):
            if self._stop.is_set():
                return
            group = [(path, stamps[path]) for path in changed[start : start + READ_GROUP]]
            for read in await self._in_process(_child_read, group):
                self._install(read)
            self._count()
        await self._embed_missing()
        self._count()
        self.state.complete = not self._stop.is_set()
        self._updates += 1

    def _changes(self, paths: list[str]) -> tuple[dict[str, tuple[int, int]], list[str], list[str]]:
        """In the worker (the update that calls it is the only one changing `files`): the
        files' stamps, the indexed files gone, and the new or changed ones, newest first (what
        the agent just worked on is likeliest to be searched for)."""
        stamps = _stamps(paths)
        gone = [path for path in self.files if path not in stamps]
        changed = [path for path, stamp in stamps.items() if self._entry_stamp(path) != stamp]
        changed.sort(key=lambda path: stamps[path][1], reverse=True)
        return stamps, gone, changed

    def _entry_stamp(self, path: str) -> tuple[int, int] | None:
        entry = self.files.get(path)
        return entry.stamp if entry is not None else None

    def _count(self) -> None:
        self.state.lexical_files = len(self.files)
        # Files that are not text count as done; with no model, every read file is.
        waiting = len(self._unembedded) if self._has_model else 0
        self.state.indexed_files = len(self.files) - waiting

    def _install(self, read: _Read) -> None:
        self._forget(read.path)
        entry = read.entry
        if entry is None:
            return
        if self._chunk_count + len(entry.chunks) > MAX_INDEXED_CHUNKS:
            self.state.chunks_truncated = True
            return
        self.files[read.path] = entry
        if entry.chunks and entry.vectors is None:
            self._unembedded[read.path] = None
        self._chunk_count += len(entry.chunks)
        # One string per distinct word for the whole index (each batch from the index process
        # brings its own copies): the word counts take 60 % less memory.
        entry.terms = tuple(
            {sys.intern(word): n for word, n in terms.items()} for terms in entry.terms
        )
        for terms in entry.terms:
            self._document_frequency.update(terms.keys())
            self._total_terms += sum(terms.values())

    def _forget(self, path: str) -> None:
        entry = self.files.pop(path, None)
        if entry is None:
            return
        self._unembedded.pop(path, None)
        self._chunk_count -= len(entry.chunks)
        for terms in entry.terms:
            self._document_frequency.subtract(terms.keys())
            self._total_terms -= sum(terms.values())

    async def _embed_missing(self) -> None:
        if not self._has_model:
            return
        workspace = self.daemon.workspace
        while not self._stop.is_set():
            group: list[tuple[str, FileEntry]] = []
            size = 0
            for path in self._unembedded:
                entry = self.files[path]
                group.append((path, entry))
                size += len(entry.chunks)
                if size >= EMBED_GROUP:
                    break
            if not group:
                return
            texts = [
                (entry.key, display_path(workspace, path), entry.chunks) for path, entry in group
            ]
            vectors, store_problem = await self._in_process(_child_embed, texts)
            if store_problem:
                log.warning("sem_search: cannot keep vectors on disk: %s", store_problem)
            for (path, entry), rows in zip(group, vectors, strict=True):
                if self.files.get(path) is entry:  # not replaced by an edit meanwhile
                    entry.vectors = rows
                    self._unembedded.pop(path, None)
            self._count()

    # -- searching -------------------------------------------------------------------------

    async def search(
        self, query: str, directories: Sequence[str], limit: int
    ) -> tuple[list[tuple[float, str, Chunk]], IndexState]:
        """The `limit` best chunks under `directories` (all when empty), and how complete the
        index was. Never waits for indexing longer than SEARCH_WAIT_SECONDS."""
        # What the agent changed just before searching may not have reached the watcher yet. A
        # refresh (listing and stat'ing; only changes are read) finds it, when it is cheap; else
        # (a large workspace) the watcher is given the time it takes to report a change.
        if self._watch_task is None or len(self.files) <= SEARCH_REFRESH_MAX_FILES:
            self._schedule_update()
        else:
            await asyncio.sleep(WATCH_REPORT_SECONDS)
        task = self._update_task
        if task is not None and not task.done():
            await asyncio.wait([task], timeout=SEARCH_WAIT_SECONDS)
        state = replace(self.state)
        if self._update_task is not None and not self._update_task.done():
            state.complete = False
        candidates = self._candidates(directories)
        statistics = (len(self.files), self._chunk_count, self._total_terms)
        query_vector = None
        if self._has_model and any(entry.vectors is not None for _path, entry in candidates):
            try:
                query_vector = await self._in_process(_child_embed_query, query)
            except CodedError as failure:  # ranked by words this once; the next update restarts it
                log.warning("sem_search: %s", failure.message)
        hits = await self._in_worker(
            self._rank,
            query,
            query_vector,
            candidates,
            dict(self._document_frequency),
            statistics,
            limit,
        )
        return hits, state

    def _candidates(self, within: Sequence[str]) -> list[tuple[str, FileEntry]]:
        prefixes = tuple(directory.rstrip("/") + "/" for directory in within)
        return [
            (path, entry)
            for path, entry in self.files.items()
            if entry.chunks and (not prefixes or path.startswith(prefixes))
        ]

    def _rank(
        self,
        query: str,
        query_vector: Vectors | None,
        candidates: list[tuple[str, FileEntry]],
        document_frequency: dict[str, int],
        statistics: tuple[int, int, int],
        limit: int,
    ) -> list[tuple[float, str, Chunk]]:
        import numpy as np

        sizes = np.fromiter((len(entry.chunks) for _p, entry in candidates), np.int64)
        lexical = np.array(
            bm25_scores(
                words(query),
                [terms for _path, entry in candidates for terms in entry.terms],
                document_frequency,
                statistics,
            ),
            dtype=np.float32,
        )
        lexical[lexical <= 0] = -np.inf
        rankings = [lexical]
        # Read once: the event loop gives entries their vectors while this thread ranks.
        vectors = [entry.vectors for _path, entry in candidates]
        embedded = [rows for rows in vectors if rows is not None]
        if query_vector is not None and embedded:
            if not self.hybrid and len(embedded) == len(candidates):
                rankings = []
            has_vectors = np.fromiter((rows is not None for rows in vectors), np.bool_)
            semantic = np.full(len(lexical), -np.inf, dtype=np.float32)
            semantic[np.repeat(has_vectors, sizes)] = _similarities(embedded, query_vector)
            rankings.append(semantic)
        starts = np.concatenate(([0], np.cumsum(sizes)))
        hits = []
        for score, index in fuse(rankings, limit):
            file = int(np.searchsorted(starts, index, side="right")) - 1
            path, entry = candidates[file]
            hits.append((score, path, Chunk(*entry.chunks[index - int(starts[file])])))
        return hits


def _similarities(vectors: list[HalfVectors], query_vector: Vectors) -> Vectors:
    """Every row's dot product with the query. The files' rows are copied a block at a time into
    one buffer that stays in the CPU's cache (one product per file, or all files stacked at
    once, cost 0.4-0.7 s at 100k files; this ~0.1 s)."""
    import numpy as np

    rows = np.fromiter((len(block) for block in vectors), np.int64, count=len(vectors))
    starts = np.concatenate(([0], np.cumsum(rows)))
    result = np.empty(int(starts[-1]), dtype=np.float32)
    buffer = np.empty((0, len(query_vector)), dtype=np.float32)
    for first in range(0, len(vectors), SIMILARITY_BLOCK):
        last = min(first + SIMILARITY_BLOCK, len(vectors))
        begin, end = int(starts[first]), int(starts[last])
        if end - begin > len(buffer):
            buffer = np.empty((end - begin, len(query_vector)), dtype=np.float32)
        stacked = np.concatenate(vectors[first:last], out=buffer[: end - begin])
        np.matmul(stacked, query_vector, out=result[begin:end])
    return result


def bm25_scores(
    query_words: list[str],
    chunk_terms: list[dict[str, int]],
    document_frequency: dict[str, int],
    statistics: tuple[int, int, int],
) -> list[float]:
    """Okapi BM25 of every chunk for the query's words (0 for chunks with none of them)."""
    _files, chunks, total_terms = statistics
    average = total_terms / chunks if chunks else 1.0
    weights = {
        word: math.log(
            1
            + (chunks - document_frequency.get(word, 0) + 0.5)
            / (document_frequency.get(word, 0) + 0.5)
        )
        for word in set(query_words)
    }
    scores = []
    for terms in chunk_terms:
        score = 0.0
        for word, weight in weights.items():
            frequency = terms.get(word)
            if frequency:
                norm = BM25_K1 * (1 - BM25_B + BM25_B * sum(terms.values()) / average)
                score += weight * frequency * (BM25_K1 + 1) / (frequency + norm)
        scores.append(score)
    return scores


def fuse(rankings: Sequence[Vectors], limit: int) -> list[tuple[float, int]]:
    """Reciprocal rank fusion of score arrays (higher is better; -inf: not ranked by that one,
    ties ranked by index): the `limit` best (fused score, index), best first."""
    import numpy as np

    if not rankings:
        return []
    fused = np.zeros(len(rankings[0]), dtype=np.float64)
    for scores in rankings:
        ranked = np.flatnonzero(scores != -np.inf)
        order = ranked[np.lexsort((ranked, -scores[ranked]))]
        fused[order] += 1 / (RRF_K + np.arange(1, len(order) + 1))
    candidates = np.flatnonzero(fused > 0)
    best = candidates[np.lexsort((candidates, -fused[candidates]))[:limit]]
    return [(float(fused[index]), int(index)) for index in best]


def _pack(vectors: HalfVectors) -> bytes:
    return vectors.tobytes()


_NUMPY_IMPORT = threading.Lock()


def with_numpy(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` once numpy is wholly imported. The daemon imports numpy on first use,
    on whichever thread needs it first; two threads importing it at once (a search ranking on
    the worker while an index answer holding arrays is unpickled on another) can give one of
    them a half-made module ("cannot import name ... from partially initialized module")."""
    with _NUMPY_IMPORT:
        import numpy  # noqa: F401  (a dictionary lookup once it is imported)
    return function(*args)


def _unpack(data: bytes, rows: int, dimension: int) -> HalfVectors | None:
    """Stored vectors, or None (embed again) when they do not have the expected shape."""
    import numpy as np

    if rows == 0 or len(data) != 2 * rows * dimension:
        return None
    return np.frombuffer(data, dtype=np.float16).reshape(rows, dimension)


class ModelUnavailableError(Exception):
    pass


def _load_static_embedder() -> Embedder:
    try:
        from tools.embeddings import ModelUnavailable
        from tools.static_embeddings import StaticEmbedder
    except ImportError as exc:
        raise ModelUnavailableError(
            f"semantic search needs numpy and tokenizers, which are not installed ({exc.name})"
        ) from None
    try:
        return StaticEmbedder.load()
    except ModelUnavailable as exc:
        raise ModelUnavailableError(str(exc)) from None


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
    if state.lexical_only_reason:
        notes.append(
            f"results are ranked by words only, not by meaning: {state.lexical_only_reason}"
        )
    if not state.complete:
        notes.append(
            f"the index is still being built ({state.indexed_files} of {state.total_files} files "
            f"embedded, {state.lexical_files} searchable by words): results cover those; search "
            "again later for more"
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
    limit = min(args.max_results or DEFAULT_RESULTS, MAX_RESULTS)
    hits, state = await index.search(query, directories, limit)
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
            model=index.model_name,
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
