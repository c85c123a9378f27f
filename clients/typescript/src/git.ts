// The workspace's changes as git sees them.
import type { ExecDaemon } from "./client.js";

export class Git {
  constructor(private readonly daemon: ExecDaemon) {}

  /** The workspace's diff against `ref` (default HEAD), untracked files included. */
  async diff(ref = ""): Promise<string> {
    return (await this.daemon.unary((c, rpc) => c.getDiff({ ref }, rpc))).diff;
  }

  /** A hash that changes whenever the workspace's changes do (cheap to poll). */
  async changesHash(): Promise<string> {
    return (await this.daemon.unary((c, rpc) => c.getWorkspaceChangesHash({}, rpc))).hash;
  }
}
