"""Builds the confinement helper (helper.c) with gcc, once per source change.

`python -m sandbox.build` (run by scripts/setup) compiles it next to the venv's Python; the
daemon also builds it on first use when it is missing or stale. It is linked statically (no
dynamic loader work on each of the many executions) against libseccomp (Debian package
libseccomp-dev).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from exec_daemon.kernel.secrets import without_secrets

SOURCE = Path(__file__).with_name("helper.c")
HELPER_NAME = "exec-daemon-sandbox"
CFLAGS = ("-O2", "-Wall", "-Wextra", "-static")
LIBS = ("-lseccomp",)


class HelperBuildError(Exception):
    pass


def default_helper_path() -> Path:
    """Beside the running Python (the venv's bin/), else in the user's cache directory."""
    beside = Path(sys.executable).parent
    if os.access(beside, os.W_OK) or (beside / HELPER_NAME).exists():
        return beside / HELPER_NAME
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "exec-daemon" / HELPER_NAME


def source_digest() -> str:
    digest = hashlib.sha256(SOURCE.read_bytes())
    digest.update(" ".join(CFLAGS + LIBS).encode())
    return digest.hexdigest()


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def is_current(path: Path) -> bool:
    try:
        return os.access(path, os.X_OK) and _stamp(path).read_text().strip() == source_digest()
    except OSError:
        return False


def ensure_helper(path: Path | None = None) -> Path:
    """The helper at `path` (default: default_helper_path()), compiled first if stale.

    Concurrent callers are safe: each compiles to a temporary file and renames it into place.
    Raises HelperBuildError with gcc's message when it cannot be built.
    """
    target = path or default_helper_path()
    if is_current(target):
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(prefix=f".{HELPER_NAME}.", dir=target.parent)
    except OSError as exc:
        # E.g. a daemon of another user than the one who installed the venv: no sandbox, no crash.
        raise HelperBuildError(f"cannot write in {target.parent}: {exc.strerror}") from None
    os.close(fd)
    try:
        command = ["gcc", *CFLAGS, "-o", temp_name, str(SOURCE), *LIBS]
        try:
            result = subprocess.run(
                command,
                env=without_secrets(os.environ),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=120,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise HelperBuildError(f"cannot run gcc: {exc}") from exc
        if result.returncode != 0:
            raise HelperBuildError(
                f"gcc failed (is libseccomp-dev installed?):\n{result.stderr.strip()}"
            )
        os.chmod(temp_name, 0o755)
        os.replace(temp_name, target)
        _stamp(target).write_text(source_digest() + "\n")
    finally:
        if os.path.exists(temp_name):
            os.unlink(temp_name)
    return target


def main() -> int:
    try:
        path = ensure_helper()
    except HelperBuildError as exc:
        print(f"sandbox helper: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
