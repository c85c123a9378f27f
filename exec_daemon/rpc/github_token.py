"""ControlService.RefreshGithubAccessToken: the GitHub access token of the agent's processes.

The token goes into the environment every process the daemon starts from then on gets
(`daemon.env`): `GH_TOKEN` and `GITHUB_TOKEN` for gh and other tools, and, through git's
`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` variables, a credential helper for
https://github.com only that answers with `$GH_TOKEN` (so the token itself is in no git config
and no file, and a refresh needs no rewrite of anything). An empty helper value first clears
the helpers other config files set for github.com, so a stale stored credential cannot win.
The token's variable names are added to CLOUD_AGENT_INJECTED_SECRET_NAMES, so secret redaction
(when on) hides it from tool output. The token is never logged.
"""

from __future__ import annotations

import logging

from exec_daemon.kernel.state import Daemon
from tools.github import CREDENTIAL_HELPER, CREDENTIAL_KEY, TOKEN_VARIABLES

log = logging.getLogger(__name__)

SECRET_NAMES_VARIABLE = "CLOUD_AGENT_INJECTED_SECRET_NAMES"


class TokenRejected(Exception):
    """The token cannot be stored; the message says why (it never contains the token)."""


def _credential_entries(env: dict[str, str]) -> dict[str, str]:
    """GIT_CONFIG_* variables with our two credential entries, after any the environment has
    (ours replace an earlier copy of themselves)."""
    count = _int(env.get("GIT_CONFIG_COUNT", "0"))
    entries = [
        (env.get(f"GIT_CONFIG_KEY_{index}", ""), env.get(f"GIT_CONFIG_VALUE_{index}", ""))
        for index in range(count)
    ]
    kept = [(key, value) for key, value in entries if key != CREDENTIAL_KEY]
    kept += [(CREDENTIAL_KEY, ""), (CREDENTIAL_KEY, CREDENTIAL_HELPER)]
    variables = {"GIT_CONFIG_COUNT": str(len(kept))}
    for index, (key, value) in enumerate(kept):
        variables[f"GIT_CONFIG_KEY_{index}"] = key
        variables[f"GIT_CONFIG_VALUE_{index}"] = value
    return variables


def _int(text: str) -> int:
    try:
        return max(0, int(text))
    except ValueError:
        return 0


def store_token(daemon: Daemon, token: str) -> None:
    """Makes `token` the GitHub credential of every process started from now on."""
    token = token.strip()
    if not token:
        raise TokenRejected("access_token is empty")
    if any(char.isspace() or not char.isprintable() for char in token):
        raise TokenRejected("access_token contains whitespace or control characters")
    env = daemon.env.snapshot()
    names = [name.strip() for name in env.get(SECRET_NAMES_VARIABLE, "").split(",") if name.strip()]
    names += [name for name in TOKEN_VARIABLES if name not in names]
    update = {name: token for name in TOKEN_VARIABLES}
    update[SECRET_NAMES_VARIABLE] = ",".join(names)
    update.update(_credential_entries(env))
    daemon.env.update(update)
    log.info("GitHub access token updated (%d characters)", len(token))
