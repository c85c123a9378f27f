"""The agent's context as its users already write it: rules, AGENTS.md, CLAUDE.md, skills, subagents.

Formats, as documented where they are defined:

- Cursor rules (https://cursor.com/docs/context/rules): `.cursor/rules/**/*.mdc` (and `.md`)
  with YAML front matter `description`, `globs` (a comma-separated string or a list) and
  `alwaysApply`, giving four kinds: always (`alwaysApply: true`), auto-attached (globs match a
  file in context), agent-requested (a description the agent reads to decide), manual (none of
  them; named with @rule). A subfolder may hold its own `.cursor/rules`, scoped to that folder.
  The legacy single `.cursorrules` file at the root is always applied.
- AGENTS.md (https://agents.md): plain Markdown; the root one applies everywhere, a nested one
  to the files under its folder (the closest one to a file is the most specific).
- Cloud rules, only with `--cloud-rules-enabled` (the seed's LocalCloudRulesService: rules for
  agents running in a cloud VM, not for a person's editor): Cursor rules in the same format, in
  `<workspace>/.cursor/cloud-rules/` (the repository's) and `~/.cursor/cloud-rules/` (the VM's,
  e.g. baked into the image by the operator); format `cursor_cloud_rule`.
- Claude Code memory (https://docs.anthropic.com/en/docs/claude-code/memory), only with
  `--claude-md-enabled`: `CLAUDE.md`, `.claude/CLAUDE.md`, `CLAUDE.local.md` at the root and
  `~/.claude/CLAUDE.md` always; nested `CLAUDE.md` for files under their folder;
  `.claude/rules/**/*.md`, attached by their `paths` globs (always without them).
- Skills (https://cursor.com/docs/context/skills, https://docs.anthropic.com/en/docs/claude-code/skills,
  the Agent Skills standard https://agentskills.io/specification): a folder holding `SKILL.md`
  with front matter `name` and `description`, under `~/.cursor/skills/`,
  `<workspace>/.cursor/skills/`, `<workspace>/.claude/skills/` and `~/.claude/skills/`. The
  answer lists a skill's files; the agent reads them when it uses the skill.
- Subagents (https://cursor.com/docs/context/subagents,
  https://docs.anthropic.com/en/docs/claude-code/sub-agents): `*.md` in `.cursor/agents/`,
  `~/.cursor/agents/`, `.claude/agents/`, `~/.claude/agents/`, front matter `name`,
  `description`, `model`, `tools` (a comma-separated string or a list), `readonly`,
  `is_background`; the body is the subagent's prompt. A workspace definition wins over a home
  one of the same name.

Safety: every file is opened through exec_daemon/kernel/paths.py with the agent's read rules
(the daemon's secrets, `.cursorignore`) and must *really* lie inside the root it was found
under (the workspace, or the home folder for `~/...` sources): the agent can write the
workspace, so a rules folder or rule file symlinked to `/etc`, `~/.ssh` or another checkout
would otherwise put files nobody reviewed as rules (or secrets) in front of the model and the
orchestrator. Such a file or folder is skipped with a diagnostic, and so is a file with more
than one hard link (its other name may be anywhere on the file system). Every read is bounded
(MAX_FILE_BYTES; a larger file is a diagnostic), and so are the folders walked.

Cost: parsed files are kept by path and reused while their stat (mtime, ctime, size, inode) is
unchanged, folder listings while every listed folder's is; a request asked again gets the same
answer while no file or folder it looked at changed: an unchanged workspace costs one stat per
path looked at, no reads and no parsing.
"""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import pathspec

from exec_daemon.kernel.errors import CodedError, ErrorCode
from exec_daemon.kernel.paths import PathRefused, PathRules, open_checked
from exec_daemon.kernel.state import Daemon
from tools.workspace import CURSORIGNORE, AgentPaths

MAX_FILE_BYTES = 256 * 1024
# Files taken from one folder tree (rules, agents) and listed per skill, and folder depth walked.
MAX_FOLDER_FILES = 1000
MAX_SKILL_FILES = 200
MAX_DEPTH = 8
# The content one answer carries at most (rules beyond it come without content, diagnosed), and
# what the parsed-file cache keeps (the least recently used files go first).
MAX_ANSWER_CONTENT = 4 * 1024 * 1024
MAX_CACHED_BYTES = 32 * 1024 * 1024
MAX_CACHED_LISTINGS = 1024

RULE_SUFFIXES = (".mdc", ".md")
T = TypeVar("T")

# Kinds (the proto's RuleKind names, lower case).
ALWAYS, AUTO_ATTACHED, AGENT_REQUESTED, MANUAL, FOLDER = (
    "always",
    "auto_attached",
    "agent_requested",
    "manual",
    "folder",
)


@dataclass(frozen=True)
class Diagnostic:
    path: str
    message: str


@dataclass(frozen=True)
class Rule:
    path: str
    format: str
    kind: str
    name: str
    description: str = ""
    globs: tuple[str, ...] = ()
    body: str = ""
    # The workspace folder (relative, "" for the root) its globs and folder scope count from.
    scope: str = ""

    def matcher(self) -> pathspec.PathSpec:
        return _glob_spec(self.globs)


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: str
    files: tuple[str, ...]
    origin: str


@dataclass(frozen=True)
class Subagent:
    name: str
    description: str
    model: str
    tools: tuple[str, ...]
    readonly: bool
    is_background: bool
    path: str
    prompt: str
    origin: str


@dataclass
class AppliedRule:
    rule: Rule
    applies: bool
    matched_paths: list[str] = field(default_factory=list)
    content: str = ""


@dataclass
class AgentContext:
    rules: list[AppliedRule] = field(default_factory=list)
    skills: list[Skill] = field(default_factory=list)
    subagents: list[Subagent] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # What callers build from this context, kept with it while it stays fresh (the RPC answer).
    memo: dict[str, Any] = field(default_factory=dict)


_SPECS: dict[tuple[str, ...], pathspec.PathSpec] = {}


def _glob_spec(globs: tuple[str, ...]) -> pathspec.PathSpec:
    """Globs as gitignore patterns ("*.ts" matches at any depth, "src/**" under src)."""
    found = _SPECS.get(globs)
    if found is None:
        if len(_SPECS) >= MAX_CACHED_LISTINGS:
            _SPECS.clear()
        found = _SPECS[globs] = pathspec.PathSpec.from_lines("gitignore", globs)
    return found


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


# --- Reading one file, bounded, checked, cached ------------------------------------------------


class FrontMatterError(ValueError):
    pass


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(metadata, body) of a Markdown text with optional YAML front matter."""
    # Imported with the first rule read (~40 ms at start on a loaded machine, for few agents).
    import frontmatter
    import yaml

    handler = frontmatter.YAMLHandler()
    if not handler.detect(text):
        return {}, text
    try:
        raw, body = handler.split(text)
        metadata = yaml.safe_load(raw) if raw.strip() else {}
    except (yaml.YAMLError, ValueError) as exc:
        problem = getattr(exc, "problem", None) or str(exc).split("\n")[0] or type(exc).__name__
        mark = getattr(exc, "problem_mark", None)
        # The mark counts lines of the YAML from 0; the file has the opening "---" above it.
        where = f" (line {mark.line + 2})" if mark is not None else ""
        raise FrontMatterError(f"broken front matter{where}: {problem}") from None
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise FrontMatterError("broken front matter: it must be a YAML mapping (key: value)")
    return metadata, body


StatKey = tuple[int, int, int, int] | None


def _stat_key(path: str) -> StatKey:
    """What tells one version of a file or folder from another (None: it does not exist)."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL byte
        return None
    return (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino)


def unchanged(seen: dict[str, StatKey]) -> bool:
    return all(_stat_key(path) == key for path, key in seen.items())


class ContextFiles:
    """Reads files for the context: bounded, through the agent's read rules, contained in their
    root, parsed once per version (stat) of the file. `seen` records the version of every path
    looked at (for a cheap "nothing changed" check). One reader at a time: hold `lock`."""

    def __init__(self, rules: PathRules) -> None:
        self._rules = rules
        self._parsed: OrderedDict[tuple[str, str], tuple[StatKey, Any]] = OrderedDict()
        self._parsed_bytes = 0
        self._listings: OrderedDict[tuple[str, int, bool], tuple[dict[str, StatKey], list[str]]] = (
            OrderedDict()
        )
        self.lock = threading.Lock()
        self.seen: dict[str, StatKey] = {}

    def parse(
        self,
        path: str,
        root: str,
        parser: Callable[[str, str], T],
        diagnostics: list[Diagnostic],
    ) -> T | None:
        """`parser(path, text)` of the file at `path` (None when missing or refused, with a
        diagnostic for the latter; a parser's ValueError is a diagnostic too)."""
        key = self.seen[path] = _stat_key(path)
        if key is None:
            return None
        cache_key = (path, getattr(parser, "__qualname__", repr(parser)))
        cached = self._parsed.get(cache_key)
        if cached is None or cached[0] != key:
            cached = (key, self._read_and_parse(path, root, parser))
            self._keep(cache_key, cached)
        else:
            self._parsed.move_to_end(cache_key)
        value = cached[1]
        if isinstance(value, Diagnostic):
            diagnostics.append(value)
            return None
        return value  # type: ignore[no-any-return]

    def forget(self) -> None:
        """Drops every parsed file (they are read and checked again on next use)."""
        self._parsed.clear()
        self._parsed_bytes = 0

    def _keep(self, cache_key: tuple[str, str], entry: tuple[StatKey, Any]) -> None:
        """Caches a parsed file (its size counted), dropping the least recently used ones."""
        old = self._parsed.pop(cache_key, None)
        if old is not None:
            self._parsed_bytes -= _cost(old[0])
        self._parsed[cache_key] = entry
        self._parsed_bytes += _cost(entry[0])
        while self._parsed_bytes > MAX_CACHED_BYTES and len(self._parsed) > 1:
            _name, (stat_key, _value) = self._parsed.popitem(last=False)
            self._parsed_bytes -= _cost(stat_key)

    def _read_and_parse(self, path: str, root: str, parser: Callable[[str, str], Any]) -> Any:
        text = self._read(path, root)
        if isinstance(text, Diagnostic):
            return text
        try:
            return parser(path, text)
        except ValueError as exc:
            return Diagnostic(path, f"{exc}; not used")

    def _read(self, path: str, root: str) -> str | Diagnostic:
        try:
            opened = open_checked(path, self._rules)
        except PathRefused as refused:
            return Diagnostic(path, f"not read: {refused.reason}")
        except OSError as exc:
            return Diagnostic(path, f"not read: {exc.strerror or exc}")
        try:
            if not _under(opened.real, root):
                return Diagnostic(path, f"not read: it points outside {root} (to {opened.real})")
            if not stat.S_ISREG(opened.info.st_mode):
                return Diagnostic(path, "not read: not a regular file")
            if opened.info.st_nlink > 1:
                # A hard link has no "real path" elsewhere to check: it may be any file of the
                # same file system, made a rule by whoever linked it.
                return Diagnostic(path, "not read: the file has other hard links")
            if opened.info.st_size > MAX_FILE_BYTES:
                return _too_large(path, opened.info.st_size)
            data = os.pread(opened.fd, MAX_FILE_BYTES + 1, 0)
        finally:
            opened.close()
        if len(data) > MAX_FILE_BYTES:
            return _too_large(path, len(data))
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return Diagnostic(path, "not read: not UTF-8 text")

    def folder_files(
        self, folder: str, root: str, diagnostics: list[Diagnostic], *, depth: int, dirs: bool
    ) -> list[str]:
        """Paths under `folder` (files, or with `dirs` the direct subfolders), sorted, at most
        MAX_FOLDER_FILES, when the folder really lies inside `root`; no symlinked subfolder is
        entered. The listing is reused while no listed folder changed."""
        if (self.seen.setdefault(folder, _stat_key(folder))) is None:
            return []
        real = os.path.realpath(folder)
        if not _under(real, root):
            diagnostics.append(
                Diagnostic(folder, f"not read: the folder points outside {root} (to {real})")
            )
            return []
        cache_key = (folder, depth, dirs)
        cached = self._listings.get(cache_key)
        if cached is not None and unchanged(cached[0]):
            visited, entries = cached
        else:
            visited, entries = _walk(folder, depth, dirs)
            self._listings[cache_key] = (visited, entries)
            if len(self._listings) > MAX_CACHED_LISTINGS:
                self._listings.popitem(last=False)
        self.seen.update(visited)
        if len(entries) > MAX_FOLDER_FILES:
            diagnostics.append(
                Diagnostic(folder, f"only the first {MAX_FOLDER_FILES} entries are read")
            )
        return entries[:MAX_FOLDER_FILES]


def _cost(key: StatKey) -> int:
    """What a cached file costs (at most its size, which the read stops at)."""
    return min(key[2], MAX_FILE_BYTES) if key is not None else 0


def _too_large(path: str, size: int) -> Diagnostic:
    return Diagnostic(
        path,
        f"not read: {size} bytes, over the {MAX_FILE_BYTES // 1024} KiB limit for context files",
    )


def _walk(folder: str, depth: int, dirs: bool) -> tuple[dict[str, StatKey], list[str]]:
    visited: dict[str, StatKey] = {}
    found: list[str] = []
    pending = [(folder, 0)]
    while pending and len(found) <= MAX_FOLDER_FILES:
        current, level = pending.pop()
        visited[current] = _stat_key(current)
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            is_dir = entry.is_dir(follow_symlinks=False)
            if dirs:
                if entry.is_dir():
                    found.append(entry.path)
            elif is_dir:
                if level + 1 < depth:
                    pending.append((entry.path, level + 1))
            else:
                found.append(entry.path)
    found.sort()
    return visited, found


# --- Parsers (path, text) -> value; ValueError = a diagnostic ------------------------------------


def _text_field(metadata: dict[str, Any], key: str) -> str:
    value = metadata.get(key)
    if value is None:
        return ""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise FrontMatterError(f"front matter: {key!r} must be text")
    return str(value).strip()


def _list_field(metadata: dict[str, Any], key: str) -> tuple[str, ...]:
    """A comma-separated string or a YAML list of strings."""
    value = metadata.get(key)
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        items = value
    else:
        raise FrontMatterError(f"front matter: {key!r} must be a list or comma-separated text")
    return tuple(item.strip() for item in items if item.strip())


def _bool_field(metadata: dict[str, Any], key: str) -> bool:
    value = metadata.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise FrontMatterError(f"front matter: {key!r} must be true or false, not {value!r}")
    return value


def _stem(path: str) -> str:
    return Path(path).name.rsplit(".", 1)[0]


def parse_cursor_rule(path: str, text: str) -> Rule:
    metadata, body = split_front_matter(text)
    description = _text_field(metadata, "description")
    globs = _list_field(metadata, "globs")
    if _bool_field(metadata, "alwaysApply"):
        kind = ALWAYS
    elif globs:
        kind = AUTO_ATTACHED
    elif description:
        kind = AGENT_REQUESTED
    else:
        kind = MANUAL
    return Rule(path, "cursor_rule", kind, _stem(path), description, globs, body.strip())


def parse_cloud_rule(path: str, text: str) -> Rule:
    return replace(parse_cursor_rule(path, text), format="cursor_cloud_rule")


def parse_claude_rule(path: str, text: str) -> Rule:
    metadata, body = split_front_matter(text)
    globs = _list_field(metadata, "paths")
    kind = AUTO_ATTACHED if globs else ALWAYS
    description = _text_field(metadata, "description")
    return Rule(path, "claude_rule", kind, _stem(path), description, globs, body.strip())


def _plain_parser(format_name: str, kind: str) -> Callable[[str, str], Rule]:
    def parse(path: str, text: str) -> Rule:
        return Rule(path, format_name, kind, Path(path).name, body=text.strip())

    parse.__qualname__ = f"plain:{format_name}:{kind}"
    return parse


def parse_skill(path: str, text: str) -> Skill:
    metadata, _body = split_front_matter(text)
    name = _text_field(metadata, "name") or Path(path).parent.name
    description = _text_field(metadata, "description")
    if not description:
        raise FrontMatterError("SKILL.md has no 'description' in its front matter")
    return Skill(name, description, path, (), "")


def parse_subagent(path: str, text: str) -> Subagent:
    metadata, body = split_front_matter(text)
    return Subagent(
        name=_text_field(metadata, "name") or _stem(path),
        description=_text_field(metadata, "description"),
        model=_text_field(metadata, "model"),
        tools=_list_field(metadata, "tools"),
        readonly=_bool_field(metadata, "readonly"),
        is_background=_bool_field(metadata, "is_background"),
        path=path,
        prompt=body.strip(),
        origin="",
    )


# --- Putting the context together ------------------------------------------------------------


@dataclass(frozen=True)
class Roots:
    workspace: str  # real path
    home: str  # real path, "" when unknown
    claude_md: bool
    cloud_rules: bool = False


def _relative_paths(
    workspace: str, paths: Iterable[str], diagnostics: list[Diagnostic]
) -> list[str]:
    """The request's paths as normalised workspace-relative paths ("" for the root itself)."""
    found = []
    for path in paths:
        if "\x00" in path:
            diagnostics.append(Diagnostic(repr(path), "contains a NUL byte: ignored"))
            continue
        full = os.path.normpath(os.path.join(workspace, path))
        if not _under(full, workspace):
            diagnostics.append(Diagnostic(path, "outside the workspace: no rule is matched to it"))
            continue
        found.append(os.path.relpath(full, workspace) if full != workspace else "")
    return found


def _ancestors(relative: str) -> list[str]:
    """The workspace-relative folders above `relative` (the root "" excluded), shallow first."""
    parts = relative.split("/")[:-1] if relative else []
    return ["/".join(parts[: index + 1]) for index in range(len(parts))]


def _within(relative: str, scope: str) -> str | None:
    """`relative` as seen from the folder `scope`, or None when it is not under it."""
    if not scope:
        return relative
    if relative.startswith(scope + "/"):
        return relative[len(scope) + 1 :]
    return None


class ContextReader:
    """Builds an AgentContext for a request (call `collect` off the event loop)."""

    def __init__(self, files: ContextFiles, roots: Roots) -> None:
        self.files = files
        self.roots = roots

    def collect(self, paths: Sequence[str], requested: Sequence[str]) -> AgentContext:
        """The context (the caller holds `files.lock`; `files.seen` gets what was looked at)."""
        context = AgentContext()
        relative = _relative_paths(self.roots.workspace, paths, context.diagnostics)
        rules = self._rules(relative, context.diagnostics)
        context.rules = [_apply(rule, relative, set(requested)) for rule in rules]
        _bound_content(context)
        context.skills = self._skills(context.diagnostics)
        context.subagents = self._subagents(context.diagnostics)
        return context

    def _rules(self, relative: list[str], diagnostics: list[Diagnostic]) -> list[Rule]:
        workspace = self.roots.workspace
        rules = self._rules_folder(
            os.path.join(workspace, ".cursor", "rules"), "", parse_cursor_rule, diagnostics
        )
        if self.roots.cloud_rules:
            for folder, root, _origin in self._sources(".cursor", "cloud-rules"):
                rules.extend(self._rules_folder(folder, "", parse_cloud_rule, diagnostics, root))
        legacy = self._plain(os.path.join(workspace, ".cursorrules"), "cursorrules", ALWAYS, "")
        rules.extend(self._parse_all([legacy], workspace, diagnostics))
        rules.extend(self._folder_memory("", diagnostics))
        folders = sorted({folder for path in relative for folder in _ancestors(path)})
        for folder in sorted(folders, key=lambda item: (item.count("/"), item)):
            base = os.path.join(workspace, folder)
            rules.extend(
                self._rules_folder(
                    os.path.join(base, ".cursor", "rules"), folder, parse_cursor_rule, diagnostics
                )
            )
            rules.extend(self._folder_memory(folder, diagnostics))
        if self.roots.claude_md:
            rules.extend(
                self._rules_folder(
                    os.path.join(workspace, ".claude", "rules"), "", parse_claude_rule, diagnostics
                )
            )
            if self.roots.home:
                memory = self._plain(
                    os.path.join(self.roots.home, ".claude", "CLAUDE.md"), "claude_md", ALWAYS, ""
                )
                rules.extend(self._parse_all([memory], self.roots.home, diagnostics))
        return rules

    def _plain(self, path: str, format_name: str, kind: str, scope: str) -> tuple[str, Any, str]:
        return path, _plain_parser(format_name, kind), scope

    def _parse_all(
        self,
        items: Iterable[tuple[str, Callable[[str, str], Rule], str]],
        root: str,
        diagnostics: list[Diagnostic],
    ) -> list[Rule]:
        found = []
        for path, parser, scope in items:
            rule = self.files.parse(path, root, parser, diagnostics)
            if rule is not None:
                found.append(_scoped(rule, scope))
        return found

    def _folder_memory(self, folder: str, diagnostics: list[Diagnostic]) -> list[Rule]:
        """AGENTS.md (and with --claude-md-enabled the CLAUDE.md files) of one folder."""
        base = os.path.join(self.roots.workspace, folder)
        kind = FOLDER if folder else ALWAYS
        items = [self._plain(os.path.join(base, "AGENTS.md"), "agents_md", kind, folder)]
        if self.roots.claude_md:
            names = ["CLAUDE.md"] + ([".claude/CLAUDE.md", "CLAUDE.local.md"] if not folder else [])
            items += [self._plain(os.path.join(base, n), "claude_md", kind, folder) for n in names]
        return self._parse_all(items, self.roots.workspace, diagnostics)

    def _rules_folder(
        self,
        folder: str,
        scope: str,
        parser: Callable[[str, str], Rule],
        diagnostics: list[Diagnostic],
        root: str = "",
    ) -> list[Rule]:
        """The rule files under `folder`, which must really lie in `root` (the workspace when
        not given)."""
        root = root or self.roots.workspace
        paths = self.files.folder_files(folder, root, diagnostics, depth=MAX_DEPTH, dirs=False)
        items = [(path, parser, scope) for path in paths if path.endswith(RULE_SUFFIXES)]
        return self._parse_all(items, root, diagnostics)

    def _sources(self, *parts: str) -> list[tuple[str, str, str]]:
        """(folder, root, origin) of a context folder, workspace first, then home."""
        found = [(os.path.join(self.roots.workspace, *parts), self.roots.workspace, "workspace")]
        if self.roots.home:
            found.append((os.path.join(self.roots.home, *parts), self.roots.home, "home"))
        return found

    def _skills(self, diagnostics: list[Diagnostic]) -> list[Skill]:
        skills: dict[str, Skill] = {}
        for folder, root, origin in [
            *self._sources(".cursor", "skills"),
            *self._sources(".claude", "skills"),
        ]:
            for skill_folder in self.files.folder_files(
                folder, root, diagnostics, depth=1, dirs=True
            ):
                skill_md = os.path.join(skill_folder, "SKILL.md")
                skill = self.files.parse(skill_md, root, parse_skill, diagnostics)
                if skill is None:
                    continue
                listed = self.files.folder_files(
                    skill_folder, root, diagnostics, depth=MAX_DEPTH, dirs=False
                )
                files = tuple(
                    os.path.relpath(path, skill_folder) for path in listed if path != skill_md
                )
                if len(files) > MAX_SKILL_FILES:
                    diagnostics.append(
                        Diagnostic(
                            skill_folder, f"only the first {MAX_SKILL_FILES} files are listed"
                        )
                    )
                skill = replace(skill, files=files[:MAX_SKILL_FILES], origin=origin)
                _keep_first(skills, skill.name, skill, diagnostics)
        return list(skills.values())

    def _subagents(self, diagnostics: list[Diagnostic]) -> list[Subagent]:
        agents: dict[str, Subagent] = {}
        for folder, root, origin in [
            *self._sources(".cursor", "agents"),
            *self._sources(".claude", "agents"),
        ]:
            for path in self.files.folder_files(folder, root, diagnostics, depth=1, dirs=False):
                if not path.endswith(".md"):
                    continue
                agent = self.files.parse(path, root, parse_subagent, diagnostics)
                if agent is not None:
                    agent = replace(agent, origin=origin)
                    _keep_first(agents, agent.name, agent, diagnostics)
        return list(agents.values())


def _keep_first(found: dict[str, Any], name: str, item: Any, diagnostics: list[Diagnostic]) -> None:
    if name in found:
        diagnostics.append(
            Diagnostic(item.path, f"'{name}' is also defined by {found[name].path}, which wins")
        )
        return
    found[name] = item


def _scoped(rule: Rule, scope: str) -> Rule:
    return rule if rule.scope == scope else replace(rule, scope=scope)


def _bound_content(context: AgentContext) -> None:
    """Leaves out the content of the rules past MAX_ANSWER_CONTENT (in order), diagnosed."""
    total = 0
    for applied in context.rules:
        total += len(applied.content)
        if total > MAX_ANSWER_CONTENT and applied.content:
            applied.content = ""
            context.diagnostics.append(
                Diagnostic(
                    applied.rule.path,
                    f"applies, but its content is left out: the answer's rules are over "
                    f"{MAX_ANSWER_CONTENT // (1024 * 1024)} MiB (ask for fewer paths)",
                )
            )


def _apply(rule: Rule, relative: list[str], requested: set[str]) -> AppliedRule:
    matched: list[str] = []
    if rule.kind == FOLDER:
        matched = [path for path in relative if _within(path, rule.scope)]
    elif rule.kind == AUTO_ATTACHED:
        spec = rule.matcher()
        for path in relative:
            inner = _within(path, rule.scope)
            if inner and spec.match_file(inner):
                matched.append(path)
    applies = (
        rule.kind == ALWAYS or bool(matched) or rule.name in requested or rule.path in requested
    )
    return AppliedRule(rule, applies, matched, rule.body if applies else "")


# Answers kept for repeated requests (the same paths asked again while nothing changed), for
# requests up to MAX_CACHED_REQUEST characters.
MAX_ANSWERS = 64
MAX_CACHED_REQUEST = 64 * 1024
# Paths and requested rules one request may name.
MAX_REQUEST_ITEMS = 1000
AnswerKey = tuple[Roots, tuple[str, ...], tuple[str, ...]]


class AgentContexts:
    """Per-daemon service (`daemon.service(AgentContexts)`): the context for a request, from
    files parsed once per version; the same request again, with no file or folder it looked at
    changed (one stat each), gets the same AgentContext back."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon
        self._files = ContextFiles(daemon.service(AgentPaths))
        self._answers: OrderedDict[AnswerKey, tuple[dict[str, StatKey], AgentContext]] = (
            OrderedDict()
        )
        self._ignore_key: StatKey = None

    def roots(self) -> Roots:
        home = self._daemon.env.get("HOME") or ""
        return Roots(
            workspace=os.path.realpath(self._daemon.workspace),
            home=os.path.realpath(home) if home else "",
            claude_md=self._daemon.config.claude_md_enabled,
            cloud_rules=self._daemon.config.cloud_rules_enabled,
        )

    async def context(self, paths: Sequence[str], requested: Sequence[str]) -> AgentContext:
        """Raises CodedError (invalid_argument) for a request naming too many paths or rules."""
        for what, items in (("paths", paths), ("requested_rules", requested)):
            if len(items) > MAX_REQUEST_ITEMS:
                raise CodedError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"{len(items)} {what}: at most {MAX_REQUEST_ITEMS} per request",
                )
        key = (self.roots(), tuple(paths), tuple(requested))
        return await asyncio.to_thread(self._answer, key)

    def subagent(self, name: str) -> Subagent | None:
        """The subagent definition of that name (a workspace one before a home one); call it
        from a worker thread."""
        found = self._answer((self.roots(), (), ()))
        return next((item for item in found.subagents if item.name == name), None)

    def _answer(self, key: AnswerKey) -> AgentContext:
        roots, paths, requested = key
        with self._files.lock:
            cached = self._answers.get(key)
            if cached is not None and unchanged(cached[0]):
                self._answers.move_to_end(key)
                return cached[1]
            # What the agent's read rules hide may change with .cursorignore: read all again.
            ignore = os.path.join(roots.workspace, CURSORIGNORE)
            ignore_key = _stat_key(ignore)
            if ignore_key != self._ignore_key:
                self._files.forget()
                self._ignore_key = ignore_key
            self._files.seen = {ignore: ignore_key}
            context = ContextReader(self._files, roots).collect(paths, requested)
            if sum(map(len, paths)) + sum(map(len, requested)) <= MAX_CACHED_REQUEST:
                self._answers[key] = (self._files.seen, context)
            if len(self._answers) > MAX_ANSWERS:
                self._answers.popitem(last=False)
            return context
