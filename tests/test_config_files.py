"""The guards' configuration files are re-read whenever they change, however they change.

They are cached between calls (exec_daemon/guards/config_files.py) so that a call costs one
stat per file; these tests change a permissions.json every way an agent's shell can and check
the very next verdict follows the file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from exec_daemon.guards import config_files
from exec_daemon.guards.commands import unallowlisted
from exec_daemon.guards.permissions import PermissionFiles
from exec_daemon.kernel.config import DaemonConfig
from exec_daemon.kernel.state import Daemon


def permission_files(workspace: Path) -> tuple[PermissionFiles, Path]:
    daemon = Daemon(DaemonConfig(auth_token="t", workspace=workspace))
    daemon.env.update({"HOME": str(workspace / "home")})
    path = workspace / ".cursor" / "permissions.json"
    path.parent.mkdir()
    return daemon.service(PermissionFiles), path


def allowlist(*commands: str) -> str:
    return json.dumps({"terminalAllowlist": list(commands)})


def verdict(files: PermissionFiles, command: str) -> str | None:
    return unallowlisted(command, files.rules().terminal_allowlist)


def test_a_rewrite_in_place_and_a_deletion_are_seen_at_the_next_call(tmp_path: Path) -> None:
    files, path = permission_files(tmp_path)
    assert verdict(files, "echo ok") is not None
    path.write_text(allowlist("echo"))
    assert verdict(files, "echo ok") is None
    path.write_text(allowlist("true", "git"))  # a different size, same inode
    assert verdict(files, "echo ok") is not None
    assert verdict(files, "git status") is None
    path.unlink()
    assert files.rules().terminal_allowlist == ()
    path.write_text(allowlist("echo"))
    assert verdict(files, "echo ok") is None


def test_a_file_renamed_over_it_is_seen_even_with_the_same_size_and_time(tmp_path: Path) -> None:
    files, path = permission_files(tmp_path)
    path.write_text(allowlist("echo"))
    assert verdict(files, "echo ok") is None
    replacement = path.with_name("new.json")
    replacement.write_text(allowlist("grep"))  # as long as ["echo"]
    stat = path.stat()
    os.utime(replacement, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(replacement, path)
    assert verdict(files, "echo ok") is not None
    assert verdict(files, "grep x") is None


def test_a_symlink_swapped_to_another_target_is_seen(tmp_path: Path) -> None:
    files, path = permission_files(tmp_path)
    narrow, wide = tmp_path / "narrow.json", tmp_path / "wide.json"
    narrow.write_text(allowlist("echo"))
    wide.write_text(allowlist("rm -rf"))
    path.symlink_to(narrow)
    assert verdict(files, "rm -rf /tmp/x") is not None
    link = path.with_name("link")
    link.symlink_to(wide)
    os.replace(link, path)
    assert verdict(files, "rm -rf /tmp/x") is None


def test_content_changed_behind_a_restored_mtime_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`touch -d` can give a rewritten file its old mtime back (same size, same inode)."""
    # Long after the change, when a recent ctime no longer forces a read: the stamp alone.
    monkeypatch.setattr(config_files, "_SETTLE_NS", 0)
    files, path = permission_files(tmp_path)
    path.write_text(allowlist("echo"))
    before = path.stat()
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns - 10**9))  # an older file
    old = path.stat()
    assert verdict(files, "echo ok") is None
    with path.open("r+") as rewrite:  # in place: same inode, same size
        rewrite.write(allowlist("grep"))
    os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))
    assert (path.stat().st_mtime_ns, path.stat().st_size) == (old.st_mtime_ns, old.st_size)
    assert verdict(files, "echo ok") is not None
    assert verdict(files, "grep x") is None
