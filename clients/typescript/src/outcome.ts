// One rule for every tool's answer: the `success` case is the value, every other case becomes a
// typed error. Every tool's result oneof names its shared cases the same way (common.proto).
import type { ToolCall } from "./gen/agent/v1/tool_call_pb.js";
import {
  Aborted,
  ExecDaemonError,
  InvalidArgument,
  NeedsApproval,
  NotFound,
  PermissionDenied,
  Timeout,
  ToolFailed,
} from "./errors.js";

/** The result oneof of an answered ToolCall: `{ case, value }` (case undefined if unset). */
export interface ResultCase {
  case: string | undefined;
  value: Record<string, unknown>;
}

export function resultOf(answer: ToolCall): ResultCase {
  const call = answer.tool.value as { result?: { result?: { case?: string; value?: unknown } } } | undefined;
  const result = call?.result?.result;
  return { case: result?.case, value: (result?.value ?? {}) as Record<string, unknown> };
}

const snake = (name: string) => name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);

function text(value: Record<string, unknown>, ...keys: string[]): string {
  for (const key of keys) {
    const found = value[key];
    if (typeof found === "string" && found !== "") return found;
  }
  return "";
}

/** The typed error for a result case other than success (and other than a shell's failure). */
export function errorFor(result: ResultCase, tool: string): ExecDaemonError {
  const { value } = result;
  const kind = result.case ?? "";
  const code = snake(kind);
  const why = text(value, "reason", "message") || `${tool}: ${code || "no result"}`;
  switch (kind) {
    case "rejected": {
      // ShellRejected carries the common Rejected in `details`.
      const rejected = (value.details ?? value) as Record<string, unknown>;
      const source = typeof rejected.source === "string" ? rejected.source : "";
      const message = text(rejected, "reason") || why;
      // The call's own arguments (a bad timeout, a variable that is not a name): not a policy.
      if (source === "invalid_argument") return new InvalidArgument(message, "invalid_argument");
      return rejected.needsApproval || rejected.needsReview
        ? new NeedsApproval(message, "needs_approval", source)
        : new PermissionDenied(message, "rejected", source);
    }
    case "permissionDenied":
      return new PermissionDenied(why, code);
    case "fileNotFound":
    case "shellNotFound":
      return new NotFound(why, code);
    case "timeout":
      return new Timeout(why, text(value, "stdout"), text(value, "stderr"));
    case "aborted":
      return new Aborted(why, code);
    case "error":
      return new ToolFailed(why, text(value, "code") || "error");
    case "noMatch":
    case "multipleMatches":
    case "notTextFile":
    case "isDirectory":
    case "invalidPattern":
    case "diffDoesNotApply":
      return new InvalidArgument(why, code);
    default:
      return new ToolFailed(why, code || "no_result");
  }
}

/** The success value of an answer, or its typed error. */
export function successOf<T>(answer: ToolCall, tool: string): T {
  const result = resultOf(answer);
  if (result.case !== "success") throw errorFor(result, tool);
  return result.value as T;
}
