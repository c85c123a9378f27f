"""tools/shell/session.py on its own: the bash protocol, whatever fds the daemon hands it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from exec_daemon.kernel.processes import UNCONFINED
from tools.shell.bash_scripts import SESSION_LOOP, SESSION_LOOP_NAME
from tools.shell.session import ShellSession


async def test_session_works_when_its_pipes_land_on_the_protocol_fds(tmp_path: Path) -> None:
    (tmp_path / SESSION_LOOP_NAME).write_text(SESSION_LOOP)
    # Fill the fd table so the status pipe the session opens gets number 62, the very
    # number bash writes its status records to.
    held = []
    while (fd := os.open("/dev/null", os.O_RDONLY)) < 59:
        held.append(fd)
    os.close(fd)
    session = ShellSession(1, "agent", tmp_path / "session-1", UNCONFINED)
    try:
        await session.start(str(tmp_path), str(tmp_path), dict(os.environ), "", None)
        chunks: list[tuple[str, bytes]] = []
        done = await session.submit(
            "echo hi; echo oops >&2; cd /", "", lambda *c: chunks.append(c), ""
        )
        status = await asyncio.wait_for(done, 10)
        assert (status.exit_code, status.cwd) == (0, "/")
        assert sorted(chunks) == [("stderr", b"oops\n"), ("stdout", b"hi\n")]
    finally:
        await session.close(grace=0.2)
        for fd in held:
            os.close(fd)
