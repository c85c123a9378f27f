// shell.run (a command to its end) and shell.start (a handle: output so far, stdin, wait, abort).
import type { ExecDaemon } from "./client.js";
import type { RunMode } from "./gen/agent/v1/common_pb.js";
import { Aborted, Timeout, fromConnect, type ExecDaemonError } from "./errors.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ShellArgsSchema } from "./gen/agent/v1/shell_pb.js";
import type { ToolCall } from "./gen/agent/v1/tool_call_pb.js";
import { errorFor, resultOf, successOf } from "./outcome.js";

export interface RunOptions {
  /** The working directory (relative to the workspace, or absolute). */
  cwd?: string;
  /** Milliseconds, 1..600000 (the daemon's default is 30000). */
  timeoutMs?: number;
  /** Variables for this command only (outside run_everything, judged by the daemon's allowlist
   * like the command; a name that is not a shell variable name throws `InvalidArgument`). */
  env?: Record<string, string>;
  /** Which `env` entries are secrets: the daemon redacts their values from all it sends back
   * (needs a daemon started with --secret-redaction-enabled). */
  secretEnv?: string[];
  /** Each piece of standard output as it comes. */
  onStdout?: (text: string) => void;
  /** Each piece of standard error as it comes. */
  onStderr?: (text: string) => void;
  /** Aborts the command (the daemon stops it; the call throws `Aborted`). */
  signal?: AbortSignal;
  /** Overrides the daemon's --run-mode (e.g. resent after a person approved it). */
  runMode?: RunMode;
}

/** Where output too large for the answer went (a file on the daemon's machine). */
export interface Spill {
  path: string;
  sizeBytes: number;
}

/** A command that ran to its end, whatever its exit code. */
export interface CommandResult {
  exitCode: number;
  /** The signal that ended it ("" when it exited). */
  signal: string;
  stdout: string;
  stderr: string;
  /** Set when the output was larger than the answer may carry. */
  spill?: Spill;
  durationMs: number;
  pid: number;
}

interface ShellOutcome {
  exitCode: number;
  signal: string;
  stdout: string;
  stderr: string;
  outputLocation?: { filePath: string; sizeBytes: bigint };
  executionTime: bigint;
  pid: number;
}

function commandResult(answer: ToolCall, timeoutMs: number | undefined): CommandResult {
  const result = resultOf(answer);
  if (result.case === "timeout") {
    const { stdout, stderr } = result.value as { stdout: string; stderr: string };
    const limit = timeoutMs ?? Number(result.value.timeoutMs ?? 0);
    throw new Timeout(`the command did not finish within ${limit} ms`, stdout, stderr);
  }
  // A non-zero exit ("failure") is a result, not an error.
  if (result.case !== "success" && result.case !== "failure") throw errorFor(result, "shell");
  const value = result.value as unknown as ShellOutcome;
  const spill = value.outputLocation?.filePath
    ? { path: value.outputLocation.filePath, sizeBytes: Number(value.outputLocation.sizeBytes) }
    : undefined;
  return {
    exitCode: value.exitCode,
    signal: value.signal,
    stdout: value.stdout,
    stderr: value.stderr,
    spill,
    durationMs: Number(value.executionTime),
    pid: value.pid,
  };
}

function shellArgs(
  command: string,
  options: RunOptions,
  interactive: boolean,
): MessageInitShape<typeof ShellArgsSchema> {
  return {
    command,
    workingDirectory: options.cwd ?? "",
    timeout: options.timeoutMs,
    env: options.env ?? {},
    secretEnv: options.secretEnv ?? [],
    isInteractive: interactive,
  };
}

export class Shell {
  constructor(private readonly daemon: ExecDaemon) {}

  /** Runs a command to its end. A non-zero exit is in the result; a refusal, a timeout or an
   * abort throws (`PermissionDenied`/`NeedsApproval`, `Timeout`, `Aborted`). */
  async run(command: string, options: RunOptions = {}): Promise<CommandResult> {
    const answer = await this.daemon.call(
      { tool: { case: "shellToolCall", value: { args: shellArgs(command, options, false) } } },
      {
        signal: options.signal,
        runMode: options.runMode,
        onDelta: (delta) => {
          if (delta.delta.case !== "shellToolCallDelta") return;
          const piece = delta.delta.value.delta;
          if (piece.case === "stdout") options.onStdout?.(piece.value);
          else if (piece.case === "stderr") options.onStderr?.(piece.value);
        },
      },
    );
    return commandResult(answer, options.timeoutMs);
  }

  /** Starts a command and returns at once; its stdin stays open for `writeStdin`. */
  start(command: string, options: RunOptions = {}): CommandHandle {
    return new CommandHandle(this.daemon, command, options);
  }
}

/** A running command started by `shell.start`. */
export class CommandHandle {
  /** The daemon's shell id and the command's pid, once it started. */
  readonly started: Promise<{ shellId: number; pid: number }>;
  private readonly finished: Promise<CommandResult>;
  private readonly aborter = new AbortController();
  private stdout = "";
  private stderr = "";

  constructor(
    private readonly daemon: ExecDaemon,
    command: string,
    private readonly options: RunOptions,
  ) {
    options.signal?.addEventListener("abort", () => this.abort(), { once: true });
    let markStarted!: (value: { shellId: number; pid: number }) => void;
    let failStart!: (error: unknown) => void;
    this.started = new Promise((resolve, reject) => {
      markStarted = resolve;
      failStart = reject;
    });
    this.finished = this.daemon
      .call(
        { tool: { case: "shellToolCall", value: { args: shellArgs(command, options, true) } } },
        {
          signal: this.aborter.signal,
          runMode: options.runMode,
          onDelta: (delta) => {
            if (delta.delta.case !== "shellToolCallDelta") return;
            const piece = delta.delta.value.delta;
            if (piece.case === "started") markStarted({ shellId: piece.value.shellId, pid: piece.value.pid });
            else if (piece.case === "stdout") {
              this.stdout += piece.value;
              options.onStdout?.(piece.value);
            } else if (piece.case === "stderr") {
              this.stderr += piece.value;
              options.onStderr?.(piece.value);
            }
          },
        },
      )
      .then((answer) => commandResult(answer, options.timeoutMs))
      .catch((error: unknown) => {
        throw this.aborter.signal.aborted
          ? new Aborted("the command was aborted", "aborted", { cause: error })
          : fromConnect(error);
      });
    this.finished.then(
      (result) => markStarted({ shellId: 0, pid: result.pid }),
      (error: ExecDaemonError) => failStart(error),
    );
    this.started.catch(() => undefined);
  }

  /** What the command wrote so far. */
  output(): { stdout: string; stderr: string } {
    return { stdout: this.stdout, stderr: this.stderr };
  }

  /** Waits for the command to end. */
  wait(): Promise<CommandResult> {
    return this.finished;
  }

  /** Writes to the command's stdin; `close` then closes it (the command sees EOF). */
  async writeStdin(chars: string, { close = false } = {}): Promise<number> {
    const { shellId } = await this.started;
    const answer = await this.daemon.call({
      tool: { case: "writeShellStdinToolCall", value: { args: { shellId, chars, closeStdin: close } } },
    });
    return Number(successOf<{ bytesWritten: bigint }>(answer, "write_shell_stdin").bytesWritten);
  }

  /** Stops the command: `wait()` then throws `Aborted`. */
  abort(): void {
    this.aborter.abort();
  }
}
