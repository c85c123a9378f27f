"""Which per-command variables (ShellArgs.env) a shell call may set without approval.

A variable changes what the programs of an allowlisted command do: `LD_PRELOAD`, `BASH_ENV`,
`PATH`, `GIT_CONFIG_*`, `PAGER`, `NODE_OPTIONS`, `PYTHONSTARTUP`, ... each runs code the
allowlist never saw. So outside run_everything (and for read-only agents) only the names below
pass, each with a value shaped like plain data (no `/`, so no file to load, no `$`, no space);
any other name, or an odd value, needs approval (review) exactly as an unlisted command does.
The list names what is safe; everything not on it is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# Words, numbers, flags: `1`, `en_US.UTF-8`, `production`, `info,my_crate=debug`.
_PLAIN = re.compile(r"[A-Za-z0-9_.,:=+@-]{0,256}")
# Locale names: never a path (glibc would load a locale from it).
_LOCALE = re.compile(r"[A-Za-z0-9_.@:-]{0,64}")
# Zone names (`Europe/Paris`, `UTC`, `EST5EDT,M3.2.0,M11.1.0`): a path only below the zoneinfo
# folder, without `..` (no dot is allowed next to a slash-separated name).
_ZONE = re.compile(r":?[A-Za-z0-9_+-]{1,32}(/[A-Za-z0-9_+-]{1,32}){0,3}|[A-Za-z0-9_+,.:<>-]{1,64}")

SAFE_COMMAND_ENV: dict[str, re.Pattern[str]] = {
    **{
        name: _LOCALE
        for name in (
            "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES",
            "LC_NUMERIC", "LC_TIME", "LC_MONETARY",
        )
    },
    "TZ": _ZONE,
    **{
        name: _PLAIN
        for name in (
            "CI", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "COLUMNS", "LINES",
            "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED",
            "PYTHONIOENCODING", "NODE_ENV", "RUST_BACKTRACE", "RUST_LOG",
        )
    },
}  # fmt: skip


def command_env_refusal(env: Mapping[str, str]) -> str | None:
    """None when every variable of `env` is one a command may get without approval, else why
    not (the first that is not; values are never quoted: they may be secrets)."""
    for name in sorted(env):
        shape = SAFE_COMMAND_ENV.get(name)
        if shape is None:
            return f"env sets {name!r}, which is not a variable commands may get without approval"
        if not shape.fullmatch(env[name]):
            return f"env sets {name} to a value that is not plain data"
    return None
