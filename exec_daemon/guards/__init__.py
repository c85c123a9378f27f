"""Guards around every tool call: secret redaction, permissions and run modes, hooks.

Order, outermost first (each wraps the ones after it):
1. redaction — outermost of the guards, so whatever the others produce is cleaned on its way
   out: the handler's result and deltas, but also permission rejections and hook messages
   (a hook can echo anything), the answer's hook feedback and rewritten args, ExecError texts.
2. permissions — a call the run mode, the allowlists or a read-only agent refuses never
   reaches the user's hooks (they may be slow or have side effects, and would see calls that
   never run). Input a hook rewrites is judged again by the same rules before it runs.
3. hooks — innermost, right around the handler: before-hooks see the call as it will run
   (e.g. with the sandbox policy the permissions chose), after-hooks see the raw result; but
   no hook ever sees a secret (hooks.py masks them in what it hands a hook, whether or not
   redaction is on).
Tracing, when there is one, goes outside all of them so a span covers the guards' time too.
"""

from __future__ import annotations

from exec_daemon.guards.hooks import hooks_middleware
from exec_daemon.guards.permissions import permissions_middleware
from exec_daemon.guards.redaction import redaction_middleware
from exec_daemon.kernel.context import Middleware
from exec_daemon.kernel.state import Daemon


def guard_middlewares(daemon: Daemon) -> list[Middleware]:
    guards: list[Middleware] = []
    if daemon.config.secret_redaction_enabled:
        guards.append(redaction_middleware(daemon))
    guards.append(permissions_middleware(daemon))
    guards.append(hooks_middleware(daemon))
    return guards
