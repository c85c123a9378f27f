"""The Shell tool family: persistent sessions, one-shot and background shells, stdin, await.

Layout: `handlers` (the three tool handlers), `service` (daemon-wide state), `session` +
`bash_scripts` (the persistent bash and its protocol), `jobs` (one-shot / background shells),
`foreground` (streaming, timeout, abort), `output` (caps, spill files, decoding), `results`
(every ShellResult is built there), `pipes`, `watch`.
"""

from tools.shell.handlers import await_shell, shell_tool_call, write_shell_stdin
from tools.shell.service import ShellService

__all__ = ["ShellService", "await_shell", "shell_tool_call", "write_shell_stdin"]
