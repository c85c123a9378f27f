"""Reads a growing output log and looks for a pattern in it (await_tool_call)."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

from tools.shell.output import StreamDecoder

# A match may span at most this much already-searched text plus the new text.
CARRY_CHARS = 64 * 1024
READ_BYTES = 4 << 20
TAIL_BYTES = 4096


class LogWatcher:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._carry = ""
        self._decoder = StreamDecoder()

    def _read_new(self) -> bytes:
        try:
            with open(self.path, "rb") as log_file:
                log_file.seek(self._offset)
                data = log_file.read(READ_BYTES)
        except OSError:
            return b""
        self._offset += len(data)
        return data

    async def search(self, pattern: re.Pattern[str]) -> str | None:
        """The first match in the output written since the shell started, if any yet."""
        while True:
            data = await asyncio.to_thread(self._read_new)
            if not data and self._offset:
                return None
            text = self._carry + self._decoder.decode(data)
            found = pattern.search(text)
            if found is not None:
                return found.group(0)
            self._carry = text[-CARRY_CHARS:]
            if len(data) < READ_BYTES:
                return None

    async def tail(self) -> str:
        def read_tail() -> bytes:
            try:
                with open(self.path, "rb") as log_file:
                    size = log_file.seek(0, os.SEEK_END)
                    log_file.seek(max(0, size - TAIL_BYTES))
                    return log_file.read(TAIL_BYTES)
            except OSError:
                return b""

        data = await asyncio.to_thread(read_tail)
        return data.decode("utf-8", "replace")
