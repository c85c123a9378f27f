// Workspace files: read/write/list/upload/download over ControlService's file RPCs,
// edit/glob/grep/delete as the agent's tools (so permission rules and hooks apply to them as to
// the agent's own calls).
import type { ExecDaemon } from "./client.js";
import type { DirectoryEntry } from "./gen/agent/v1/control_pb.js";
import type { EditSuccess, GrepSuccess } from "./gen/agent/v1/files_pb.js";
import { successOf } from "./outcome.js";

/** Bytes asked for per ReadTextFile/ReadBinaryFile window (below the message-size limit). */
const WINDOW_BYTES = 4 * 1024 * 1024;

export interface Entry {
  name: string;
  isDirectory: boolean;
  isSymlink: boolean;
  size: number;
  modifiedMs: number;
  mode: number;
}

export interface EditResult {
  /** The unified diff of the change. */
  diff: string;
  linesAdded: number;
  linesRemoved: number;
  replacements: number;
  created: boolean;
}

export interface GrepOptions {
  /** A file or directory to search (default: the workspace). */
  path?: string;
  /** Only files matching this glob. */
  glob?: string;
  caseInsensitive?: boolean;
  /** At most this many lines (or files). */
  limit?: number;
}

export interface GrepMatch {
  file: string;
  lineNumber: number;
  line: string;
}

export interface GrepResult {
  matches: GrepMatch[];
  totalMatches: number;
  truncated: boolean;
}

const entry = (e: DirectoryEntry): Entry => ({
  name: e.name,
  isDirectory: e.isDirectory,
  isSymlink: e.isSymlink,
  size: Number(e.size),
  modifiedMs: Number(e.modifiedMs),
  mode: e.mode,
});

export class Files {
  constructor(private readonly daemon: ExecDaemon) {}

  /** A text file's content (read in windows, so large files work too). */
  async read(path: string): Promise<string> {
    let content = "";
    let offset = 0n;
    for (;;) {
      const window = await this.daemon.unary((c, rpc) =>
        c.readTextFile({ path, offset, length: BigInt(WINDOW_BYTES) }, rpc),
      );
      content += window.content;
      if (window.eof || window.nextOffset <= offset) return content;
      offset = window.nextOffset;
    }
  }

  /** Writes a text file (created with its directories, or replaced); returns the bytes written. */
  async write(path: string, text: string): Promise<number> {
    const written = await this.daemon.unary((c, rpc) => c.writeTextFile({ path, content: text }, rpc));
    return Number(written.bytesWritten);
  }

  /** A file's bytes (read in windows). */
  async readBytes(path: string): Promise<Uint8Array> {
    const pieces: Uint8Array[] = [];
    for await (const piece of this.windows(path)) pieces.push(piece);
    const all = new Uint8Array(pieces.reduce((sum, piece) => sum + piece.length, 0));
    let at = 0;
    for (const piece of pieces) {
      all.set(piece, at);
      at += piece.length;
    }
    return all;
  }

  /** Writes bytes to a file (in windows, appended after the first). */
  async writeBytes(path: string, data: Uint8Array): Promise<number> {
    return this.writeWindows(path, byteWindows(data));
  }

  /** Copies a local file (a path, in Node) or a Blob (e.g. a browser's File) to `path` on the
   * daemon, in windows (never whole in memory); returns the bytes sent. */
  async upload(source: string | Blob, path: string): Promise<number> {
    return this.writeWindows(path, typeof source === "string" ? localWindows(source) : blobWindows(source));
  }

  /** Copies the daemon's file `path` to a local file (a path, in Node) or into a WritableStream
   * (e.g. a browser's FileSystemWritableFileStream), in windows; returns the bytes received. */
  async download(path: string, destination: string | WritableStream<Uint8Array>): Promise<number> {
    const local = typeof destination === "string" ? await (await nodeFs()).open(destination, "w") : undefined;
    const writer = local === undefined ? (destination as WritableStream<Uint8Array>).getWriter() : undefined;
    let total = 0;
    try {
      for await (const piece of this.windows(path)) {
        if (local !== undefined) await local.write(piece);
        else await writer?.write(piece);
        total += piece.length;
      }
      await writer?.close();
    } catch (error) {
      await writer?.abort(error).catch(() => undefined);
      throw error;
    } finally {
      await local?.close();
    }
    return total;
  }

  private async *windows(path: string): AsyncGenerator<Uint8Array> {
    let offset = 0n;
    for (;;) {
      const window = await this.daemon.unary((c, rpc) =>
        c.readBinaryFile({ path, offset, length: BigInt(WINDOW_BYTES) }, rpc),
      );
      yield window.data;
      offset += BigInt(window.data.length);
      if (window.eof || window.data.length === 0) return;
    }
  }

  private async writeWindows(path: string, pieces: AsyncIterable<Uint8Array>): Promise<number> {
    let total = 0;
    let first = true;
    for await (const piece of pieces) {
      if (piece.length === 0 && !first) continue;
      await this.daemon.unary((c, rpc) => c.writeBinaryFile({ path, data: piece, append: !first }, rpc));
      total += piece.length;
      first = false;
    }
    // An empty source still makes an (empty) file.
    if (first) await this.daemon.unary((c, rpc) => c.writeBinaryFile({ path, data: new Uint8Array() }, rpc));
    return total;
  }

  /** Replaces `oldString` by `newString` (exactly once, unless `replaceAll`); throws
   * `InvalidArgument` (code "no_match" or "multiple_matches") when that is not possible. */
  async edit(
    path: string,
    oldString: string,
    newString: string,
    { replaceAll = false } = {},
  ): Promise<EditResult> {
    const answer = await this.daemon.call({
      tool: { case: "editToolCall", value: { args: { path, oldString, newString, replaceAll } } },
    });
    const done = successOf<EditSuccess>(answer, "edit");
    return {
      diff: done.diff,
      linesAdded: Number(done.linesAdded),
      linesRemoved: Number(done.linesRemoved),
      replacements: done.replacements,
      created: done.created,
    };
  }

  /** A directory's entries. */
  async list(path = "."): Promise<Entry[]> {
    const listed = await this.daemon.unary((c, rpc) => c.listDirectory({ path }, rpc));
    return listed.entries.map(entry);
  }

  /** Files matching a glob pattern, newest first. */
  async glob(pattern: string, { dir = "" } = {}): Promise<string[]> {
    const answer = await this.daemon.call({
      tool: { case: "globToolCall", value: { args: { globPattern: pattern, targetDirectory: dir } } },
    });
    return successOf<{ files: string[] }>(answer, "glob").files;
  }

  /** Lines matching a regular expression (ripgrep syntax). */
  async grep(pattern: string, options: GrepOptions = {}): Promise<GrepResult> {
    const answer = await this.daemon.call({
      tool: {
        case: "grepToolCall",
        value: {
          args: {
            pattern,
            path: options.path ?? "",
            glob: options.glob ?? "",
            caseInsensitive: options.caseInsensitive ?? false,
            headLimit: options.limit ?? 0,
            outputMode: "content",
          },
        },
      },
    });
    const found = successOf<GrepSuccess>(answer, "grep");
    return {
      matches: found.matches.flatMap((file) =>
        file.lines
          .filter((line) => !line.isContext)
          .map((line) => ({ file: file.file, lineNumber: Number(line.lineNumber), line: line.content })),
      ),
      totalMatches: Number(found.totalMatches),
      truncated: found.truncated,
    };
  }

  /** Deletes a file; returns its size. */
  async delete(path: string): Promise<number> {
    const answer = await this.daemon.call({ tool: { case: "deleteToolCall", value: { args: { path } } } });
    return Number(successOf<{ deletedFileSize: bigint }>(answer, "delete").deletedFileSize);
  }
}

async function* byteWindows(data: Uint8Array): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < data.length; at += WINDOW_BYTES) yield data.subarray(at, at + WINDOW_BYTES);
}

async function* blobWindows(blob: Blob): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < blob.size; at += WINDOW_BYTES) {
    yield new Uint8Array(await blob.slice(at, at + WINDOW_BYTES).arrayBuffer());
  }
}

interface NodeFileHandle {
  read(buffer: Uint8Array, offset: number, length: number): Promise<{ bytesRead: number }>;
  write(data: Uint8Array): Promise<unknown>;
  close(): Promise<void>;
}

async function nodeFs(): Promise<{ open(path: string, flags: string): Promise<NodeFileHandle> }> {
  // A variable specifier: bundlers for the browser leave it alone (local paths are Node's).
  const fsName = "node:fs/promises";
  return import(fsName) as Promise<{ open(path: string, flags: string): Promise<NodeFileHandle> }>;
}

async function* localWindows(localPath: string): AsyncGenerator<Uint8Array> {
  const local = await (await nodeFs()).open(localPath, "r");
  try {
    for (;;) {
      const buffer = new Uint8Array(WINDOW_BYTES);
      const { bytesRead } = await local.read(buffer, 0, WINDOW_BYTES);
      if (bytesRead === 0) return;
      yield buffer.subarray(0, bytesRead);
    }
  } finally {
    await local.close();
  }
}
