"""Reads a shell command the way bash would (tree-sitter-bash) to judge it.

Two questions: is every simple command in it allowlisted (terminalAllowlist, prefix match on
whole words), and does it only read (for read-only subagents)? Both look at every command the
line would run — after `&&`, `;`, `|`, inside `$(...)`, subshells, loops and functions — and
answer "no" whenever the parse fails or a word that matters is only known at run time.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

_PARSER = Parser(Language(tree_sitter_bash.language()))

# Redirection targets that write nothing anyone can read back.
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_WRITE_OPERATORS = frozenset({">", ">>", "&>", "&>>", ">|", "<>"})
# Nodes whose text is a word only known when bash runs the line.
_DYNAMIC_NODES = frozenset(
    {
        "simple_expansion",
        "expansion",
        "command_substitution",
        "process_substitution",
        "arithmetic_expansion",
        "ansi_c_string",
        "translated_string",
        "brace_expression",
    }
)


@dataclass(frozen=True)
class SimpleCommand:
    """One command bash would run; a word is None when only known at run time ($X, $(...))."""

    words: tuple[str | None, ...]
    # Leading NAME=value words (they change what the command does: PATH=, GIT_PAGER=, ...).
    assignments: tuple[str, ...] = ()

    def text(self) -> str:
        return " ".join(word if word is not None else "<dynamic>" for word in self.words)


@dataclass(frozen=True)
class CommandLine:
    commands: tuple[SimpleCommand, ...]
    # An output redirection to a file (not /dev/null).
    writes_files: bool
    # export/declare/readonly/local, bare NAME=value, function definitions: they change the
    # persistent shell for the commands that follow.
    changes_shell_state: bool
    parse_failed: bool


@functools.lru_cache(maxsize=512)
def parse(command: str) -> CommandLine:
    tree = _PARSER.parse(command.encode("utf-8", "surrogateescape"))
    root = tree.root_node
    walker = _Walker()
    walker.visit(root)
    return CommandLine(
        commands=tuple(walker.commands),
        writes_files=walker.writes_files,
        changes_shell_state=walker.changes_state,
        parse_failed=root.has_error,
    )


class _Walker:
    def __init__(self) -> None:
        self.commands: list[SimpleCommand] = []
        self.writes_files = False
        self.changes_state = False

    def visit(self, node: Node) -> None:
        kind = node.type
        if kind == "command":
            self.commands.append(_simple_command(node))
        elif kind in ("declaration_command", "unset_command"):
            self.changes_state = True
            self.commands.append(SimpleCommand(tuple(_word(child) for child in node.children)))
        elif kind == "variable_assignment" and _is_bare_assignment(node):
            self.changes_state = True
            self.commands.append(SimpleCommand((_word(node),)))
        elif kind == "function_definition":
            self.changes_state = True
        elif kind == "file_redirect" and _redirect_writes(node):
            self.writes_files = True
        for child in node.children:
            self.visit(child)


def _is_bare_assignment(node: Node) -> bool:
    parent = node.parent
    return parent is None or parent.type not in ("command", "declaration_command")


def _simple_command(node: Node) -> SimpleCommand:
    words: list[str | None] = []
    assignments: list[str] = []
    for child in node.children:
        if child.type == "variable_assignment":
            if not words:
                assignments.append(_node_text(child))
            continue
        if child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            continue
        if child.type == "command_name":
            words.append(_word(child.children[0]) if child.children else None)
        elif child.is_named:
            words.append(_word(child))
    return SimpleCommand(tuple(words), tuple(assignments))


def _redirect_writes(node: Node) -> bool:
    operator = next((c.type for c in node.children if not c.is_named), "")
    target = node.children[-1] if node.children else None
    if operator == ">&" or operator == "<&":
        # `2>&1`, `>&-` duplicate or close a descriptor; `>&file` writes a file.
        return target is not None and target.type not in ("number",) and _word(target) != "-"
    if operator not in _WRITE_OPERATORS:
        return False
    return target is None or _word(target) not in _HARMLESS_TARGETS


def _node_text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogateescape")


def _word(node: Node) -> str | None:
    """The literal value of a word, or None when it depends on expansions."""
    kind = node.type
    if kind in _DYNAMIC_NODES:
        return None
    if kind == "command_name":
        return _word(node.children[0]) if node.children else None
    if kind in ("word", "number", "variable_name"):
        if any(child.type in _DYNAMIC_NODES for child in node.children):
            return None
        return re.sub(r"\\(.)", r"\1", _node_text(node))
    if kind == "raw_string":
        return _node_text(node)[1:-1]
    if kind == "string":
        parts: list[str] = []
        for child in node.children:
            if child.type == "string_content":
                parts.append(re.sub(r'\\([$`"\\\n])', r"\1", _node_text(child)))
            elif child.is_named:
                return None
        return "".join(parts)
    if kind == "concatenation":
        pieces = [_word(child) for child in node.children]
        return None if any(piece is None for piece in pieces) else "".join(pieces)  # type: ignore[arg-type]
    if kind == "variable_assignment":
        value = node.children[-1] if len(node.children) == 3 else None
        name = _node_text(node.children[0]) if node.children else ""
        literal = "" if value is None else _word(value)
        return None if literal is None else f"{name}={literal}"
    if not node.is_named:
        return _node_text(node)
    return None


# --- terminalAllowlist --------------------------------------------------------------------------


# Every shell call in allowlist mode splits every entry: a cache keeps that off the call's path.
@functools.lru_cache(maxsize=1024)
def allowlist_entry_words(entry: str) -> tuple[str, ...]:
    """`"npm run test"` → ("npm", "run", "test"); a trailing `*` word means "anything after"."""
    try:
        words = shlex.split(entry)
    except ValueError:
        words = entry.split()
    if words and words[-1] == "*":
        words = words[:-1]
    return tuple(words)


def _starts_with(command: SimpleCommand, prefix: tuple[str, ...]) -> bool:
    words = (*command.assignments, *command.words)
    return (
        bool(prefix)
        and len(words) >= len(prefix)
        and all(word == expected for word, expected in zip(words, prefix, strict=False))
    )


def unallowlisted(command: str, allowlist: Sequence[str]) -> str | None:
    """None when every command of the line is allowlisted, else what is not (for the reason)."""
    line = parse(command)
    if line.parse_failed:
        return "the command could not be parsed"
    if line.writes_files:
        return "the command redirects output to a file"
    prefixes = [words for words in map(allowlist_entry_words, allowlist) if words]
    for simple in line.commands:
        if not any(_starts_with(simple, prefix) for prefix in prefixes):
            return f"`{simple.text()}` is not in terminalAllowlist"
    return None


# --- read-only commands -------------------------------------------------------------------------

_Check = Callable[[list[str]], str | None]


def _plain(_args: list[str]) -> str | None:
    return None


def _forbid(*flags: str) -> _Check:
    def check(args: list[str]) -> str | None:
        for arg in args:
            for flag in flags:
                if arg == flag or (flag.startswith("--") and arg.startswith(flag + "=")):
                    return f"{flag} writes or runs something"
                if len(flag) == 2 and flag[0] == "-" and re.fullmatch(rf"-[^-]*{flag[1]}\S*", arg):
                    return f"{flag} writes or runs something"
        return None

    return check


def _at_most_positional(limit: int, *forbidden: str) -> _Check:
    """Tools whose second file argument is an output file (uniq in out, xxd in out)."""
    base = _forbid(*forbidden)

    def check(args: list[str]) -> str | None:
        positional = [arg for arg in args if not arg.startswith("-")]
        if len(positional) > limit:
            return "a further file argument would be written"
        return base(args)

    return check


def _sed(args: list[str]) -> str | None:
    if any(arg.startswith(("-i", "--in-place", "-s", "--separate")) for arg in args):
        return "sed -i edits files"
    scripts = [arg for arg in args if not arg.startswith("-")][:1]
    for index, arg in enumerate(args):
        if arg in ("-e", "--expression") and index + 1 < len(args):
            scripts.append(args[index + 1])
    # Only line printing: sed's w/e/r commands write files or run commands.
    if all(re.fullmatch(r"[\d,$;\s]*p?[\d,$;\s]*", script or "") for script in scripts):
        return None
    return "only sed scripts that print lines are read-only"


_FIND_ACTIONS = (
    "-delete",
    "-exec",
    "-execdir",
    "-ok",
    "-okdir",
    "-fprint",
    "-fprint0",
    "-fprintf",
    "-fls",
)

_GIT_READ_ONLY = frozenset(
    {
        "status", "log", "diff", "show", "ls-files", "ls-tree", "rev-parse", "blame", "grep",
        "describe", "shortlog", "cat-file", "rev-list", "merge-base", "show-ref", "name-rev",
        "whatchanged", "annotate", "count-objects", "for-each-ref", "var", "version", "help",
    }
)  # fmt: skip


def _git(args: list[str]) -> str | None:
    index = 0
    while index < len(args) and args[index].startswith("-"):
        option = args[index]
        if option in ("-C", "--git-dir", "--work-tree"):
            index += 2
            continue
        if option in ("--no-pager", "--no-optional-locks", "-P", "--bare") or option.startswith(
            ("--git-dir=", "--work-tree=")
        ):
            index += 1
            continue
        return f"git {option} is not read-only"
    if index >= len(args):
        return None
    subcommand, rest = args[index], args[index + 1 :]
    if subcommand == "branch" and all(
        arg in ("-a", "-r", "-v", "-vv", "--list", "--show-current", "--all", "--remotes")
        for arg in rest
    ):
        return None
    if subcommand in ("remote", "tag", "stash") and all(
        arg in ("-v", "--verbose", "-l", "--list", "list") for arg in rest
    ):
        return None
    if subcommand == "config" and rest and rest[0] in ("--get", "--list", "-l", "--get-all"):
        return None
    if subcommand not in _GIT_READ_ONLY:
        return f"git {subcommand} is not read-only"
    if any(arg.startswith(("--output", "--ext-diff", "--textconv", "-o")) for arg in rest):
        return "the git option writes a file or runs a program"
    return None


def _wrapper(skip_options_with_values: frozenset[str]) -> _Check:
    """xargs/timeout/nice run another command: that one must be read-only too."""

    def check(args: list[str]) -> str | None:
        index = 0
        while index < len(args) and (
            args[index].startswith("-") or (index == 0 and _is_number(args[0]))
        ):
            index += 2 if args[index] in skip_options_with_values else 1
        inner = args[index:]
        if not inner:
            return None
        return _read_only_words(inner)

    return check


def _is_number(word: str) -> bool:
    return bool(re.fullmatch(r"[\d.]+[smhd]?", word))


_READ_ONLY_PROGRAMS: dict[str, _Check] = {
    **dict.fromkeys(
        (
            "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "pwd", "echo",
            "printf", "which", "type", "whereis", "file", "stat", "du", "df", "uname",
            "whoami", "id", "ps", "printenv", "realpath", "readlink", "basename", "dirname",
            "diff", "cmp", "comm", "cut", "tr", "nl", "column", "fold", "jq", "true",
            "false", "test", "[", "sleep", "seq", "md5sum", "sha1sum", "sha256sum",
            "sha512sum", "base64", "od", "hexdump", "strings", "nproc", "free", "uptime",
            "locale", "getconf", "arch", "cd", "pushd", "popd", "less", "more", "wait", "read",
        ),
        _plain,
    ),
    "git": _git,
    "find": _forbid(*_FIND_ACTIONS),
    "rg": _forbid("--pre", "--pre-glob"),
    "sed": _sed,
    "sort": _forbid("-o", "--output"),
    "tree": _forbid("-o"),
    "uniq": _at_most_positional(1),
    "xxd": _at_most_positional(1, "-r"),
    "date": _forbid("-s", "--set"),
    "hostname": _at_most_positional(0),
    "env": _wrapper(frozenset({"-u", "--unset", "-C", "--chdir"})),
    "xargs": _wrapper(frozenset({"-n", "-I", "-d", "-P", "-L", "-s", "-E", "-a", "--arg-file"})),
    "timeout": _wrapper(frozenset({"-s", "--signal", "-k", "--kill-after"})),
    "nice": _wrapper(frozenset({"-n"})),
}  # fmt: skip


def _read_only_words(words: Sequence[str | None]) -> str | None:
    if not words or words[0] is None:
        return "the program is only known at run time"
    program = words[0]
    check = _READ_ONLY_PROGRAMS.get(program)
    if check is None:
        return f"`{program}` is not a read-only command"
    args = [word if word is not None else "" for word in words[1:]]
    if program in ("env",) and any("=" in arg for arg in args):
        return "env NAME=value changes what the command does"
    return check(args)


def not_read_only(command: str) -> str | None:
    """None when the command line only reads, else why it may not."""
    line = parse(command)
    if line.parse_failed:
        return "the command could not be parsed"
    if line.writes_files:
        return "the command redirects output to a file"
    if line.changes_shell_state:
        return "the command changes the shell's variables or functions"
    for simple in line.commands:
        if simple.assignments:
            return "NAME=value before a command changes what it does"
        reason = _read_only_words(simple.words)
        if reason is not None:
            return reason
    return None
