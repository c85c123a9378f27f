"""sem_search_tool_call (tools/sem_search.py) on the real daemon with the real model: queries
that share no words with the code find the right file among decoys; the index follows edits."""

from __future__ import annotations

import asyncio
import itertools
import math
import pickle
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.v1.agent_pb2 import SemSearchArgs
from agent.v1.tool_call_pb2 import ToolCall
from exec_daemon.client import ExecDaemonClient
from tests.daemon_process import RunningDaemon, running_daemon
from tests.polling import POLL_SECONDS, generous
from tests.test_sem_search_index import new_index
from tools.sem_search import RRF_K, SemanticIndex, chunk_text, fuse, words
from tools.static_embeddings import StaticEmbedder

CORPUS = {
    "auth/passwords.py": """
import hashlib, hmac, os

def hash_password(plain: str) -> bytes:
    salt = os.urandom(16)
    return salt + hashlib.pbkdf2_hmac("sha256", plain.encode(), salt, 200_000)

def verify_password(plain: str, stored: bytes) -> bool:
    salt, digest = stored[:16], stored[16:]
    candidate = hashlib.pbkdf2_hmac("sha256", plain.encode(), salt, 200_000)
    return hmac.compare_digest(candidate, digest)
""",
    "net/retry.py": """
import time, urllib.request

def fetch_with_backoff(url: str, attempts: int = 5) -> bytes:
    delay = 0.5
    for attempt in range(attempts):
        try:
            return urllib.request.urlopen(url, timeout=10).read()
        except OSError:
            time.sleep(delay)
            delay *= 2
    raise RuntimeError(f"gave up on {url}")
""",
    "images/thumbnails.py": """
from PIL import Image

def make_thumbnail(source: str, target: str, width: int = 128) -> None:
    with Image.open(source) as picture:
        ratio = width / picture.width
        picture.resize((width, int(picture.height * ratio))).save(target)
""",
    "billing/invoice.py": """
from decimal import Decimal

VAT_RATE = Decimal("0.20")

def invoice_total(lines: list[tuple[str, Decimal, int]]) -> Decimal:
    net = sum(price * quantity for _name, price, quantity in lines)
    return (net * (1 + VAT_RATE)).quantize(Decimal("0.01"))
""",
    "storage/cache.py": """
from collections import OrderedDict

class LruCache:
    def __init__(self, capacity: int) -> None:
        self.capacity, self.items = capacity, OrderedDict()

    def get(self, key):
        if key in self.items:
            self.items.move_to_end(key)
        return self.items.get(key)
""",
    "mail/notify.py": """
import smtplib
from email.message import EmailMessage

def send_welcome_email(address: str) -> None:
    message = EmailMessage()
    message["To"], message["Subject"] = address, "Welcome aboard"
    with smtplib.SMTP("localhost") as smtp:
        smtp.send_message(message)
""",
    "docs/README.md": "# Project\n\nInternal tools for the shop. Run `make test` before pushing.\n",
}

QUERIES = [
    ("where is a login secret checked against what we saved", "auth/passwords.py"),
    ("repeat a failed download after pausing longer", "net/retry.py"),
    ("shrink a photo into a small preview", "images/thumbnails.py"),
    ("how much customers owe including sales tax", "billing/invoice.py"),
    ("greet newcomers by letter", "mail/notify.py"),
]


def write_corpus(workspace: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content.lstrip("\n"))


@pytest.fixture(scope="module")
def corpus_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDaemon]:
    root = tmp_path_factory.mktemp("sem")
    workspace = root / "workspace"
    workspace.mkdir()
    write_corpus(workspace, CORPUS)
    write_corpus(
        workspace, {".cursorignore": "private/\n", "private/keys.py": CORPUS["auth/passwords.py"]}
    )
    with running_daemon(workspace, root / "state") as running:
        yield running


@pytest.fixture
async def corpus_client(corpus_daemon: RunningDaemon) -> AsyncIterator[ExecDaemonClient]:
    async with corpus_daemon.client() as connected:
        # The index is built in the background from the daemon's start: these tests judge
        # the ranking of a complete index.
        await search_complete(connected, "x")
        yield connected


async def search(client: ExecDaemonClient, query: str, **args: Any) -> Any:
    call = ToolCall()
    call.sem_search_tool_call.args.CopyFrom(SemSearchArgs(query=query, **args))
    outcome = await client.run(call)
    assert outcome.error is None, outcome.error
    assert outcome.result is not None
    return outcome.result.sem_search_tool_call.result


async def search_complete(client: ExecDaemonClient, query: str, **args: Any) -> Any:
    """The answer of a search made once the index holds every change made before it: a search
    waits SEARCH_WAIT_SECONDS at most, then answers from what is indexed (index_complete false),
    which under load is what an edit just made left."""
    deadline = time.monotonic() + generous(120)
    while not (result := await search(client, query, **args)).success.index_complete:
        assert time.monotonic() < deadline, "the index never caught up"
        await asyncio.sleep(POLL_SECONDS)
    return result


def paths(result: Any) -> list[str]:
    return [chunk.path for chunk in result.success.results]


@pytest.mark.parametrize(("query", "expected"), QUERIES)
async def test_a_query_finds_the_file_that_means_it(
    corpus_client: ExecDaemonClient, query: str, expected: str
) -> None:
    # Meaning only: no word of the query is in any file or path, so the lexical ranking alone
    # finds nothing and the answer is the semantic ranking's.
    assert not {word for name, text in CORPUS.items() for word in words(f"{name}\n{text}")} & set(
        words(query)
    )
    result = await search(corpus_client, query, max_results=3)
    assert result.WhichOneof("result") == "success", result
    # The static model (tools/static_embeddings.py) is weaker than MiniLM on queries that share
    # no word with the code: the right file is among the first three, not always first.
    found = paths(result)
    assert expected in found, [(c.path, round(c.score, 3)) for c in result.success.results]
    best = result.success.results[found.index(expected)]
    assert best.start_line == 1 and best.end_line >= 3
    assert best.contents.splitlines()[0] == CORPUS[expected].lstrip("\n").splitlines()[0]
    scores = [chunk.score for chunk in result.success.results]
    assert scores == sorted(scores, reverse=True) and 0 < scores[0] <= 1
    assert result.success.index_complete
    assert result.success.model == StaticEmbedder.name


async def test_target_directories_limit_the_search(corpus_client: ExecDaemonClient) -> None:
    result = await search(
        corpus_client, QUERIES[0][0], target_directories=["net", "images/"], max_results=10
    )
    assert set(paths(result)) == {"net/retry.py", "images/thumbnails.py"}


async def test_hidden_and_outside_paths_are_never_searched(
    corpus_client: ExecDaemonClient,
) -> None:
    result = await search(corpus_client, QUERIES[0][0], max_results=50)
    assert not any(path.startswith("private/") for path in paths(result))
    outside = await search(corpus_client, "x", target_directories=["/etc"])
    assert outside.error.code == "invalid_argument"
    hidden = await search(corpus_client, "x", target_directories=["private"])
    assert hidden.error.code == "permission_denied"
    empty = await search(corpus_client, "   ")
    assert empty.error.code == "invalid_argument"


async def test_the_index_follows_edits_and_deletions(
    client: ExecDaemonClient, workspace: Path
) -> None:
    write_corpus(workspace, CORPUS)
    first = await search_complete(client, "weather forecast for tomorrow")
    assert "weather.py" not in " ".join(paths(first))
    write_corpus(
        workspace,
        {
            "billing/invoice.py": '''
def forecast(city: str) -> str:
    """Tomorrow's weather: temperature, rain and wind for the city."""
    return f"{city}: 18 degrees, light rain"
''',
        },
    )
    (workspace / "mail" / "notify.py").unlink()
    again = await search_complete(client, "weather forecast for tomorrow", max_results=20)
    assert "billing/invoice.py" in paths(again)[:3]
    assert "mail/notify.py" not in paths(again)
    assert again.success.total_files == len(CORPUS) - 1
    old_meaning = await search_complete(client, QUERIES[3][0], max_results=20)
    contents = " ".join(chunk.contents for chunk in old_meaning.success.results)
    assert "VAT_RATE" not in contents, "the old content is gone from the index"


async def test_an_index_can_be_awaited_until_complete(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    write_corpus(workspace, CORPUS)
    daemon = new_index(workspace, tmp_path)
    index = daemon.service(SemanticIndex)
    try:
        assert not await index.ready(0.0)
        assert await index.ready(60.0)
        state = index.state
        assert state.complete and state.indexed_files == state.total_files == len(CORPUS)
    finally:
        await daemon.aclose()


def test_chunks_cover_every_line_and_prefer_blank_lines() -> None:
    text = "\n".join(f"line {n}" if n % 12 else "" for n in range(1, 80))
    chunks = chunk_text(text)
    assert chunks[0].start_line == 1
    for previous, current in itertools.pairwise(chunks):
        assert current.start_line == previous.end_line + 1
    assert chunks[-1].end_line == 79
    assert all(chunk.end_line - chunk.start_line < 30 for chunk in chunks)
    assert chunks[0].end_line == 11, "cut before the first blank line after 8 lines"


def fused_by_definition(rankings: list[list[float]], limit: int) -> list[tuple[float, int]]:
    """Reciprocal rank fusion written out: each list ranks its finite scores, best first, ties
    by index; an entry's fused score is the sum of 1 / (RRF_K + rank) over the lists."""
    fused: dict[int, float] = {}
    for scores in rankings:
        ranked = sorted(
            (i for i, s in enumerate(scores) if s != -math.inf), key=lambda i: -scores[i]
        )
        for rank, index in enumerate(ranked, start=1):
            fused[index] = fused.get(index, 0.0) + 1 / (RRF_K + rank)
    return sorted(((score, index) for index, score in fused.items()), key=lambda h: (-h[0], h[1]))[
        :limit
    ]


def test_fused_ranking_is_reciprocal_rank_fusion_with_ties_by_position() -> None:
    generator = np.random.default_rng(7)
    for size, limit in ((1, 5), (50, 10), (3000, 50)):
        # Few distinct values: many ties; -inf: entries a ranking leaves out.
        lexical = generator.integers(0, 5, size).astype(np.float32)
        lexical[lexical == 0] = -np.inf
        semantic = generator.integers(-3, 3, size).astype(np.float32)
        expected = fused_by_definition([lexical.tolist(), semantic.tolist()], limit)
        got = fuse([lexical, semantic], limit)
        assert [index for _score, index in got] == [index for _score, index in expected]
        assert [score for score, _index in got] == pytest.approx([s for s, _i in expected])


RACE = """
import pickle, sys, threading
import tools.sem_search as sem_search
assert "numpy" not in sys.modules
answer = bytes.fromhex(sys.argv[1])
barrier, failures = threading.Barrier(2), []

def run(function, *args):
    barrier.wait()
    try:
        sem_search.with_numpy(function, *args)
    except Exception as exc:
        failures.append(repr(exc))

threads = [
    threading.Thread(target=run, args=(pickle.loads, answer)),
    threading.Thread(target=run, args=(sem_search._unpack, bytes(6), 1, 3)),
]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(failures)
"""


def test_numpy_imported_from_two_threads_at_once_is_whole_in_both() -> None:
    """A search ranking while the index process's first answer (arrays) is unpickled: both
    import numpy for the first time, on two threads (without the lock, 13 fresh interpreters of
    15 failed with "partially initialized module")."""
    answer = pickle.dumps((True, [np.zeros((1, 3), np.float16)])).hex()
    for _ in range(4):
        run = subprocess.run(
            [sys.executable, "-c", RACE, answer],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=Path(__file__).resolve().parent.parent,
            check=False,
        )
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.strip() == "[]"
