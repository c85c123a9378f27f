"""The session record's store on its own (exec_daemon/telemetry/session_record.py): bounded on
disk with the oldest dropped and counted, long strings by reference, a secret split across
terminal chunks still redacted, one writer per folder."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.v1.shell_pb2 import ShellArgs
from exec_daemon.guards.redaction import SecretMatcher, json_text_redaction
from exec_daemon.telemetry import session_record
from exec_daemon.telemetry.session_record import INLINE_CHARS, SessionRecord

SECRET = "split-secret-value"


def redact(text: str) -> str:
    return text.replace(SECRET, "[REDACTED]")


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_the_oldest_entries_are_dropped_and_counted_past_the_cap(tmp_path: Path) -> None:
    record = SessionRecord(tmp_path / "record", max_bytes=256 * 1024)
    record.start()
    try:
        for number in range(3000):
            record.add("call", "main", {"call_id": number, "tool": "x", "pad": "p" * 400})
            if number % 500 == 0:
                record.flush()
        record.flush()
        kept = [entry for entry, _line in record.read()]
    finally:
        record.close()
    assert folder_bytes(tmp_path / "record") <= 256 * 1024 + record.segment_bytes
    dropped = [entry["total"] for entry in kept if entry["kind"] == "dropped"][-1]
    calls = [entry for entry in kept if entry["kind"] == "call"]
    assert dropped > 0 and len(calls) + dropped == 3000
    assert calls[-1]["call_id"] == 2999
    seqs = [entry["seq"] for entry in kept]
    assert seqs == sorted(seqs)


def test_long_strings_are_kept_by_reference(tmp_path: Path) -> None:
    record = SessionRecord(tmp_path / "record", redact=redact)
    record.start()
    try:
        long = "x" * (INLINE_CHARS + 10) + SECRET
        record.add("result", "main", {"call_id": 1, "stdout": long})
        record.flush()
        [(entry, _line)] = list(record.read())
        reference = entry["stdout"]
        assert reference["chars"] == len(redact(long))
        assert record.blob(reference["ref"]) == redact(long)
        assert record.blob("../../etc/passwd") is None
    finally:
        record.close()


def test_a_secret_split_across_terminal_chunks_is_redacted(tmp_path: Path) -> None:
    record = SessionRecord(tmp_path / "record", redact=redact)
    record.start()
    try:
        half = len(SECRET) // 2
        record.terminal_output("t1", f"a {SECRET[:half]}".encode())
        record.terminal_output("t1", f"{SECRET[half:]} b".encode())
        record.flush()
        lines = (tmp_path / "record").glob("segment-*.jsonl")
        text = "".join(path.read_text() for path in lines)
    finally:
        record.close()
    assert SECRET not in text and SECRET[:half] not in text
    [entry] = [json.loads(line) for line in text.splitlines()]
    assert "".join(t for _at, t in entry["events"]) == "a [REDACTED] b"


def test_a_second_writer_of_a_folder_records_nothing(tmp_path: Path) -> None:
    first = SessionRecord(tmp_path / "record")
    second = SessionRecord(tmp_path / "record")
    first.start()
    try:
        second.start()
        assert first.enabled and not second.enabled
        second.add("call", "main", {"call_id": 1})
        first.add("call", "main", {"call_id": 2})
        first.flush()
        assert [e["call_id"] for e, _ in first.read()] == [2]
    finally:
        first.close()
        second.close()


def test_a_secret_json_escapes_is_redacted_as_json_writes_it(tmp_path: Path) -> None:
    quoted = 'pa"ss\\word-with-quote'
    store = SimpleNamespace(matcher=SecretMatcher([quoted]))
    values = []
    for name, redact_json in (("plain", None), ("escaped", json_text_redaction(store))):  # type: ignore[arg-type]
        record = SessionRecord(
            tmp_path / name, redact=store.matcher.redact, redact_json=redact_json
        )
        record.start()
        try:
            record.add("call", "main", {"args": {"command": f"echo {quoted}"}})
            record.flush()
            [(entry, _line)] = list(record.read())
            values.append(entry["args"]["command"])
        finally:
            record.close()
    # The raw text's matcher does not see the secret inside JSON (the control); the JSON one does.
    assert values == [f"echo {quoted}", "echo [REDACTED]"]


def test_a_huge_result_is_recorded_by_its_size(tmp_path: Path) -> None:
    record = SessionRecord(tmp_path / "record")
    record.start()
    try:
        small = ShellArgs(command="echo hi").SerializeToString()
        huge = ShellArgs(command="x" * (2 << 20)).SerializeToString()
        record.add("result", "main", {"call_id": 1}, {"result": (ShellArgs, small)})
        record.add("result", "main", {"call_id": 2}, {"result": (ShellArgs, huge)})
        record.flush()
        first, second = (entry for entry, _line in record.read())
    finally:
        record.close()
    assert first["result"] == {"command": "echo hi"}
    assert "result" not in second and second["result_bytes"] == len(huge)


def test_entries_past_a_full_queue_are_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_record, "MAX_WAITING", 5)
    record = SessionRecord(tmp_path / "record")
    try:
        for number in range(8):  # queued before the writer starts: 3 find the queue full
            record.add("call", "main", {"call_id": number})
        record.start()
        record.flush()
        kept = [entry for entry, _line in record.read()]
    finally:
        record.close()
    assert [e["call_id"] for e in kept if e["kind"] == "call"] == [0, 1, 2, 3, 4]
    [dropped] = [e for e in kept if e["kind"] == "dropped"]
    assert dropped["count"] == 3 and dropped["reason"] == "queue full"
