"""Reads a shell command the way bash would (tree-sitter-bash) to judge it.

Two questions: is every simple command in it allowlisted (terminalAllowlist, prefix match on
whole words, and what the command runs in turn: exec_daemon/guards/runners.py), and does it only
read (for read-only subagents)? Both look at every command the
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

from exec_daemon.guards.runners import effects

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
    # Why bash could run something the guard cannot see in the line (None: it sees it all).
    unseen: str | None
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
        unseen=_unseen(root),
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


# --- what the guard can fully see ----------------------------------------------------------------
#
# Bash runs code hidden in plain-looking words: `${x@P}` expands `$(...)` inside x's value, an
# arithmetic context evaluates a variable's value as an expression (`a[$(cmd)]` runs cmd), `${x:=v}`
# assigns for a later call, `$"..."` is re-expanded after translation. So a line is judged only
# when every node in it is of a form known not to execute anything; anything else is "unseen".

# Named nodes that are plain structure or literal text.
_VISIBLE_NODES = frozenset(
    {
        "program", "list", "pipeline", "command", "command_name", "word", "number",
        "raw_string", "string", "string_content", "concatenation", "comment",
        "redirected_statement", "file_redirect", "file_descriptor", "heredoc_redirect",
        "heredoc_start", "heredoc_body", "heredoc_content", "heredoc_end", "herestring_redirect",
        "subshell", "negated_command", "if_statement", "elif_clause", "else_clause",
        "while_statement", "do_group", "case_statement", "case_item", "extglob_pattern",
        "ansi_c_string", "brace_expression", "regex", "variable_name", "special_variable_name",
    }
)  # fmt: skip
# Tokens of plain structure (`$`, `$(`, `((`, `coproc`, `function`, ... are not among them).
_VISIBLE_TOKENS = frozenset(
    {
        ";", "&", "&&", "||", "|", "|&", "(", ")", "{", "}", "!", "if", "then", "fi", "elif",
        "else", "while", "until", "do", "done", "case", "in", "esac", ";;", ";&", ";;&", '"',
        ">", "<", ">>", "&>", "&>>", ">&", "<&", ">|", "<>", ">&-", "<&-", "<<", "<<-",
        "<<<", "=", "+=", "..", ",", "for", "\n",
    }
)  # fmt: skip
# Operators of ${name OP word} that only look at the value: no assignment (= :=), no
# evaluation (@P, !indirection), no arithmetic (the :offset:length of a substring is checked apart).
_EXPANSION_OPERATORS = frozenset(
    {":-", "-", ":+", "+", "#", "##", "%", "%%", "/", "//", "/#", "/%", "^", "^^", ",", ",,"}
)
# Test operators whose operands bash evaluates as arithmetic expressions, or as variable names.
_ARITHMETIC_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_NAME_TESTS = frozenset({"-v", "-R"})
_LITERAL_INTEGER = re.compile(r"[+-]?\d+")
# What starts an expansion in text bash expands (a `$` before anything else is a plain `$`).
_EXPANSION_START = re.compile(r"`|\$[\w{(@*#?!$'\"-]")
# `{name}>file` assigns a descriptor to name; `{a[i]}>file` evaluates the subscript.
_DESCRIPTOR_VARIABLE = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*(\[.*\])?\}")
# Loop variables that bash gives a meaning (PATH, IFS, BASH_ENV, PS4, ...) are all upper case.
_PLAIN_VARIABLE = re.compile(r"[a-z_][a-z0-9_]*")


def _unseen(node: Node) -> str | None:
    """Why bash could run something hidden in this node, or None when it cannot."""
    kind = node.type
    if not node.is_named:
        if kind == "$" and _starts_translation(node):
            return '`$"..."` is translated, then expanded: the guard cannot see the result'
        if kind in _VISIBLE_TOKENS or kind == "$":
            return None
        return f"`{_node_text(node)}` is a form the guard does not judge"
    check = _CHECKS.get(kind)
    if check is not None:
        return check(node)
    if kind in _VISIBLE_NODES:
        return _unseen_children(node)
    if kind in ("command_substitution", "process_substitution"):
        return f"`{_node_text(node)}` runs a command"
    return f"`{_node_text(node)}` ({kind.replace('_', ' ')}) is a form the guard does not judge"


def _starts_translation(dollar: Node) -> bool:
    """`$"..."`: bash translates the string, then expands what the translation says."""
    after = dollar.next_sibling
    return after is not None and after.type == "string" and after.start_byte == dollar.end_byte


def _unseen_children(node: Node) -> str | None:
    for child in node.children:
        reason = _unseen(child)
        if reason is not None:
            return reason
    return None


def _unseen_word(node: Node) -> str | None:
    if _DESCRIPTOR_VARIABLE.fullmatch(_node_text(node)):
        return f"`{_node_text(node)}` names a variable bash assigns a descriptor to"
    return _unseen_text(node) if node.child_count == 0 else _unseen_children(node)


def _unseen_text(node: Node, text: str | None = None) -> str | None:
    """Literal text the parser saw no expansion in: bash still expands a `$` or a backtick in it
    (tree-sitter reads `${x:-`cmd`}` as a plain word)."""
    if text is None and node.child_count:
        return _unseen_children(node)
    shown = _node_text(node) if text is None else text
    if _EXPANSION_START.search(re.sub(r"\\.", "", shown)):
        return f"`{_node_text(node)}` holds an expansion the guard cannot see"
    return None


def _unseen_redirect(node: Node) -> str | None:
    target = node.children[-1] if node.children else None
    if target is not None and (_word(target) or "").startswith(("/dev/tcp/", "/dev/udp/")):
        return f"`{_node_text(node)}` opens a network connection"
    return _unseen_children(node)


def _unseen_heredoc(node: Node) -> str | None:
    start = next((child for child in node.children if child.type == "heredoc_start"), None)
    if start is not None and re.search(r"['\"\\]", _node_text(start)):
        return None  # <<'EOF': the body is literal text
    return _unseen_children(node)


def _unseen_expansion(node: Node) -> str | None:
    text = _node_text(node)
    children = node.children[1:]  # after `${`
    if children and children[0].type == "#":  # ${#name}: the length
        children = children[1:]
    if not children or children[0].type not in (
        "variable_name",
        "special_variable_name",
        "subscript",
    ):
        return f"`{text}` is an indirect or evaluated expansion"
    name, rest = children[0], [child for child in children[1:] if child.type != "}"]
    if name.type == "subscript" and not _literal_subscript(name):
        return f"`{text}`: bash evaluates the array subscript as arithmetic"
    if not rest:
        return None
    operator = rest[0].type
    operands = [child for child in rest[1:] if child.is_named]
    if operator == ":" and all(
        operand.type == "number" and _LITERAL_INTEGER.fullmatch(_node_text(operand))
        for operand in operands
    ):
        return None  # ${x:1:2}, ${@:2}: literal offsets
    if operator not in _EXPANSION_OPERATORS:
        return f"`{text}` assigns, evaluates or transforms with `{_node_text(rest[0])}`"
    for operand in operands:
        # Inside "...", quotes within ${...} are plain characters: `"${x:-'$(cmd)'}"` runs cmd.
        if operand.type in ("raw_string", "ansi_c_string") and _double_quoted(node):
            reason = _unseen_text(operand, _node_text(operand).lstrip("$"))
        else:
            reason = _unseen(operand)
        if reason is not None:
            return reason
    return None


def _double_quoted(node: Node) -> bool:
    """Whether `node` is inside "..." or a here-document's body (within the same command)."""
    parent = node.parent
    while parent is not None and parent.type not in ("command", "program", "command_substitution"):
        if parent.type in ("string", "heredoc_body"):
            return True
        parent = parent.parent
    return False


def _literal_subscript(subscript: Node) -> bool:
    index = subscript.children[2] if len(subscript.children) > 2 else None
    return index is not None and re.fullmatch(r"[+-]?\d+|@|\*", _node_text(index)) is not None


def _unseen_arithmetic(node: Node) -> str | None:
    inner = _node_text(node)
    # Only numbers and operators: a name would be evaluated, and its value recursively with it.
    if re.fullmatch(r"\$(\(\(|\[)[0-9\s+\-*/%()<>=!&|^~?:,]*(\)\)|\])", inner):
        return None
    return f"`{inner}`: bash evaluates the names in arithmetic, and their values as code"


def _unseen_test(node: Node) -> str | None:
    """[[ ... ]] and [ ... ]: the operands like any other word, then the operators between them."""
    operands: list[Node] = []
    words = _test_words(node, operands)
    for operand in operands:
        reason = _unseen(operand)
        if reason is not None:
            return reason
    # In [ ] (not [[ ]]) a word known only at run time may turn out to be an operator.
    return _unseen_test_words(words, operators_are_static=node.children[0].type == "[[")


def _test_words(node: Node, operands: list[Node]) -> list[str | None]:
    """The words of a test expression in order: operators as text, operands by their value."""
    words: list[str | None] = []
    for child in node.children:
        if child.type in ("binary_expression", "unary_expression", "parenthesized_expression"):
            words.extend(_test_words(child, operands))
        elif child.type == "test_operator" or not child.is_named:
            if child.type not in ("[[", "]]", "[", "]"):
                words.append(_node_text(child))
        else:
            operands.append(child)
            words.append(_word(child))
    return words


# Operators next to which a word known only at run time stays an operand.
_TEST_UNARY = frozenset(
    "-a -b -c -d -e -f -g -h -k -p -r -s -t -u -w -x -G -L -N -O -S -n -z".split()
)
_TEST_BINARY = frozenset({"=", "==", "!=", "<", ">", "=~", "-nt", "-ot", "-ef"})


def _unseen_test_words(words: Sequence[str | None], operators_are_static: bool) -> str | None:
    """Why `test`/[ ]/[[ ]] with these words could evaluate a name or arithmetic."""
    for index, word in enumerate(words):
        before = words[index - 1] if index > 0 else None
        after = words[index + 1] if index + 1 < len(words) else None
        if word is None:
            if operators_are_static or before in _TEST_UNARY | _TEST_BINARY:
                continue
            if after in _TEST_BINARY:
                continue
            return "a test word known only at run time could be an operator that evaluates it"
        if word in _NAME_TESTS:
            return f"the test `{word}` evaluates a variable name"
        if word in _ARITHMETIC_TESTS and not all(
            operand is not None and _LITERAL_INTEGER.fullmatch(operand)
            for operand in (before, after)
        ):
            return f"the test `{word}` evaluates its operands as arithmetic"
    return None


def _unseen_assignment(node: Node) -> str | None:
    target = node.children[0] if node.children else None
    if target is None or target.type != "variable_name":
        return f"`{_node_text(node)}`: bash evaluates the array subscript as arithmetic"
    return _unseen_children(node)


def _unseen_group(node: Node) -> str | None:
    if node.children and node.children[0].type == "((":
        return f"`{_node_text(node)}` is arithmetic: bash evaluates the names in it as code"
    return _unseen_children(node)


def _unseen_loop(node: Node) -> str | None:
    variable = next((child for child in node.children if child.type == "variable_name"), None)
    keyword = node.children[0].type if node.children else ""
    if keyword != "for" or variable is None:
        return f"`{_node_text(node)}` is a loop form the guard does not judge"
    if not _PLAIN_VARIABLE.fullmatch(_node_text(variable)):
        return f"the loop sets `{_node_text(variable)}`, which may be one bash gives a meaning"
    return _unseen_children(node)


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


# How the nodes that need more than a look at their children are judged.
_CHECKS: dict[str, Callable[[Node], str | None]] = {
    "simple_expansion": _unseen_children,
    "expansion": _unseen_expansion,
    "arithmetic_expansion": _unseen_arithmetic,
    "test_command": _unseen_test,
    "variable_assignment": _unseen_assignment,
    "compound_statement": _unseen_group,
    "for_statement": _unseen_loop,
    "word": _unseen_word,
    "concatenation": _unseen_word,
    "regex": _unseen_text,
    "extglob_pattern": _unseen_text,
    "string_content": _unseen_text,
    "heredoc_content": _unseen_text,
    "heredoc_body": _unseen_text,
    "heredoc_redirect": _unseen_heredoc,
    "file_redirect": _unseen_redirect,
}


# Builtins that run text as code, change how later words are looked up or read, or assign to a
# name given as text (a subscript in that name is evaluated): never allowlisted, whatever the list.
_NEVER_ALLOWLISTED = frozenset(
    {
        "eval", "source", ".", "exec", "trap", "enable", "alias", "unalias", "hash", "fc",
        "bind", "complete", "compgen", "compopt", "set", "shopt", "declare", "typeset", "local",
        "export", "readonly", "let", "read", "mapfile", "readarray", "getopts", "unset",
        "coproc", "function", "select", "caller", "history",
    }
)  # fmt: skip
# Builtins with an option that assigns to a variable named by the next word.
_ASSIGNING_OPTIONS = {"printf": "-v", "wait": "-p"}


@dataclass(frozen=True)
class AllowlistVerdict:
    """How terminalAllowlist judges a line: `refusal` says why it needs approval; else it may
    run, confined by the sandbox when `confine` says why it must be (it runs the repository's
    own code: a build tool's scripts)."""

    refusal: str | None = None
    confine: str | None = None


# How deep shell lines that programs run (`watch 'cmd'`, `ssh host cmd`) are followed.
_MAX_NESTING = 4


def unallowlisted(command: str, allowlist: Sequence[str]) -> str | None:
    """None when every command of the line is allowlisted and runs only what the allowlist
    allows without a sandbox, else why not (for the reason)."""
    verdict = judge_allowlist(command, allowlist)
    return verdict.refusal or verdict.confine


def judge_allowlist(command: str, allowlist: Sequence[str]) -> AllowlistVerdict:
    return _judge_cached(command, tuple(allowlist))


# The verdict depends on the line and the allowlist alone; agents repeat lines (`git status`).
@functools.lru_cache(maxsize=512)
def _judge_cached(command: str, allowlist: tuple[str, ...]) -> AllowlistVerdict:
    prefixes = tuple(words for words in map(allowlist_entry_words, allowlist) if words)
    return _judge_line(command, prefixes, 0)


def _judge_line(
    command: str, prefixes: tuple[tuple[str, ...], ...], depth: int
) -> AllowlistVerdict:
    line = parse(command)
    if line.parse_failed:
        return AllowlistVerdict("the command could not be parsed")
    if line.unseen is not None:
        return AllowlistVerdict(line.unseen)
    if line.writes_files:
        return AllowlistVerdict("the command redirects output to a file")
    confine: str | None = None
    for simple in line.commands:
        verdict = _judge_command(simple, prefixes, depth)
        if verdict.refusal is not None:
            return verdict
        confine = confine or verdict.confine
    return AllowlistVerdict(confine=confine)


def _judge_command(
    simple: SimpleCommand, prefixes: tuple[tuple[str, ...], ...], depth: int
) -> AllowlistVerdict:
    if not any(_starts_with(simple, prefix) for prefix in prefixes):
        return AllowlistVerdict(f"`{simple.text()}` is not in terminalAllowlist")
    reason = _hidden_evaluation(simple.words)
    if reason is not None:
        return AllowlistVerdict(reason)
    runs = effects(simple.words)
    if runs.refusal is not None:
        return AllowlistVerdict(runs.refusal)
    if (runs.commands or runs.lines) and depth >= _MAX_NESTING:
        return AllowlistVerdict(f"`{simple.text()}` nests commands too deeply to judge")
    inner = [_judge_command(SimpleCommand(words), prefixes, depth + 1) for words in runs.commands]
    inner += [_judge_line(text, prefixes, depth + 1) for text in runs.lines]
    confine = runs.repository_code
    for verdict in inner:
        if verdict.refusal is not None:
            return verdict
        confine = confine or verdict.confine
    return AllowlistVerdict(confine=confine)


def _hidden_evaluation(words: Sequence[str | None]) -> str | None:
    """Builtins that evaluate an argument as code, a variable name or arithmetic."""
    program, args = (words[0] if words else None), words[1:]
    if program in _NEVER_ALLOWLISTED:
        return f"`{program}` runs text as code or assigns variables: it always needs approval"
    assigning = _ASSIGNING_OPTIONS.get(program or "")
    if assigning is not None and any(arg is None or arg.startswith(assigning) for arg in args):
        return f"`{program} {assigning}` assigns a variable"
    if program in ("test", "["):
        return _unseen_test_words(list(args), operators_are_static=False)
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
    # What the program would run besides itself, by the allowlist's table (`env -u`, `less +!`).
    runs = effects(words)
    if runs.refusal is not None:
        return runs.refusal
    args = [word if word is not None else "" for word in words[1:]]
    return check(args)


def not_read_only(command: str) -> str | None:
    """None when the command line only reads, else why it may not."""
    line = parse(command)
    if line.parse_failed:
        return "the command could not be parsed"
    if line.unseen is not None:
        return line.unseen
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
