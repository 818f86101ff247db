// Drives a memloci server through the official TypeScript MCP SDK client, which nobody here
// wrote: its callTool validates every structuredContent against the tool's output schema,
// and that validation is the point of this script.
//
// Usage: node client.mjs < spec.json   (or: node client.mjs spec.json)
// spec: {
//   "transport": "stdio",                     // "http" once the server has it: give "url"
//   "command": "...", "args": [...], "env": {...}, "cwd": "...",   // stdio
//   "url": "http://127.0.0.1:PORT/mcp", "headers": {...},          // http
//   "calls": [{"tool": "read_graph", "args": {...}}, ...]
// }
// Prints one JSON object on stdout:
//   {"sdk": version, "tools": [...] | null, "list_error": {...} | null,
//    "results": [{"tool", "threw", "error": {code, message} | null,
//                 "isError", "text", "structuredContent"}]}
// The calls run in order on one connection (one server process per spec).

import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

// The SDK's exports map hides its package.json; read it beside this script.
const SDK_VERSION = JSON.parse(
  readFileSync(new URL("./node_modules/@modelcontextprotocol/sdk/package.json", import.meta.url), "utf8"),
).version;

function readSpec() {
  const source = process.argv[2] ? readFileSync(process.argv[2], "utf8") : readFileSync(0, "utf8");
  return JSON.parse(source);
}

function makeTransport(spec) {
  switch (spec.transport ?? "stdio") {
    case "stdio":
      return new StdioClientTransport({
        command: spec.command,
        args: spec.args ?? [],
        env: spec.env,
        cwd: spec.cwd,
        stderr: "inherit", // the server's logs belong on stderr; its stdout is the protocol
      });
    case "http":
      return new StreamableHTTPClientTransport(new URL(spec.url), {
        requestInit: { headers: spec.headers ?? {} },
      });
    default:
      throw new Error(`transport: unknown transport ${JSON.stringify(spec.transport)}; known: stdio, http`);
  }
}

// An exception as data: the SDK's McpError carries the JSON-RPC code.
function describe(err) {
  return { code: typeof err?.code === "number" ? err.code : null, message: String(err?.message ?? err) };
}

async function main() {
  const spec = readSpec();
  const client = new Client({ name: "memloci-conformance", version: "1.0.0" });
  await client.connect(makeTransport(spec));
  const out = { sdk: SDK_VERSION, tools: null, list_error: null, results: [] };
  try {
    // listTools also caches the output-schema validators that callTool applies.
    try {
      out.tools = (await client.listTools()).tools;
    } catch (err) {
      out.list_error = describe(err);
    }
    for (const call of spec.calls ?? []) {
      const entry = { tool: call.tool, threw: false, error: null, isError: null, text: null, structuredContent: null };
      try {
        const result = await client.callTool({ name: call.tool, arguments: call.args ?? {} });
        entry.isError = result.isError === true;
        entry.text = (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
        entry.structuredContent = result.structuredContent ?? null;
      } catch (err) {
        entry.threw = true;
        entry.error = describe(err);
      }
      out.results.push(entry);
    }
  } finally {
    await client.close();
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((err) => {
  process.stderr.write(`conformance client failed: ${err?.stack ?? err}\n`);
  process.exit(2);
});
