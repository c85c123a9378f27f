"""The bash side of the shell protocol (see tools/shell/session.py for the daemon side).

A session is `bash --noprofile --norc -c SESSION_MAIN bash CMD_FD STATUS_FD DIR HOME RC RESTORE`
(DIR: its state directory, beside a `bash` file holding SESSION_LOOP; HOME: where it falls back
to when its directory vanished; RC: an rc file to source; RESTORE: a state to start from).
It reads requests from fd 61 (two NUL-terminated fields: a header of daemon-written bash code,
then the user's command) and writes NUL-separated records to fd 62, which user commands never
see (both are closed around the `eval`), so no output can fake them:

    R                   ready (after the rc file and the restored state)
    S seq status cwd    command `seq` ended with `status`, in directory `cwd`
    D seq file          the state after command `seq` (0: at start) is in `file`; the files
                        alternate, so the previous one stays whole while the next is written

The loop runs in a sourced file so that a command can be abandoned: on SIGUSR1 the session
turns on function tracing with a DEBUG trap that `return`s from every frame (user functions,
sourced files, then the loop file itself), so the rest of the interrupted command never runs;
the outer loop then reports it and sources the loop again. `exit` (or `set -e`) in a command
ends the session; its EXIT trap leaves the state in DIR/state.exit so a new session restarts
where it was.

The state is what a sibling shell (a second call while the session is busy) or a restarted
session inherits: exported variables, functions, aliases and the working directory.
"""

from __future__ import annotations

# fds the session bash uses for the protocol (the daemon's pipe ends are dup'ed onto them).
COMMAND_FD = 61
STATUS_FD = 62

# The state dump: plain builtins writing to a tmpfs file (~0.1-0.2 ms); `>|` because a
# command may have turned on noclobber. The call's mark (exec_daemon/kernel/call_marks.py) is
# dropped first: it belongs to one call, never to a state other shells start from.
_DUMP_FUNCTION = r"""
__ed_dump() {
  builtin unset EXEC_DAEMON_CALL
  { builtin export -p; builtin declare -f; builtin alias -p
    builtin printf 'builtin cd -- %q 2>/dev/null\n' "$PWD"; } >|"$1" 2>/dev/null
}
"""

SESSION_MAIN = (
    r"""
exec 61<&"$1" 62>&"$2"
__ed_in=$1 __ed_out=$2
exec {__ed_in}<&- {__ed_out}>&-
__ed_dir=$3 __ed_home=$4 __ed_rcfile=$5 __ed_restore=$6
builtin set --
builtin shopt -s expand_aliases
if [[ -n $__ed_rcfile && -r $__ed_rcfile ]]; then
  builtin source "$__ed_rcfile" </dev/null >/dev/null 2>&1 61<&- 62>&-
fi
if [[ -n $__ed_restore && -r $__ed_restore ]]; then
  builtin source "$__ed_restore" </dev/null >/dev/null 2>&1 61<&- 62>&-
fi
{ builtin set +o errexit +o nounset +o xtrace; } 2>/dev/null
"""
    + _DUMP_FUNCTION
    + r"""
__ed_finish() {
  builtin printf 'S\0%s\0%s\0%s\0' "$__ed_seq" "$1" "$__ed_end" >&62
  __ed_busy=0
  if [[ -z $__ed_nodump ]]; then __ed_save "$__ed_seq"; fi
}
__ed_save() {
  __ed_n=$(( 1 - __ed_n ))
  __ed_dump "$__ed_dir/state.$__ed_n"
  builtin printf 'D\0%s\0%s\0' "$1" "$__ed_dir/state.$__ed_n" >&62
}
__ed_on_usr1() {
  if [[ ${__ed_user-} == 1 ]]; then
    __ed_aborting=1
    builtin set -T
    builtin trap 'if [[ ${__ed_aborting-} == 1 ]]; then if (( ${#BASH_SOURCE[@]} <= __ed_base )); then __ed_aborting=0; fi; builtin return 130; fi' DEBUG
  fi
}
__ed_on_exit() {
  if [[ ${__ed_busy-} == 1 ]]; then __ed_dump "$__ed_dir/state.exit"; fi
}
builtin trap '__ed_on_usr1' USR1
builtin trap '__ed_on_exit' EXIT
__ed_eof=0 __ed_busy=0 __ed_user=0 __ed_seq=0 __ed_end=$PWD __ed_x= __ed_n=0 __ed_nodump=
__ed_save 0
builtin printf 'R\0' >&62
while :; do
  # The loop file is named `bash` and sourced by that name from its directory, so bash's error
  # messages read "bash: line N: ..." as with `bash -c`; it changes back to $__ed_here at once.
  __ed_here=$PWD __ed_old=${OLDPWD-} __ed_sp=0
  if builtin shopt -q sourcepath; then __ed_sp=1; fi
  builtin cd -- "$__ed_dir/.." 2>/dev/null
  builtin shopt -u sourcepath
  builtin source bash
  __ed_rc=$?
  builtin trap - DEBUG
  builtin set +T
  __ed_aborting=0 __ed_user=0
  if [[ $__ed_eof == 1 ]]; then builtin exit 0; fi
  if [[ $__ed_busy == 1 ]]; then __ed_end=$PWD; __ed_finish "$__ed_rc"; fi
done
"""
)

_LOOP_LINES = (
    # Back to where the session was (the state directory only served to name this file).
    r"""builtin cd -- "$__ed_here" 2>/dev/null || builtin cd -- "$__ed_home" 2>/dev/null""",
    r"""if [[ -n $__ed_old ]]; then OLDPWD=$__ed_old; else builtin unset OLDPWD; fi""",
    r"""if [[ $__ed_sp == 1 ]]; then builtin shopt -s sourcepath; fi""",
    r"""__ed_base=${#BASH_SOURCE[@]}""",
    r"""while :; do""",
    r"""IFS= builtin read -r -d '' -u 61 __ed_hdr || { __ed_eof=1; builtin return 0; }""",
    r"""IFS= builtin read -r -d '' -u 61 __ed_cmd || { __ed_eof=1; builtin return 0; }""",
    r"""__ed_wd= __ed_file= __ed_prev= __ed_nodump= __ed_env=""",
    r'builtin eval "$__ed_hdr"',
    r"""if [[ -n $__ed_file ]]; then IFS= builtin read -r -d '' __ed_cmd <"$__ed_file" || :; fi""",
    r"""__ed_busy=1""",
    r"""if [[ -n $__ed_wd ]]; then __ed_prev=$PWD; builtin cd -- "$__ed_wd" 2>/dev/null || :; fi""",
    r"""case $__ed_x in *x*) __ed_pre='builtin set -x;' ;; *) __ed_pre= ;; esac""",
    r"""__ed_user=1""",
    # A call's own variables (ShellArgs.env) exist in a subshell, for that command only.
    r"""if [[ -n $__ed_env ]]; then ( builtin eval "$__ed_env"; builtin eval "$__ed_pre$__ed_cmd" )"""
    r""" </dev/null 61<&- 62>&-; else builtin eval "$__ed_pre$__ed_cmd" </dev/null 61<&- 62>&-; fi""",
    r"""{ __ed_rc=$? __ed_user=0 __ed_x=$- __ed_end=$PWD; builtin set +x; } 2>/dev/null""",
    r"""if [[ -n $__ed_prev ]]; then builtin cd -- "$__ed_prev" 2>/dev/null || :; fi""",
    r'__ed_finish "$__ed_rc"',
    r"""done""",
)
# One line, so that the user's command (eval'd on line 1) reports its own line numbers.
SESSION_LOOP = "; ".join(_LOOP_LINES).replace("do;", "do") + "\n"
# The loop file's name inside the session directory (see SESSION_MAIN).
SESSION_LOOP_NAME = "bash"

_ONE_SHOT_LINES = (
    r"""builtin shopt -s expand_aliases""",
    r"""if [[ -n $1 ]]; then builtin source "$1" </dev/null >/dev/null 2>&1; fi""",
    r"""builtin unset -f __ed_dump __ed_save __ed_finish __ed_on_usr1 __ed_on_exit 2>/dev/null""",
    r'builtin eval "$5"',
    r"""if [[ -n $2 ]]; then builtin cd -- "$2" || builtin exit 126; fi""",
    r"""if [[ -n $4 ]]; then IFS= builtin read -r -d '' __ed_cmd <"$4" || :; else __ed_cmd=$3; fi""",
    r"""builtin set --""",
    r'builtin eval "$__ed_cmd"',
)
# A one-shot shell:
# `bash --noprofile --norc -c ONE_SHOT_MAIN bash STATE CWD COMMAND COMMAND_FILE PINNED`.
# It starts from the session's state (when there is one), sets the pinned variables again (see
# ShellSession.submit), then runs the command (on line 1).
ONE_SHOT_MAIN = "; ".join(_ONE_SHOT_LINES)
