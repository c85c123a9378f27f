"""What the daemon defers while it starts, and that each deferred thing still happens.

The garbage collector is off while the daemon starts (exec_daemon/cli.py) and on once it serves
or waits for InitSandbox (exec_daemon/server.py: freeze_start_up_objects): a daemon that never
turned it on again would keep every reference cycle its calls leave. A probe thread, started
in the daemon's own process by a launcher that then runs the real command line, makes a cycle
every few tens of ms and writes whether the collector freed it.

sem_search's index is started once the port is served (not before, where it held up the first
answer): it must still be built without any search asking for it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.daemon_process import running_daemon
from tests.polling import wait_until
from tools.sem_search import INDEX_FOLDER_NAME

# Runs in the daemon's process before its command line: a cycle per round, made unreachable,
# then enough container allocations for the collector's youngest generation to run if it is on.
PROBE = """
import sys, threading, time, weakref

report = sys.argv.pop(1)


class Node:
    pass


def probe():
    while True:
        node = Node()
        node.itself = node
        freed = weakref.ref(node)
        del node
        for _ in range(20):
            [[] for _ in range(1000)]
        with open(report, "a") as out:
            out.write("collected\\n" if freed() is None else "kept\\n")
        time.sleep(0.02)


threading.Thread(target=probe, daemon=True).start()
from exec_daemon.cli import main

main()
"""


def probed_argv(report: Path) -> list[str]:
    return [sys.executable, "-P", "-c", PROBE, str(report)]


def rounds(report: Path) -> list[str]:
    return report.read_text().split() if report.exists() else []


def collected_since(report: Path, seen: int) -> bool:
    """Whether a round after the first `seen` ones found its cycle collected."""
    return "collected" in rounds(report)[seen:]


def test_the_collector_is_off_while_the_daemon_starts_and_on_once_it_serves(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    report = tmp_path / "gc-rounds"
    with running_daemon(workspace, tmp_path / "state", argv=probed_argv(report)):
        serving = len(rounds(report))
        wait_until(lambda: collected_since(report, serving), what="a cycle collected while serving")
    # Start-up (the server's imports above all) ran without collections: rounds in it kept
    # their cycle. Each lasts a few ms; start-up lasts tenths of a second even on an idle machine.
    assert "kept" in rounds(report)[:serving], rounds(report)[:serving]


def test_a_daemon_waiting_for_init_sandbox_collects_garbage(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    report = tmp_path / "gc-rounds"
    with running_daemon(workspace, tmp_path / "state", "--wait-for-init", argv=probed_argv(report)):
        waiting = len(rounds(report))
        wait_until(
            lambda: collected_since(report, waiting),
            what="a cycle collected while waiting for InitSandbox",
        )


def test_the_semantic_index_is_built_with_no_search_asking(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "notes.py").write_text("def greet(name):\n    return f'hello {name}'\n")
    state = tmp_path / "state"
    with running_daemon(workspace, state):
        store = state / "terminals" / INDEX_FOLDER_NAME / "vectors.sqlite"
        wait_until(store.exists, seconds=120, what=f"the index's store at {store}")
