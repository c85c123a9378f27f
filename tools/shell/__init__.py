"""The Shell tool family: persistent sessions, one-shot and background shells, stdin, await.

Behaviour:
- Each agent (`agent_id`, "" included) has a persistent bash session, started on first use in
  the workspace (after ~/.bashrc, if it lets bash start). cd, exported and plain variables,
  functions and aliases persist. Commands run with stdin at EOF and no controlling terminal.
- A call made while the agent's session is busy runs in a one-shot shell started from the
  session's state (exported variables, functions, aliases, directory); so do interactive calls
  (stdin open for write_shell_stdin_tool_call; their first delta, `started`, gives the shell id)
  and background calls.
- Timeout or abort ends the command's processes (SIGTERM, SIGKILL after 1 s) and the rest of the
  command; the session and its state stay. `exit` or `set -e` end the session; the next call
  starts a new one where it was.
- Output streams as deltas (batched while it flows: at most every 10 ms, <= 512 KiB each).
  The result keeps the first and last 256 KiB of stdout, stderr and the interleaved output;
  past `file_output_threshold_bytes` (default and maximum 512 KiB) the full output is written
  to `<terminals_folder>/shell-output/shell-<id>-<n>.txt` (`output_location`; the last 64 kept)
  and the result holds at most that many bytes of each stream inline (first and last halves).
- Background shells write to `<terminals_folder>/shell-<id>.log`, described by
  `shell-<id>.json` (command, pid, cwd, start, exit code once ended); interactive ones copy
  their output to `shell-<id>.log` too, so await_tool_call can match patterns in it.

Layout: `handlers` (the three tool handlers), `service` (daemon-wide state), `session` +
`bash_scripts` (the persistent bash and its protocol), `jobs` (one-shot / background shells),
`foreground` (streaming, timeout, abort), `output` (caps, spill files, decoding), `results`
(every ShellResult is built there), `pipes`, `watch`. Processes are started and ended only
through exec_daemon/kernel/processes.py (where the sandbox plugs in).
"""

from tools.shell.handlers import (
    AWAIT,
    SHELL,
    WRITE_SHELL_STDIN,
    await_shell,
    shell_tool_call,
    write_shell_stdin,
)
from tools.shell.service import ShellService

__all__ = [
    "AWAIT",
    "SHELL",
    "WRITE_SHELL_STDIN",
    "ShellService",
    "await_shell",
    "shell_tool_call",
    "write_shell_stdin",
]
