"""sem_search's index (tools/sem_search.py): built in the background from daemon start, never in
the way of other calls, partial answers that say so, vectors kept on disk across restarts (only
changed files embedded again), edits followed by the watcher, the store out of the agent's
reach, and a lexical answer that says so when the static model is missing."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.v1.agent_pb2 import SemSearchArgs
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.cli import resolve_rg_path
from exec_daemon.client import ExecDaemonClient
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.state import Daemon
from tests.daemon_process import running_daemon
from tests.polling import POLL_SECONDS, WAIT_SECONDS, eventually, generous
from tests.workspace_support import case, result_of, write_call
from tools import sem_search
from tools.sem_search import INDEX_FOLDER_NAME, LEXICAL_MODEL_NAME, SemanticIndex
from tools.static_embeddings import STATIC_MODEL_VARIABLE, StaticEmbedder

REPOSITORY = Path(__file__).resolve().parent.parent
FILES = {
    "auth/passwords.py": "def verify_password(plain, stored):\n    return hmac.compare_digest(plain, stored)\n",
    "net/retry.py": "def fetch_with_backoff(url):\n    for attempt in range(5):\n        sleep(2 ** attempt)\n",
    "billing/invoice.py": "def invoice_total(lines):\n    return sum(price * quantity for price, quantity in lines)\n",
}


def write_files(workspace: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def many_files(workspace: Path, count: int) -> None:
    """`count` files of ~40 lines each: enough work that indexing takes a while."""
    for number in range(count):
        body = "\n\n".join(
            f"def handler_{number}_{part}(request):\n    value = request.get('field_{part}')\n"
            f"    return compute_{number}(value) + {part}\n"
            for part in range(10)
        )
        write_files(workspace, {f"pkg{number % 10}/module_{number}.py": body})


class CountingEmbedder:
    """The static model, writing down the first line (the path) of each chunk it embeds in
    `record` (it runs in the index's own process), optionally slowed to keep indexing running
    long enough to observe it."""

    def __init__(self, record: Path | None = None, delay: float = 0.0) -> None:
        self.inner = StaticEmbedder.load()
        self.name = self.inner.name
        self.dimension = self.inner.dimension
        self.record = record
        self.delay = delay

    def embed(self, texts: list[str]) -> Any:
        if "\n" in texts[0]:  # chunks ("path\ntext"), not a query
            if self.record is not None:
                with self.record.open("a") as record:
                    record.writelines(text.split("\n", 1)[0] + "\n" for text in texts)
            time.sleep(self.delay)
        return self.inner.embed(texts)


def counting(record: Path | None = None, delay: float = 0.0) -> Callable[[], CountingEmbedder]:
    """A factory the index process can be given (it must pickle: no lambda)."""
    return functools.partial(CountingEmbedder, record, delay)


def embedded_paths(record: Path) -> list[str]:
    return record.read_text().splitlines() if record.exists() else []


def new_index(workspace: Path, state: Path, embedder: Callable[[], Any] | None = None) -> Daemon:
    config = DaemonConfig(
        auth_token="t",
        workspace=workspace,
        rg_path=resolve_rg_path("rg"),
        terminals_folder=state / "terminals",
    )
    daemon = Daemon(config)
    daemon.provide(SemanticIndex, lambda daemon: SemanticIndex(daemon, embedder_factory=embedder))
    return daemon


async def test_indexing_never_holds_up_the_event_loop(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    many_files(workspace, 300)
    daemon = new_index(workspace, tmp_path / "state", counting(delay=0.05))
    index = daemon.service(SemanticIndex)
    try:
        await index.start(watch=False)
        loop = asyncio.get_running_loop()
        worst = 0.0
        ticks = 0
        while not await index.ready(0):
            before = loop.time()
            await asyncio.sleep(0.01)
            worst = max(worst, loop.time() - before - 0.01)
            ticks += 1
        assert ticks >= 5, "indexing finished too fast to observe"  # the embedder's delay
        # One embed batch held the loop for seconds; a loaded machine's pauses are far shorter.
        assert worst < generous(1.0), f"the event loop stalled {worst:.3f} s while indexing"
        assert index.state.indexed_files == index.state.total_files == 300
    finally:
        await daemon.aclose()


async def test_the_garbage_collector_does_not_walk_the_index(tmp_path: Path) -> None:
    """A full collection walks every tracked object: were the index's chunks and word counts
    tracked, a 100k-file index would pause the whole daemon for tenths of a second each time.
    (What stays tracked per file: its entry and the tuple of its chunks' word counts, which
    holds dicts and so cannot be untracked.)"""
    workspace = tmp_path / "workspace"
    many_files(workspace, 50)
    daemon = new_index(workspace, tmp_path / "state", counting())
    index = daemon.service(SemanticIndex)
    try:
        await index.start(watch=False)
        assert await index.ready(60)
        # A tuple is untracked by the collection that finds its items untracked: nested ones
        # take one collection per level, as in a running daemon's regular collections.
        for _level in range(2):
            gc.collect()
        entries = list(index.files.values())
        assert sum(len(entry.chunks) for entry in entries) >= 50
        tracked = [
            item
            for entry in entries
            for item in (entry.chunks, *entry.chunks, *entry.terms)
            if gc.is_tracked(item)
        ]
        assert tracked == []
    finally:
        await daemon.aclose()


async def test_a_search_before_the_index_is_complete_says_how_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "workspace"
    many_files(workspace, 200)
    write_files(workspace, FILES)
    monkeypatch.setattr(sem_search, "SEARCH_WAIT_SECONDS", 0.0)
    daemon = new_index(workspace, tmp_path / "state", counting(delay=0.5))
    index = daemon.service(SemanticIndex)
    try:
        await index.start(watch=False)

        def read_all() -> bool:
            return index.state.lexical_files == index.state.total_files > 0

        deadline = time.monotonic() + 30
        while not read_all():
            assert time.monotonic() < deadline, index.state
            await asyncio.sleep(0.02)
        hits, state = await index.search("invoice_total price quantity", [], 5)
        assert not state.complete
        assert state.indexed_files < state.total_files == 203
        assert hits and hits[0][1].endswith("billing/invoice.py"), "the words find it already"
        note = sem_search._note(state)
        assert "still being built" in note and f"of {state.total_files} files" in note
    finally:
        await daemon.aclose()


async def test_a_restart_embeds_only_the_files_that_changed(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    many_files(workspace, 20)
    write_files(workspace, FILES)
    state_folder = tmp_path / "state"
    first = tmp_path / "first-embedded"
    daemon = new_index(workspace, state_folder, counting(first))
    try:
        assert await daemon.service(SemanticIndex).ready(60)
    finally:
        await daemon.aclose()
    assert len(embedded_paths(first)) > 23, "every chunk embedded once"
    assert (state_folder / "terminals" / INDEX_FOLDER_NAME / "vectors.sqlite").is_file()

    write_files(
        workspace, {"net/retry.py": "def retry_forever():\n    while True:\n        pass\n"}
    )
    second = tmp_path / "second-embedded"
    daemon = new_index(workspace, state_folder, counting(second))
    try:
        index = daemon.service(SemanticIndex)
        assert await index.ready(60)
        assert index.state.indexed_files == 23
        hits, _ = await index.search("retry forever", [], 1)
        assert hits[0][1].endswith("net/retry.py")
    finally:
        await daemon.aclose()
    assert embedded_paths(second) == ["net/retry.py"]


async def search(client: ExecDaemonClient, query: str) -> Any:
    call = ToolCall()
    call.sem_search_tool_call.args.CopyFrom(SemSearchArgs(query=query, max_results=5))
    outcome = await client.run(call)
    assert outcome.result is not None, outcome.error
    return outcome.result.sem_search_tool_call.result


async def poll_search(
    client: ExecDaemonClient, query: str, done: Callable[[Any], bool], seconds: float = 30
) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        result = await search(client, query)
        if done(result):
            return result
        assert time.monotonic() < deadline, result
        await asyncio.sleep(0.05)


def top_path(result: Any) -> str:
    return result.success.results[0].path if result.success.results else ""


async def test_the_daemon_indexes_at_start_and_follows_edits(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    write_files(workspace, FILES)
    state_folder = tmp_path / "state"
    with running_daemon(workspace, state_folder) as running:
        store = state_folder / "terminals" / INDEX_FOLDER_NAME / "vectors.sqlite"
        deadline = time.monotonic() + 30
        while not store.is_file():  # indexing began without any search asking for it
            assert time.monotonic() < deadline, "no index was built at start"
            await asyncio.sleep(0.05)
        async with running.client() as client:
            await poll_search(client, "password", lambda r: r.success.index_complete)
            write_files(workspace, {"weather/forecast.py": "def tomorrow_rain_forecast(city):\n"})
            found = await poll_search(
                client, "rain forecast", lambda r: top_path(r) == "weather/forecast.py"
            )
            assert found.success.model == StaticEmbedder.name
            (workspace / "billing" / "invoice.py").write_text("def unrelated():\n    pass\n")
            await poll_search(
                client,
                "invoice total",
                lambda r: (
                    "billing/invoice.py" not in top_path(r)
                    or "unrelated" in r.success.results[0].contents
                ),
            )


async def test_the_agent_cannot_write_the_index_store(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    write_files(workspace, FILES)
    state_folder = tmp_path / "state"
    folder = state_folder / "terminals" / INDEX_FOLDER_NAME
    with running_daemon(workspace, state_folder) as running:
        async with running.client() as client:
            await poll_search(client, "password", lambda r: r.success.index_complete)
            store = folder / "vectors.sqlite"
            before = store.read_bytes()
            for target in (
                store,
                folder / "planted.sqlite",
                folder / ".." / INDEX_FOLDER_NAME / "x",
            ):
                result = await result_of(client, write_call(target, "garbage"))
                assert case(result) in {"permission_denied", "rejected"}, result
            link = workspace / "index-link"
            link.symlink_to(folder)
            result = await result_of(client, write_call(link / "vectors.sqlite", "garbage"))
            assert case(result) in {"permission_denied", "rejected"}, result
            assert store.read_bytes()[:100] == before[:100]
            assert not (folder / "planted.sqlite").exists()
    assert oct(folder.stat().st_mode & 0o777) == "0o700"


async def test_without_the_static_model_the_answer_is_lexical_and_says_so(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    write_files(workspace, FILES)
    env = {STATIC_MODEL_VARIABLE: str(tmp_path / "no-model")}
    with running_daemon(workspace, tmp_path / "state", env=env) as running:
        async with running.client() as client:
            result = await poll_search(client, "invoice total", lambda r: r.success.index_complete)
    assert result.WhichOneof("result") == "success"
    assert top_path(result) == "billing/invoice.py"
    assert result.success.model == LEXICAL_MODEL_NAME
    assert "words only" in result.success.note and "no-model" in result.success.note


async def test_a_damaged_store_is_embedded_again_not_trusted(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    write_files(workspace, FILES)
    state_folder = tmp_path / "state"
    daemon = new_index(workspace, state_folder)
    try:
        assert await daemon.service(SemanticIndex).ready(60)
    finally:
        await daemon.aclose()
    store = state_folder / "terminals" / INDEX_FOLDER_NAME / "vectors.sqlite"
    with contextlib.closing(sqlite3.connect(store)) as db, db:
        rows = db.execute("UPDATE vectors SET data = x'0000'").rowcount
    assert rows == len(FILES)
    again = tmp_path / "embedded-again"
    daemon = new_index(workspace, state_folder, counting(again))
    try:
        index = daemon.service(SemanticIndex)
        assert await index.ready(60)
        hits, _ = await index.search("invoice total", [], 1)
        assert hits[0][1].endswith("billing/invoice.py")
    finally:
        await daemon.aclose()
    assert len(embedded_paths(again)) == len(FILES), "each damaged entry embedded again"


async def test_the_interpreter_favours_other_calls_only_while_indexing(tmp_path: Path) -> None:
    """While an update runs, the interpreter's switch interval is lowered (so the event loop
    waits less for the GIL) and full garbage collections are deferred (they walk every entry of
    the index); once the index is complete the daemon is back to its settings."""
    workspace = tmp_path / "workspace"
    many_files(workspace, 100)
    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    daemon = new_index(workspace, tmp_path / "state", counting(delay=0.02))
    index = daemon.service(SemanticIndex)
    try:
        await index.start(watch=False)
        await asyncio.sleep(0)  # the update task starts
        seen_while_indexing = sys.getswitchinterval(), gc.get_threshold()
        assert await index.ready(60)
        assert seen_while_indexing[0] == pytest.approx(sem_search.INDEXING_SWITCH_INTERVAL_S)
        assert sem_search.INDEXING_SWITCH_INTERVAL_S < interval
        assert seen_while_indexing[1][2] == sem_search.INDEXING_FULL_COLLECTION_THRESHOLD
        assert seen_while_indexing[1][:2] == thresholds[:2]
        assert (sys.getswitchinterval(), gc.get_threshold()) == (interval, thresholds)
    finally:
        await daemon.aclose()
    assert (sys.getswitchinterval(), gc.get_threshold()) == (interval, thresholds)


async def test_closing_mid_index_restores_the_interpreter_settings(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    many_files(workspace, 200)
    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    daemon = new_index(workspace, tmp_path / "state", counting(delay=0.05))
    index = daemon.service(SemanticIndex)
    await index.start(watch=False)
    await asyncio.sleep(0)  # the update task starts
    assert sys.getswitchinterval() < interval
    assert not await index.ready(0)
    await daemon.aclose()
    assert (sys.getswitchinterval(), gc.get_threshold()) == (interval, thresholds)


def process_exists(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def index_process_pids(index: SemanticIndex) -> list[int]:
    process = index._process
    return [] if process is None else [process.helper.pid]


async def test_the_index_process_is_replaced_if_it_dies_and_ends_with_the_index(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    write_files(workspace, FILES)
    daemon = new_index(workspace, tmp_path / "state")
    index = daemon.service(SemanticIndex)
    try:
        assert await index.ready(60)
        [first] = index_process_pids(index)
        os.kill(first, signal.SIGKILL)
        write_files(workspace, {"weather/forecast.py": "def tomorrow_rain_forecast(city):\n"})
        deadline = time.monotonic() + 60
        while True:  # the first search after the death may only have words; then a new process
            hits, state = await index.search("will it rain tomorrow", [], 1)
            if state.complete and hits[0][1].endswith("weather/forecast.py"):
                break
            assert time.monotonic() < deadline, (hits, state)
            await asyncio.sleep(0.2)
        [second] = index_process_pids(index)
        assert second != first
    finally:
        await daemon.aclose()
    assert not process_exists(second), "the index process outlived the index"


async def test_an_idle_index_process_ends_and_the_next_search_starts_another(
    tmp_path: Path,
) -> None:
    """Unused for `process_idle_seconds`, the index process ends (its memory goes back to the
    machine); the next search starts another, which embeds the query as the first did."""
    workspace = tmp_path / "workspace"
    write_files(workspace, FILES)
    daemon = new_index(workspace, tmp_path / "state")
    index = daemon.service(SemanticIndex)
    index.process_idle_seconds = 0.5
    try:
        assert await index.ready(60)
        [first] = index_process_pids(index)
        deadline = time.monotonic() + 20
        while index_process_pids(index) or process_exists(first):
            assert time.monotonic() < deadline, "the idle index process did not end"
            await asyncio.sleep(0.1)
        hits, state = await index.search("retry a request, waiting longer each time", [], 1)
        assert state.complete and not state.lexical_only_reason
        assert hits[0][1].endswith("net/retry.py")
        [second] = index_process_pids(index)
        assert second != first
    finally:
        await daemon.aclose()
    assert not process_exists(second), "the index process outlived the index"


async def search_once_taken_in(
    index: SemanticIndex, query: str, reported: set[str], changed: list[Path]
) -> list[str]:
    """The paths a search for `query` finds once the watcher has reported every one of the
    `changed` paths and a search finds the index complete (all it was told taken in). Under load
    the watcher may report one edit of a pair before the other: a search that already shows the
    first says nothing about the second."""
    await eventually(
        lambda: {str(path) for path in changed} <= reported,
        what=f"the watcher to report {changed} (it reported {reported})",
    )
    deadline = time.monotonic() + generous(WAIT_SECONDS)
    while True:
        hits, state = await index.search(query, [], 3)
        if state.complete:
            return [hit[1] for hit in hits]
        assert time.monotonic() < deadline, f"the index never took in {changed}: {state}"
        await asyncio.sleep(POLL_SECONDS)


async def test_a_large_workspace_follows_edits_through_the_watcher_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a large workspace, where listing and stat'ing every file is slow (a second or two at
    100k files), neither a search nor the watcher does it: edits and deletions of indexed files
    update those files only; a new file has its folder listed (it may be ignored), a new folder
    moved in is listed whole; only a changed ignore file has the workspace listed again."""
    workspace = tmp_path / "workspace"
    write_files(workspace, FILES)
    monkeypatch.setattr(sem_search, "SEARCH_REFRESH_MAX_FILES", 0)  # as if it were large
    listings: list[Path] = []
    list_files = sem_search.list_files

    async def counted(
        daemon: Daemon, folder: Path, *limits: float, depth: int | None = None
    ) -> tuple[list[str], bool]:
        listings.append(folder)
        return await list_files(daemon, folder, *limits, depth=depth)  # type: ignore[arg-type]

    monkeypatch.setattr(sem_search, "list_files", counted)
    daemon = new_index(workspace, tmp_path / "state")
    index = daemon.service(SemanticIndex)
    reported: set[str] = set()
    index.on_changes = lambda changes: reported.update(path for _change, path in changes)
    try:
        await index.start()
        assert await index.ready(60)
        assert len(listings) == 1
        (workspace / "net" / "retry.py").write_text("def exponential_backoff_jitter():\n    pass\n")
        (workspace / "billing" / "invoice.py").unlink()
        paths = await search_once_taken_in(
            index,
            "exponential backoff jitter",
            reported,
            [workspace / "net" / "retry.py", workspace / "billing" / "invoice.py"],
        )
        assert paths[0].endswith("net/retry.py"), paths
        assert not any(path.endswith("invoice.py") for path in paths)
        assert index.state.total_files == 2
        assert len(listings) == 1, "an edit and a deletion listed the workspace again"
        write_files(workspace, {"net/forecast.py": "def tomorrow_rain_forecast(city):\n"})
        paths = await search_once_taken_in(
            index, "tomorrow rain forecast", reported, [workspace / "net" / "forecast.py"]
        )
        assert paths[0].endswith("net/forecast.py"), paths
        assert listings[1:] == [workspace / "net"], "a new file: its folder alone"
        assert index.state.total_files == 3
        # A folder moved in: the watcher reports the folder, not its files.
        outside = tmp_path / "elsewhere" / "mail"
        write_files(outside, {"notify.py": "def send_welcome_email(user):\n"})
        outside.rename(workspace / "mail")
        paths = await search_once_taken_in(
            index, "send a welcome email", reported, [workspace / "mail"]
        )
        assert paths[0].endswith("mail/notify.py"), paths
        assert listings[2:] == [workspace / "mail"]
        # Ignored by an .ignore file in its folder: listed, not indexed.
        write_files(workspace, {"net/.ignore": "secret_*.py\n"})
        await eventually(lambda: len(listings) == 4)
        assert listings[3:] == [workspace], "a changed ignore file: the workspace again"
        write_files(
            workspace,
            {
                "net/secret_keys.py": "def rotate_signing_keys():\n",
                "net/rotation.py": "def rotate_log_files():\n",
            },
        )
        paths = await search_once_taken_in(
            index,
            "rotate log files",
            reported,
            [workspace / "net" / "secret_keys.py", workspace / "net" / "rotation.py"],
        )
        assert paths[0].endswith("net/rotation.py"), paths
        hits, _state = await index.search("rotate signing keys", [], 5)
        assert not any(hit[1].endswith("secret_keys.py") for hit in hits)
        assert set(listings[4:]) == {workspace / "net"}
    finally:
        await daemon.aclose()


async def test_the_index_process_runs_the_daemons_code_not_modules_planted_in_the_workspace(
    tmp_path: Path,
) -> None:
    """The daemon may run in the workspace (`./scripts/serve` serves the current folder): a
    Python started there would import `tools/` or `numpy.py` from it before its own, i.e. run the
    agent's code unconfined. The index process is isolated (-I) and given the daemon's code."""
    workspace = tmp_path / "workspace"
    write_files(workspace, FILES)
    marker = tmp_path / "planted-code-ran"
    planted = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    write_files(
        workspace,
        {"tools/__init__.py": planted, "tools/sem_search.py": planted, "numpy.py": planted},
    )
    # The daemon itself started as the image starts it (isolated, its own code first).
    code = f"import sys; sys.path.insert(0, {str(REPOSITORY)!r}); from exec_daemon.cli import main; main()"
    isolated = [sys.executable, "-I", "-c", code]
    with running_daemon(workspace, tmp_path / "state", argv=isolated) as running:
        async with running.client() as client:
            result = await poll_search(client, "invoice total", lambda r: r.success.index_complete)
    assert top_path(result) == "billing/invoice.py"
    assert result.success.model != LEXICAL_MODEL_NAME
    assert not marker.exists(), marker.read_text()
