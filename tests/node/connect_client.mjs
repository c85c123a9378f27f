// A Node client of the daemon built on @connectrpc/connect-node, driven by tests/test_interop_node.py.
// No codegen: the service and message descriptors come from a FileDescriptorSet (protoc
// --descriptor_set_out --include_imports) whose path the test passes in.
//
// node connect_client.mjs SCENARIO URL TOKEN DESCRIPTOR_SET [OPTIONS_JSON]
//   smoke       Ping, then one ExecStream carrying a read_todos call (and a clean close).
//   wrong-token many calls with a wrong token (unary with a body, server-streaming); counts codes.
// Prints one JSON document on stdout.

import { readFileSync } from "node:fs";

import { create, fromBinary, toJson } from "@bufbuild/protobuf";
import { createFileRegistry } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from "@connectrpc/connect-node";

const [scenario, baseUrl, token, descriptorSetPath, optionsJson] = process.argv.slice(2);
const options = JSON.parse(optionsJson ?? "{}");

const registry = createFileRegistry(
  fromBinary(FileDescriptorSetSchema, readFileSync(descriptorSetPath)),
);
const controlService = registry.getService("agent.v1.ControlService");
const execService = registry.getService("agent.v1.ExecService");
const schema = (name) => {
  const message = registry.getMessage(name);
  if (message === undefined) throw new Error(`no message ${name} in the descriptor set`);
  return message;
};

function transport() {
  const common = { baseUrl, httpVersion: options.httpVersion ?? "2" };
  switch (options.protocol ?? "connect") {
    case "connect":
      return createConnectTransport(common);
    case "grpcweb":
      return createGrpcWebTransport(common);
    case "grpc":
      return createGrpcTransport({ baseUrl });
    default:
      throw new Error(`unknown protocol ${options.protocol}`);
  }
}

const asJson = (message) => toJson(schema(message.$typeName), message, { registry });

async function smoke() {
  const headers = { authorization: `Bearer ${token}` };
  const control = createClient(controlService, transport());
  const exec = createClient(execService, transport());
  const pong = await control.ping(create(schema("agent.v1.PingRequest")), { headers });

  const element = (init) => create(schema("agent.v1.ExecStreamElement"), init);
  async function* requests() {
    yield element({
      element: {
        case: "execClientMessage",
        value: {
          id: 7,
          agentId: "node",
          toolCall: { tool: { case: "readTodosToolCall", value: { args: {} } } },
        },
      },
    });
    // Close only after the answer came back, like a real orchestrator would.
    await answered;
    yield element({
      element: { case: "execClientControlMessage", value: { message: { case: "streamClose", value: {} } } },
    });
  }
  let markAnswered;
  const answered = new Promise((resolve) => {
    markAnswered = resolve;
  });
  const messages = [];
  for await (const message of exec.execStream(requests(), { headers })) {
    messages.push(asJson(message));
    if (message.id === 7 && message.message.case !== "toolCallDelta") markAnswered();
  }
  return { ping: asJson(pong), stream: messages };
}

async function wrongToken() {
  const headers = { authorization: "Bearer wrong-token" };
  const control = createClient(controlService, transport());
  const codes = {};
  const failures = [];
  // A body big enough that the client is still writing it when the server has already refused.
  const env = {};
  for (let i = 0; i < (options.envEntries ?? 256); i++) env[`VAR_${i}`] = "x".repeat(256);
  const calls = options.calls ?? 200;
  for (let i = 0; i < calls; i++) {
    let outcome;
    try {
      switch (i % 3) {
        case 0:
          await control.ping(create(schema("agent.v1.PingRequest")), { headers });
          break;
        case 1:
          await control.updateEnvironmentVariables(
            create(schema("agent.v1.UpdateEnvironmentVariablesRequest"), { env }),
            { headers },
          );
          break;
        default:
          for await (const _ of control.exec(
            create(schema("agent.v1.ExecRequest"), {
              toolCall: { tool: { case: "readTodosToolCall", value: { args: {} } } },
            }),
            { headers },
          )) {
            // Nothing may come: the call must be refused.
          }
      }
      outcome = "ok";
    } catch (error) {
      const connectError = ConnectError.from(error);
      outcome = Code[connectError.code];
      if (connectError.code !== Code.Unauthenticated && failures.length < 5) {
        failures.push(`${outcome}: ${connectError.rawMessage} ${connectError.cause ?? ""}`);
      }
    }
    codes[outcome] = (codes[outcome] ?? 0) + 1;
  }
  return { codes, failures };
}

const scenarios = { smoke, "wrong-token": wrongToken };
const run = scenarios[scenario];
if (run === undefined) {
  console.error(`unknown scenario ${scenario}`);
  process.exit(2);
}
process.stdout.write(`${JSON.stringify(await run())}\n`);
