"""What an allowlisted program will run besides itself: the table the allowlist judges it by.

An allowlist entry (`find`, `sed`, `git`) names a program, but many programs run others when
told to by a flag, an expression or a script: `find -exec`, sed's `e` command, awk's
`system()`, `tar --to-command`, `rg --pre`, `git -c core.pager=...`, a build tool running the
repository's own scripts. For the words of one command, `effects` answers what else it runs:

- `refusal`: a form the guard cannot judge (a program given as text it does not parse, a file
  written where the agent chooses, a configuration file the agent may have written): the call
  needs approval;
- `repository_code`: the program runs code from the repository the agent can edit (a Makefile,
  package.json scripts, git hooks): it may run without approval only confined by the sandbox;
- `commands` / `lines`: the command (as words) or shell lines (as text) it runs, which the
  allowlist judges like any other (exec_daemon/guards/commands.py).

A program absent from the table runs only itself. For a program in it, a flag or form the
table does not know counts as dangerous where it matters (an unknown git subcommand may be an
alias, an unknown sed command may run something).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

Words = Sequence[str | None]


@dataclass(frozen=True)
class Effects:
    """What a command runs besides its own program (nothing, by default)."""

    refusal: str | None = None
    repository_code: str | None = None
    commands: tuple[tuple[str | None, ...], ...] = ()
    lines: tuple[str, ...] = ()


NOTHING = Effects()


def effects(words: Words) -> Effects:
    """What the command `words` (program first) runs besides itself."""
    program = words[0] if words else None
    if program is None:
        return NOTHING
    judge = PROGRAMS.get(os.path.basename(program))
    if judge is None:
        return NOTHING
    args = list(words[1:])
    if any(arg is None for arg in args) and os.path.basename(program) not in _BUILD_TOOLS:
        # `find . $action id \;`: a word known only at run time may be any flag.
        return Effects(refusal=f"`{program}` gets an argument only known at run time")
    return judge(args)


# --- options -------------------------------------------------------------------------------------


# Long options that are complete names of their own, though a refused one starts with them
# (getopt takes an exact name before an abbreviation).
_WHOLE_OPTIONS = frozenset({"--checkpoint", "--config"})


def _matches(arg: str, flag: str) -> bool:
    """Whether `arg` sets `flag`: `--name`, `--name=value` or an abbreviation getopt accepts;
    `-x` anywhere in a cluster of short options (`-xvI`), also with a value attached."""
    if flag.startswith("--"):
        if not arg.startswith("--") or arg == "--":
            return False
        name = arg[2:].split("=", 1)[0]
        if name != flag[2:] and f"--{name}" in _WHOLE_OPTIONS:
            return False
        return bool(name) and flag[2:].startswith(name)
    if len(flag) == 2:
        return arg.startswith("-") and not arg.startswith("--") and flag[1] in arg[1:]
    return arg == flag or arg.startswith(flag + "=")


def _refused_option(args: Sequence[str | None], refused: Mapping[str, str]) -> str | None:
    for arg in args:
        if arg is None or arg == "--":
            continue
        for flag, why in refused.items():
            if _matches(arg, flag):
                return f"`{arg}` {why}"
    return None


def _refusing(refused: Mapping[str, str]) -> Callable[[list[str | None]], Effects]:
    def judge(args: list[str | None]) -> Effects:
        return Effects(refusal=_refused_option(args, refused))

    return judge


_RUNS = "runs a program it names"
_WRITES = "writes a file it names"
_CONFIG = "reads a configuration file that can name programs"


# --- find ----------------------------------------------------------------------------------------

_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_FIND_WRITES = frozenset({"-fprint", "-fprint0", "-fprintf", "-fls", "-delete"})


def _find(args: list[str | None]) -> Effects:
    commands: list[tuple[str | None, ...]] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in _FIND_WRITES:
            return Effects(refusal=f"find {arg} writes or deletes files")
        if arg in _FIND_EXEC:
            end = index + 1
            while end < len(args) and args[end] not in (";", "+"):
                end += 1
            if end == index + 1:
                return Effects(refusal=f"find {arg} without a command")
            commands.append(tuple(args[index + 1 : end]))
            index = end
        index += 1
    return Effects(commands=tuple(commands))


# --- sed -----------------------------------------------------------------------------------------

# sed commands that only print, move or edit the pattern space (GNU sed).
_SED_PLAIN = frozenset("{}=dDgGhHlnNpPxzFqQ")
_SED_TEXT = frozenset("aic")  # text to the end of the line
_SED_LABEL = frozenset("btT:")  # a label to `;` or the end of the line
_SED_READ = frozenset("rRv")  # a file name (read) to the end of the line
_SED_ADDRESS = re.compile(
    r"\s*(?:\d+(?:~\d+)?|\$|/(?:[^/\\]|\\.)*/[IM]*|\\(.)(?:(?!\1).|\\.)*?\1[IM]*)"
)


def _sed_addresses(script: str, at: int) -> int:
    """The index after an address range (`1,$`, `/re/,+3`, `0~2`) and a `!`."""
    match = _SED_ADDRESS.match(script, at)
    if match is not None:
        at = match.end()
        if script[at : at + 1] == ",":
            following = re.compile(r"[+~]?\d+").match(script, at + 1) or _SED_ADDRESS.match(
                script, at + 1
            )
            at = following.end() if following is not None else at + 1
    while at < len(script) and script[at] in " \t!":
        at += 1
    return at


def _sed_part(script: str, at: int, delimiter: str) -> int:
    """The index after a delimited part of s/// or y/// (escapes skipped)."""
    while at < len(script) and script[at] != delimiter:
        at += 2 if script[at] == "\\" else 1
    return at + 1


def _sed_substitution(script: str, at: int) -> tuple[str | None, int]:
    """s///flags at `at` (after `s`): why it is refused, and the index after it."""
    if at >= len(script):
        return "an unfinished s command", at
    delimiter = script[at]
    at = _sed_part(script, _sed_part(script, at + 1, delimiter), delimiter)
    flags = re.compile(r"[gpiImM0-9ew]*").match(script, at)
    assert flags is not None
    if "e" in flags.group():
        return "the s///e flag runs the pattern space as a command", at
    if "w" in flags.group():
        return "the s///w flag writes a file", at
    return None, flags.end()


def sed_script_refusal(script: str) -> str | None:
    """Why a sed script may run a program or write a file (`e`, `s///e`, `w`, `W`, `s///w`,
    or a command the scanner does not know); None when it only edits text."""
    at = 0
    while at < len(script):
        at = _sed_addresses(script, at)
        if at >= len(script):
            return None
        command = script[at]
        at += 1
        if command in " \t\n;":
            continue
        if command == "#":
            at = _line_end(script, at)
        elif command == "s":
            reason, at = _sed_substitution(script, at)
            if reason is not None:
                return reason
        elif command == "y":
            delimiter = script[at : at + 1] or "/"
            at = _sed_part(script, _sed_part(script, at + 1, delimiter), delimiter)
        elif command in _SED_TEXT or command in _SED_READ:
            at = _line_end(script, at)
        elif command in _SED_LABEL:
            at = min(_line_end(script, at), _next(script, at, ";"))
        elif command in "eWw":
            return f"the sed command `{command}` runs a command or writes a file"
        elif command not in _SED_PLAIN and not command.isdigit():
            return f"the sed command `{command}` is not one the guard knows"
    return None


def _line_end(text: str, at: int) -> int:
    return _next(text, at, "\n")


def _next(text: str, at: int, char: str) -> int:
    found = text.find(char, at)
    return len(text) if found < 0 else found


_SED_VALUE_LONG = ("--expression", "--file", "--line-length", "--in-place", "--suffix")


def _sed(args: list[str | None]) -> Effects:
    scripts: list[str] = []
    positional: list[str] = []
    index = 0
    sandboxed = "--sandbox" in args
    while index < len(args):
        arg = args[index] or ""
        index += 1
        if arg == "--":
            positional.extend(a or "" for a in args[index:])
            break
        if arg.startswith("--"):
            name, has_value, value = arg.partition("=")
            if _matches(name, "--file"):
                return Effects(refusal="sed -f runs a script from a file the guard cannot see")
            if _matches(name, "--expression") or _matches(name, "--line-length"):
                if not has_value:
                    value, index = (args[index] or "") if index < len(args) else "", index + 1
                if _matches(name, "--expression"):
                    scripts.append(value)
            continue
        if arg.startswith("-") and len(arg) > 1:
            following = args[index] if index < len(args) else None
            reason, script, taken = _sed_cluster(arg[1:], following)
            if reason is not None:
                return Effects(refusal=reason)
            if script is not None:
                scripts.append(script)
            index += taken
            continue
        positional.append(arg)
    if not scripts and positional:
        scripts.append(positional[0])
    if sandboxed:
        return NOTHING  # GNU sed --sandbox refuses e, w and r itself
    for script in scripts:
        reason = sed_script_refusal(script)
        if reason is not None:
            return Effects(refusal=reason)
    return NOTHING


def _sed_cluster(cluster: str, following: str | None) -> tuple[str | None, str | None, int]:
    """A cluster of short options (`-ne`, `-i.bak`, `-e1e id`, `-l 5`): why it is refused, the
    script it gives, and how many further arguments it took."""
    for position, letter in enumerate(cluster):
        rest = cluster[position + 1 :]
        if letter == "f":
            return "sed -f runs a script from a file the guard cannot see", None, 0
        if letter == "e":
            return (None, rest, 0) if rest else (None, following or "", 1)
        if letter == "l":
            return None, None, 0 if rest else 1
        if letter == "i":
            return None, None, 0  # the rest of the cluster is the backup suffix
    return None, None, 0


# --- awk -----------------------------------------------------------------------------------------

_AWK_OPTIONS_WITH_VALUE = frozenset({"-v", "-F", "--assign", "--field-separator"})
_AWK_REFUSED = {
    "-f": "runs an awk program from a file the guard cannot see",
    "--file": "runs an awk program from a file the guard cannot see",
    "-E": "runs an awk program from a file the guard cannot see",
    "--exec": "runs an awk program from a file the guard cannot see",
    "-i": "includes awk source from a file",
    "--include": "includes awk source from a file",
    "-l": "loads an extension library",
    "--load": "loads an extension library",
}
# What makes an awk program run a command or write a file, once strings and regexps are gone:
# system(), a pipe to or from a command (`print | "cmd"`, `"cmd" | getline`), output
# redirection in print/printf (`print > "f"`), gawk's @load/@include and its coprocess `|&`.
_AWK_RUNS = re.compile(r"\bsystem\s*\(|(?<!\|)\|(?!\|)|@")
_AWK_PRINT_REDIRECT = re.compile(r"\bprintf?\b[^;{}\n]*>")


def _awk_program_code(program: str) -> str:
    """The program without the text of its string and regexp literals."""
    code: list[str] = []
    last = ""
    at = 0
    while at < len(program):
        char = program[at]
        if char == '"' or (char == "/" and not (last.isalnum() or (last and last in "_)]$"))):
            end = at + 1
            while end < len(program) and program[end] != char:
                end += 2 if program[end] == "\\" else 1
            code.append('""')
            at, last = end + 1, '"'
            continue
        if char == "#":
            at = _line_end(program, at)
            continue
        code.append(char)
        if not char.isspace():
            last = char
        at += 1
    return "".join(code)


def awk_program_refusal(program: str) -> str | None:
    code = _awk_program_code(program)
    if _AWK_RUNS.search(code):
        return "the awk program runs a command (system, a pipe, @load)"
    if _AWK_PRINT_REDIRECT.search(code):
        return "the awk program redirects print output to a file or command"
    return None


def _awk(args: list[str | None]) -> Effects:
    if any(arg in ("-S", "--sandbox") for arg in args):
        return NOTHING  # gawk --sandbox refuses system(), redirections and getline from files
    refused = _refused_option(args, _AWK_REFUSED)
    if refused is not None:
        return Effects(refusal=refused)
    index = 0
    while index < len(args):
        arg = args[index] or ""
        if arg == "--":
            index += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        index += 2 if arg in _AWK_OPTIONS_WITH_VALUE else 1
    if index >= len(args):
        return NOTHING
    return Effects(refusal=awk_program_refusal(args[index] or ""))


# --- git -----------------------------------------------------------------------------------------

# Subcommands that run nothing of the repository's beyond what the agent shells' git
# configuration overrides (exec_daemon/kernel/git.py, AGENT_GIT_CONFIG: no fsmonitor, no hooks,
# no bare repository found on its own).
_GIT_PLAIN = frozenset(
    {
        "status", "log", "diff", "show", "ls-files", "ls-tree", "rev-parse", "blame", "grep",
        "describe", "shortlog", "cat-file", "rev-list", "merge-base", "show-ref", "name-rev",
        "whatchanged", "annotate", "count-objects", "for-each-ref", "var", "version", "help",
        "branch", "tag", "remote", "stash", "config", "add", "rm", "mv", "restore", "reset",
        "init", "fetch", "clone", "apply", "archive", "bisect", "format-patch", "notes",
        "reflog", "fsck", "prune", "repack", "range-diff", "show-branch", "cherry",
        "check-ignore", "check-attr", "update-index", "update-ref", "symbolic-ref",
        "hash-object", "write-tree", "read-tree", "commit-tree", "mktree", "ls-remote",
        "diff-index", "diff-files", "diff-tree", "clean", "sparse-checkout", "bundle",
        "verify-commit", "verify-tag", "request-pull", "rerere", "submodule", "commit",
        "merge", "rebase", "am", "cherry-pick", "revert", "pull", "push", "checkout", "switch",
        "worktree", "gc", "lfs",
    }
)  # fmt: skip
_GIT_GLOBAL_REFUSED = {
    "-c": "sets git configuration for the command (a pager, an fsmonitor, an alias: a program)",
    "--config-env": "sets git configuration for the command from the environment",
    "--exec-path": "makes git run its commands from a folder it names",
    "--git-dir": "points git at a repository explicitly, bare ones included",
    "--bare": "treats the folder as a bare repository, explicitly",
}
_GIT_GLOBAL_WITH_VALUE = frozenset({"-C", "--work-tree", "--namespace", "--super-prefix"})
_GIT_GLOBAL_FLAGS = frozenset(
    {
        "-p", "--paginate", "-P", "--no-pager", "--no-replace-objects",
        "--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs",
        "--no-optional-locks", "--exec-path", "--version", "--help", "--html-path",
        "--man-path", "--info-path",
    }
)  # fmt: skip
_GIT_SUBCOMMAND_REFUSED: dict[str, dict[str, str]] = {
    "grep": {"-O": _RUNS, "--open-files-in-pager": _RUNS},
    "diff": {"--output": _WRITES},
    "log": {"--output": _WRITES},
    "show": {"--output": _WRITES},
    "archive": {"--remote": _RUNS, "--exec": _RUNS, "-o": _WRITES, "--output": _WRITES},
    "fetch": {"--upload-pack": _RUNS},
    "pull": {"--upload-pack": _RUNS},
    "ls-remote": {"--upload-pack": _RUNS},
    "clone": {
        "-u": _RUNS,
        "--upload-pack": _RUNS,
        "--template": "copies hooks and configuration from a folder it names",
        "-c": "sets configuration in the new repository",
        "--config": "sets configuration in the new repository",
    },
    "init": {"--template": "copies hooks and configuration from a folder it names"},
    "push": {"--receive-pack": _RUNS, "--exec": _RUNS},
    "rebase": {"-x": "runs a shell command after each commit", "--exec": _RUNS},
    "help": {"-w": "opens a browser", "--web": "opens a browser"},
}
_GIT_REFUSED_SUBCOMMANDS = {
    "difftool": "runs the diff tool its configuration or --extcmd names",
    "mergetool": "runs the merge tool its configuration names",
    "filter-branch": "runs the shell filters it is given",
    "send-email": "runs programs its configuration names (sendmail, hooks)",
    "instaweb": "runs a web server its configuration names",
    "daemon": "serves repositories and runs hooks",
    "credential": "runs credential helpers",
    "upload-pack": "reads the repository's hook configuration",
    "maintenance": "registers scheduled jobs and writes the global configuration",
}
_GIT_CONFIG_READS = frozenset(
    {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--get-color"}
)
_GIT_CONFIG_WRITES = frozenset(
    {
        "--add", "--unset", "--unset-all", "--replace-all", "--rename-section",
        "--remove-section", "-e", "--edit", "set", "unset", "edit", "rename-section",
        "remove-section",
    }
)  # fmt: skip


def _git(args: list[str | None]) -> Effects:
    index = 0
    while index < len(args) and (args[index] or "").startswith("-"):
        option = args[index] or ""
        why = _GIT_GLOBAL_REFUSED.get(option.split("=", 1)[0])
        if why is not None and option != "--exec-path":  # bare, it only prints the folder
            return Effects(refusal=f"git {option} {why}")
        if option in _GIT_GLOBAL_WITH_VALUE:
            index += 2
        elif option in _GIT_GLOBAL_FLAGS or option.startswith(
            tuple(f"{name}=" for name in _GIT_GLOBAL_WITH_VALUE)
        ):
            index += 1
        else:
            return Effects(refusal=f"git {option} is a global option the guard does not know")
    if index >= len(args):
        return NOTHING
    return _git_subcommand(args[index] or "", args[index + 1 :])


def _git_subcommand(subcommand: str, rest: list[str | None]) -> Effects:
    why = _GIT_REFUSED_SUBCOMMANDS.get(subcommand)
    if why is not None:
        return Effects(refusal=f"git {subcommand} {why}")
    refused = _refused_option(rest, _GIT_SUBCOMMAND_REFUSED.get(subcommand, {}))
    if refused is not None:
        return Effects(refusal=f"git {subcommand}: {refused}")
    if subcommand == "config":
        return Effects(refusal=_git_config_refusal(rest))
    if subcommand == "submodule" and "foreach" in rest:
        return Effects(refusal="git submodule foreach runs a shell command")
    if subcommand == "bisect" and "run" in rest:
        return Effects(refusal="git bisect run runs a command")
    if subcommand not in _GIT_PLAIN:
        return Effects(
            refusal=f"git {subcommand} is not a command the guard knows (it may be an alias)"
        )
    return NOTHING


def _git_config_refusal(rest: Sequence[str | None]) -> str | None:
    words = [arg or "" for arg in rest]
    if any(word in _GIT_CONFIG_WRITES for word in words):
        return "git config changes configuration (which can name programs git runs)"
    positional = [word for word in words if not word.startswith("-")]
    if positional[:1] in (["get"], ["list"]) or _GIT_CONFIG_READS.intersection(words):
        return None
    if len(positional) > 1:
        return "git config changes configuration (which can name programs git runs)"
    return None


# --- ssh -----------------------------------------------------------------------------------------

_SSH_OPTIONS_WITH_VALUE = frozenset("BbcDEeFIiJLlmOoPpQRSWw")
# ssh_config keys whose value is a program, a library or more configuration.
_SSH_PROGRAM_KEYS = frozenset(
    {
        "proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "match",
        "include", "pkcs11provider", "securitykeyprovider", "xauthlocation", "remotecommand",
        "sshaskpass", "proxyusefdpass",
    }
)  # fmt: skip
_SSH_REFUSED = {
    "-F": _CONFIG,
    "-I": "loads a PKCS#11 library",
    "-S": "uses a control socket (or, for scp and sftp, a program) it names",
    "-D": "names the sftp server program",
    "-b": "runs a batch file (with `!` shell escapes)",
}


def _ssh_options(args: list[str | None]) -> tuple[list[str], int, str | None]:
    """The values of ssh's -o options, the index of its first operand (the host), and why an
    option is refused."""
    values: list[str] = []
    index = 0
    while index < len(args) and (args[index] or "").startswith("-") and args[index] != "--":
        cluster = (args[index] or "")[1:]
        index += 1
        for position, letter in enumerate(cluster):
            why = _SSH_REFUSED.get(f"-{letter}")
            if why is not None:
                return values, index, f"`-{letter}` {why}"
            if letter in _SSH_OPTIONS_WITH_VALUE:
                value = cluster[position + 1 :]
                if not value and index < len(args):
                    value, index = args[index] or "", index + 1
                if letter == "o":
                    values.append(value)
                break
    if index < len(args) and args[index] == "--":
        index += 1
    return values, index, None


def _ssh_like(remote_command: bool) -> Callable[[list[str | None]], Effects]:
    def judge(args: list[str | None]) -> Effects:
        values, host_index, refused = _ssh_options(args)
        if refused is not None:
            return Effects(refusal=refused)
        for value in values:
            key = re.split(r"[\s=]", value.strip(), maxsplit=1)[0].lower()
            if key in _SSH_PROGRAM_KEYS:
                return Effects(refusal=f"ssh -o {key} runs a program or reads configuration")
        command = [arg or "" for arg in args[host_index + 1 :]]
        if remote_command and command:
            # The remote's shell runs the words joined (the remote may be this machine).
            return Effects(lines=(" ".join(command),))
        return NOTHING

    return judge


# --- runners: programs whose arguments are a command ---------------------------------------------

# The options of each runner that take a separate value.
RUNNERS: dict[str, frozenset[str]] = {
    "command": frozenset(),
    "builtin": frozenset(),
    "nohup": frozenset(),
    "time": frozenset({"-f", "--format"}),
    "env": frozenset({"-C", "--chdir"}),
    "xargs": frozenset({"-n", "-I", "-i", "-d", "-P", "-L", "-l", "-s", "-E", "-e", "-a", "--arg-file"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p", "-P", "-u"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "setsid": frozenset(),
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}),
    "doas": frozenset({"-u", "-C"}),
    "flock": frozenset({"-w", "--timeout", "-E", "--conflict-exit-code"}),
    "watch": frozenset({"-n", "--interval", "-d", "-q", "--equexit"}),
    "taskset": frozenset(),
    "chrt": frozenset(),
    "strace": frozenset({"-e", "-p", "-s", "-a", "-P", "-E", "-u", "-b"}),
    "ltrace": frozenset({"-e", "-p", "-s", "-a", "-n", "-u", "-E", "-x", "-L"}),
    "busybox": frozenset(),
    "chroot": frozenset({"--userspec", "--groups"}),
}  # fmt: skip
# Runners with one operand before the command: duration, lock file, priority, mask, new root.
_RUNNERS_WITH_OPERAND = frozenset({"timeout", "flock", "chrt", "taskset", "chroot"})
# Runner options that change the command into something the words do not show.
_RUNNER_REFUSED: dict[str, dict[str, str]] = {
    "env": {
        "-S": "splits a string into a command the guard does not parse",
        "--split-string": "splits a string into a command the guard does not parse",
        "-u": "removes variables the daemon sets for every command (git's hardening)",
        "--unset": "removes variables the daemon sets for every command (git's hardening)",
        "-i": "clears the environment the daemon sets for every command (git's hardening)",
        "--ignore-environment": "clears the environment the daemon sets for every command",
    },
    "flock": {"-c": "runs a shell string", "--command": "runs a shell string"},
    "xargs": {"--process-slot-var": "sets a variable the command runs with"},
    "time": {"-o": _WRITES, "--output": _WRITES},
    "strace": {"-o": _WRITES, "--output": _WRITES},
    "ltrace": {"-o": _WRITES, "--output": _WRITES},
    "sudo": {"-e": "edits files with an editor", "--edit": "edits files with an editor"},
}


def _runner(program: str) -> Callable[[list[str | None]], Effects]:
    takes_value = RUNNERS[program]
    refused_options = _RUNNER_REFUSED.get(program, {})

    def judge(args: list[str | None]) -> Effects:
        index = 0
        operand_pending = program in _RUNNERS_WITH_OPERAND
        while index < len(args):
            arg = args[index]
            if arg is None:
                return Effects(refusal=f"`{program}` runs a command the guard cannot see")
            if program == "command" and arg in ("-v", "-V"):
                return NOTHING  # only says where the command is
            if program == "env" and "=" in arg and not arg.startswith("-"):
                return Effects(refusal="env NAME=value changes what the command does")
            if program == "env" and arg == "-":
                return Effects(refusal="env - clears the environment the daemon sets")
            if arg == "--":
                index += 1
                break
            if arg.startswith("-") and arg != "-":
                refused = _refused_option([arg], refused_options)
                if refused is not None:
                    return Effects(refusal=f"{program} {refused}")
                index += 2 if arg in takes_value else 1
                continue
            if operand_pending:
                operand_pending, index = False, index + 1
                continue
            break
        inner = tuple(args[index:])
        if not inner:
            return NOTHING
        if program == "watch" and not any(arg in ("-x", "--exec") for arg in args[:index]):
            # Without --exec, watch hands its words, joined, to `sh -c`.
            return Effects(lines=(" ".join(word or "" for word in inner),))
        return Effects(commands=(inner,))

    return judge


def _shell_string(option: str) -> Callable[[list[str | None]], Effects]:
    """Programs that run a shell line given as the value of `option` (`su -c`, `script -c`)."""

    def judge(args: list[str | None]) -> Effects:
        for index, arg in enumerate(args):
            if arg == option:
                return Effects(lines=(args[index + 1] or "",) if index + 1 < len(args) else ())
            if (arg or "").startswith(option + "="):
                return Effects(lines=((arg or "").split("=", 1)[1],))
        return NOTHING

    return judge


# --- build tools: they run the repository's own code ---------------------------------------------

# Subcommands (or sole flags) of each build tool that run nothing from the repository.
_BUILD_TOOLS: dict[str, frozenset[str]] = {
    "make": frozenset({"--version", "-v"}),
    "gmake": frozenset({"--version", "-v"}),
    "cmake": frozenset({"--version", "--help"}),
    "ninja": frozenset({"--version"}),
    "npm": frozenset({"ls", "list", "view", "info", "outdated", "search", "help", "--version", "-v", "whoami", "ping", "prefix", "root"}),
    "npx": frozenset({"--version"}),
    "yarn": frozenset({"--version", "-v", "info", "why", "list", "outdated"}),
    "pnpm": frozenset({"--version", "-v", "ls", "list", "view", "info", "outdated", "why"}),
    "bun": frozenset({"--version", "pm"}),
    "pip": frozenset({"--version", "-V", "list", "show", "freeze", "check", "help", "config", "cache", "index", "inspect"}),
    "pip3": frozenset({"--version", "-V", "list", "show", "freeze", "check", "help", "config", "cache", "index", "inspect"}),
    "cargo": frozenset({"--version", "-V", "version", "metadata", "tree", "search", "help", "fmt", "locate-project", "pkgid"}),
    "go": frozenset({"version", "env", "help", "doc", "fmt"}),
    "gradle": frozenset({"--version", "-v"}),
    "gradlew": frozenset({"--version", "-v"}),
    "mvn": frozenset({"--version", "-v"}),
    "mvnw": frozenset({"--version", "-v"}),
    "ant": frozenset({"-version"}),
    "sbt": frozenset(),
    "bazel": frozenset({"version", "--version", "help", "info"}),
    "bazelisk": frozenset({"version", "--version", "help"}),
    "pytest": frozenset({"--version", "-V"}),
    "py.test": frozenset({"--version", "-V"}),
    "tox": frozenset({"--version"}),
    "nox": frozenset({"--version"}),
    "jest": frozenset({"--version"}),
    "vitest": frozenset({"--version"}),
    "mocha": frozenset({"--version"}),
    "eslint": frozenset({"--version", "-v"}),
    "prettier": frozenset({"--version", "-v"}),
    "rake": frozenset({"--version", "-V"}),
    "bundle": frozenset({"--version", "-v", "list", "info", "outdated"}),
    "composer": frozenset({"--version", "-V", "show", "info", "outdated"}),
    "mix": frozenset({"--version", "-v"}),
    "dotnet": frozenset({"--version", "--info", "--list-sdks", "--list-runtimes"}),
    "deno": frozenset({"--version", "-V", "info", "fmt", "lint"}),
    "uv": frozenset({"--version", "-V", "version", "help", "tree"}),
    "poetry": frozenset({"--version", "-V", "show", "check"}),
    "pre-commit": frozenset({"--version", "-V"}),
    "just": frozenset({"--version", "-V", "--list", "-l", "--summary"}),
    "meson": frozenset({"--version", "-v"}),
    "tsx": frozenset({"--version"}),
    "ts-node": frozenset({"--version", "-v"}),
}  # fmt: skip


def _build_tool(program: str) -> Callable[[list[str | None]], Effects]:
    harmless = _BUILD_TOOLS[program]

    def judge(args: list[str | None]) -> Effects:
        first = next((arg for arg in args if arg is None or not arg.startswith("-")), None)
        sole_flag = args[0] if len(args) == 1 else None
        if (first is not None and first in harmless) or (sole_flag in harmless):
            return NOTHING
        return Effects(repository_code=f"{program} runs code of the repository (build scripts)")

    return judge


# --- pagers and manuals --------------------------------------------------------------------------


def _less(args: list[str | None]) -> Effects:
    refused = _refused_option(
        args, {"-k": _CONFIG, "--lesskey-file": _CONFIG, "--lesskey-src": _CONFIG}
    )
    if refused is not None:
        return Effects(refusal=refused)
    for arg in args:
        if (arg or "").startswith("+") and not re.fullmatch(r"\+(\d+|[GFg])", arg or ""):
            return Effects(refusal=f"`{arg}`: a less command given at start (`!` runs a shell)")
    return NOTHING


_TAR_REFUSED = {
    "--to-command": _RUNS, "-I": _RUNS, "--use-compress-program": _RUNS,
    "--checkpoint-action": _RUNS, "--info-script": _RUNS, "--new-volume-script": _RUNS,
    "-F": _RUNS, "--rsh-command": _RUNS, "--rmt-command": _RUNS,
}  # fmt: skip
_MAN_REFUSED = {
    "-P": _RUNS, "--pager": _RUNS, "-H": "runs a browser", "--html": "runs a browser",
    "-p": _RUNS, "--preprocessor": _RUNS, "-C": _CONFIG, "--config-file": _CONFIG,
}  # fmt: skip


def _tar(args: list[str | None]) -> Effects:
    # `tar xIf prog a.tar`: a first word without a dash is a cluster of short options.
    if args and not (args[0] or "-").startswith("-"):
        args = [f"-{args[0]}", *args[1:]]
    return Effects(refusal=_refused_option(args, _TAR_REFUSED))


# --- programs whose subcommands run what they are given -----------------------------------------

# Subcommands that run nothing the caller chose: the rest need approval.
_SUBCOMMAND_PROGRAMS: dict[str, tuple[frozenset[str], str]] = {
    "docker": (
        frozenset({"ps", "images", "version", "info", "inspect", "logs", "--version"}),
        "runs containers, which can mount and change the host",
    ),
    "podman": (
        frozenset({"ps", "images", "version", "info", "inspect", "logs", "--version"}),
        "runs containers, which can mount and change the host",
    ),
    "parallel": (frozenset({"--version"}), "runs the commands it composes"),
}


def _subcommands(program: str) -> Callable[[list[str | None]], Effects]:
    harmless, why = _SUBCOMMAND_PROGRAMS[program]

    def judge(args: list[str | None]) -> Effects:
        first = next((arg for arg in args if not (arg or "-").startswith("-")), None)
        if first in harmless or (len(args) == 1 and args[0] in harmless):
            return NOTHING
        return Effects(refusal=f"{program} {why}")

    return judge


_EDITOR_REFUSED = {
    "-c": "runs an editor command (`:!` runs a shell)",
    "--cmd": "runs an editor command (`:!` runs a shell)",
    "-S": "sources a script",
    "-u": "reads a configuration file that can run commands",
    "--eval": "evaluates code",
    "--load": "loads code",
    "-l": "loads code",
    "--funcall": "calls a function",
    "--script": "runs a script",
    "-x": "runs a script",
}
_APT_REFUSED = {
    "-o": "sets an option (APT::Update::Pre-Invoke, DPkg::Post-Invoke run commands)",
    "--option": "sets an option (its hooks run commands)",
    "-c": _CONFIG,
    "--config-file": _CONFIG,
}
_DPKG_REFUSED = {
    "--pre-invoke": _RUNS,
    "--post-invoke": _RUNS,
    "--status-logger": _RUNS,
    "--root": "installs into another root and runs its maintainer scripts",
    "--instdir": "installs into another root",
}


def _editor(args: list[str | None]) -> Effects:
    refused = _refused_option(args, _EDITOR_REFUSED)
    if refused is not None:
        return Effects(refusal=refused)
    for arg in args:
        if (arg or "").startswith("+") and not re.fullmatch(r"\+\d*", arg or ""):
            return Effects(refusal=f"`{arg}`: an editor command given at start")
    return NOTHING


# --- the table -----------------------------------------------------------------------------------

PROGRAMS: dict[str, Callable[[list[str | None]], Effects]] = {
    "find": _find,
    "sed": _sed,
    "gsed": _sed,
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk", "busybox-awk"), _awk),
    "git": _git,
    "tar": _tar,
    "zip": _refusing({"-TT": _RUNS, "--unzip-command": _RUNS}),
    "rsync": _refusing({"-e": _RUNS, "--rsh": _RUNS, "--rsync-path": _RUNS}),
    "rg": _refusing({"--pre": _RUNS}),
    "man": _refusing(_MAN_REFUSED),
    "less": _less,
    "more": _less,
    "ssh": _ssh_like(remote_command=True),
    "scp": _ssh_like(remote_command=False),
    "sftp": _ssh_like(remote_command=False),
    "su": _shell_string("-c"),
    "script": _shell_string("-c"),
    **dict.fromkeys(("vi", "vim", "nvim", "view", "ex", "emacs"), _editor),
    "apt": _refusing(_APT_REFUSED),
    "apt-get": _refusing(_APT_REFUSED),
    "dpkg": _refusing(_DPKG_REFUSED),
    **{program: _subcommands(program) for program in _SUBCOMMAND_PROGRAMS},
    **{program: _runner(program) for program in RUNNERS},
    **{program: _build_tool(program) for program in _BUILD_TOOLS},
}
