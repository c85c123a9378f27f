"""environment.json's `user`: the account its `install`, `start` and `terminals` run as.

The daemon switches to it only when it runs as root (setpriv: user, group and that user's
supplementary groups; HOME, USER, LOGNAME and SHELL set to the account's); naming the daemon's
own user changes nothing; any other user, or one this machine does not know, is an error that
says so (the commands are then not run, rather than run as the wrong user).
"""

from __future__ import annotations

import os
import pwd
import shutil
from dataclasses import dataclass

# Accounts whose login shell refuses to run anything: their commands run in bash.
NO_LOGIN_SHELLS = frozenset({"nologin", "false"})


class AccountError(ValueError):
    """environment.json's `user` cannot be honoured; the message says why."""


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int
    home: str
    shell: str

    def prefix(self) -> list[str]:
        """The argv that runs what follows it as this account."""
        return [
            "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--init-groups",
            "--",
            "env",
            f"HOME={self.home}",
            f"USER={self.name}",
            f"LOGNAME={self.name}",
            f"SHELL={self.shell}",
        ]

    def argv(self, command: str) -> list[str]:
        """`command` (a shell command line) run by this account's shell, as this account."""
        return [*self.prefix(), self.shell, "-c", command]


def account_for(user: str | None) -> Account | None:
    """The account to switch to for `user`; None when there is nothing to switch (no user, or
    the daemon's own). Raises AccountError."""
    if not user:
        return None
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise AccountError(f"user {user!r}: no such user on this machine") from None
    me = os.geteuid()
    if entry.pw_uid == me:
        return None
    if me != 0:
        raise AccountError(
            f"user {user!r}: the daemon runs as {_name_of(me)}, and only a daemon started as root "
            "can run commands as another user"
        )
    if shutil.which("setpriv") is None:
        raise AccountError(f"user {user!r}: setpriv (util-linux) is not installed")
    shell = entry.pw_shell
    if not shell or os.path.basename(shell) in NO_LOGIN_SHELLS or not os.access(shell, os.X_OK):
        shell = shutil.which("bash") or "/bin/sh"
    return Account(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir, shell)


def _name_of(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"
