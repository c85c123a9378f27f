// Typed errors: every failure a caller may want to handle has its own class, with a stable
// snake_case `code` (the daemon's word for it) and the daemon's human-readable message.
import { Code, ConnectError } from "@connectrpc/connect";

/** Base class of every error the client throws. */
export class ExecDaemonError extends Error {
  /** A stable machine-readable word: "unauthenticated", "not_found", "no_match", ... */
  readonly code: string;

  constructor(message: string, code: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** The token is missing or wrong. */
export class Unauthenticated extends ExecDaemonError {}

/** The daemon could not be reached, or the connection dropped before the call answered. */
export class Unavailable extends ExecDaemonError {}

/** A permission rule, the sandbox or a hook refused the call, or the path is not allowed. */
export class PermissionDenied extends ExecDaemonError {
  /** Who refused: "permissions", "hook", "readonly_agent", "sandbox", ... (when known). */
  readonly source: string;

  constructor(message: string, code: string, source = "", options?: { cause?: unknown }) {
    super(message, code, options);
    this.source = source;
  }
}

/** The call was not run, but a person may approve it (allowlist or auto-review run mode). */
export class NeedsApproval extends PermissionDenied {}

/** The file, directory or shell does not exist. */
export class NotFound extends ExecDaemonError {}

/** The call's arguments were refused (bad path, bad pattern, no match for an edit, ...). */
export class InvalidArgument extends ExecDaemonError {}

/** A command ran out of time; `stdout` and `stderr` hold what it wrote until then. */
export class Timeout extends ExecDaemonError {
  readonly stdout: string;
  readonly stderr: string;

  constructor(message: string, stdout = "", stderr = "", options?: { cause?: unknown }) {
    super(message, "timeout", options);
    this.stdout = stdout;
    this.stderr = stderr;
  }
}

/** The call was aborted (by `abort()`, an AbortSignal, or the daemon shutting down). */
export class Aborted extends ExecDaemonError {}

/** The tool ran but could not do what was asked (`code` says why). */
export class ToolFailed extends ExecDaemonError {}

const CONNECT_CODES: Partial<Record<Code, [new (m: string, c: string) => ExecDaemonError, string]>> = {
  [Code.Unauthenticated]: [Unauthenticated, "unauthenticated"],
  [Code.Unavailable]: [Unavailable, "unavailable"],
  [Code.PermissionDenied]: [PermissionDenied, "permission_denied"],
  [Code.NotFound]: [NotFound, "not_found"],
  [Code.InvalidArgument]: [InvalidArgument, "invalid_argument"],
  [Code.OutOfRange]: [InvalidArgument, "out_of_range"],
  [Code.FailedPrecondition]: [InvalidArgument, "failed_precondition"],
  [Code.Canceled]: [Aborted, "canceled"],
  [Code.Aborted]: [Aborted, "aborted"],
};

// fetch reports a refused or dropped connection as a TypeError ("fetch failed" in Node, "Failed
// to fetch" in Chromium, "NetworkError ..." in Firefox), which Connect wraps as Code.Unknown.
function isNetworkFailure(error: ConnectError): boolean {
  let cause: unknown = error.cause;
  for (let depth = 0; cause instanceof Error && depth < 4; depth++) {
    if (cause instanceof TypeError) return true;
    if (/ECONNREFUSED|ECONNRESET|EPIPE|socket hang up|other side closed/.test(cause.message)) return true;
    cause = (cause as { cause?: unknown }).cause;
  }
  return /fetch failed|failed to fetch|networkerror|ECONNREFUSED|ECONNRESET|terminated|other side closed/i.test(
    error.rawMessage,
  );
}

/** The typed error for anything a Connect call threw. */
export function fromConnect(error: unknown): ExecDaemonError {
  if (error instanceof ExecDaemonError) return error;
  const failure = ConnectError.from(error);
  if (failure.code === Code.DeadlineExceeded) {
    return new Timeout(failure.rawMessage, "", "", { cause: failure });
  }
  const known = CONNECT_CODES[failure.code];
  if (known !== undefined) {
    const [Kind, code] = known;
    const typed = new Kind(failure.rawMessage, code);
    (typed as { cause?: unknown }).cause = failure;
    return typed;
  }
  if (isNetworkFailure(failure)) {
    // A browser reports a CORS refusal exactly like an unreachable server.
    const inPage = typeof (globalThis as { document?: unknown }).document !== "undefined";
    const hint = inPage ? " (or this page's origin is not in the daemon's --cors-allowed-origins)" : "";
    return new Unavailable(`the daemon could not be reached${hint}: ${failure.rawMessage}`, "unavailable", {
      cause: failure,
    });
  }
  return new ExecDaemonError(failure.rawMessage, Code[failure.code]?.toLowerCase() ?? "unknown", {
    cause: failure,
  });
}

/** The typed error for an ExecError (a call the daemon could not run). */
export function fromExecError(code: string, message: string): ExecDaemonError {
  switch (code) {
    case "invalid_argument":
    case "already_exists":
      return new InvalidArgument(message, code);
    case "unavailable":
    case "resource_exhausted":
      return new Unavailable(message, code);
    case "aborted":
      return new Aborted(message, code);
    default:
      return new ExecDaemonError(message, code);
  }
}
