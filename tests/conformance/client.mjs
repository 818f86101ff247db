// Drives a memloci server through an official TypeScript MCP SDK client, which nobody here
// wrote. SDK 1.x (what Claude Desktop, Cursor and the Inspector 1.x run) validates every
// structuredContent against the tool's output schema, error replies included, and throws -32602
// when it does not match: that validation is the point of this script. The 2.x client (the
// Inspector 2.x) validates successes only, but speaks the newer protocol versions.
//
// Usage: node client.mjs < spec.json   (or: node client.mjs spec.json)
// spec: {
//   "sdk": "1" | "2",                         // which client (default "1")
//   "transport": "stdio" | "http",            // http: give "url" (and "headers", say Authorization)
//   "command": "...", "args": [...], "env": {...}, "cwd": "...",   // stdio
//   "url": "http://127.0.0.1:PORT/mcp", "headers": {...},          // http
//   "calls": [{"tool": "read_graph", "args": {...}}, ...]
//   // A call may instead be a resource step: {"subscribe": uri}, {"read": uri}, or
//   // {"awaitUpdates": n, "ms": 10000} (wait until n notifications/resources/updated have come).
// }
// Prints one JSON object on stdout:
//   {"sdk": "package@version", "protocol": negotiated version, "instructions": the server's,
//    "tools": [...] | null,
//    "list_error": {code, message} | null,
//    "results": [{"tool", "threw", "error": {code, message} | null, "isError", "text", "structuredContent"}],
//    "updated": [uri, ...]}   // resources/updated notifications, in order
// A resource step's result has "resource" (its uri) instead of "tool", and "text" (a read's contents).
// The calls run in order on one connection (one server process per spec).

import { readFileSync } from "node:fs";

const SDKS = {
  1: {
    package: "@modelcontextprotocol/sdk",
    client: "@modelcontextprotocol/sdk/client/index.js",
    stdio: "@modelcontextprotocol/sdk/client/stdio.js",
    http: "@modelcontextprotocol/sdk/client/streamableHttp.js",
  },
  2: {
    package: "@modelcontextprotocol/client",
    client: "@modelcontextprotocol/client",
    stdio: "@modelcontextprotocol/client/stdio",
    http: "@modelcontextprotocol/client",
  },
};

// The packages' exports maps hide their package.json; read it beside this script.
function packageVersion(name) {
  const url = new URL(`./node_modules/${name}/package.json`, import.meta.url);
  return JSON.parse(readFileSync(url, "utf8")).version;
}

function readSpec() {
  const source = process.argv[2] ? readFileSync(process.argv[2], "utf8") : readFileSync(0, "utf8");
  return JSON.parse(source);
}

async function makeTransport(spec, sdk) {
  switch (spec.transport ?? "stdio") {
    case "stdio": {
      const { StdioClientTransport } = await import(sdk.stdio);
      return new StdioClientTransport({
        command: spec.command,
        args: spec.args ?? [],
        env: spec.env,
        cwd: spec.cwd,
        stderr: "inherit", // the server's logs belong on stderr; its stdout is the protocol
      });
    }
    case "http": {
      const { StreamableHTTPClientTransport } = await import(sdk.http);
      return new StreamableHTTPClientTransport(new URL(spec.url), {
        requestInit: { headers: spec.headers ?? {} },
      });
    }
    default:
      throw new Error(`transport: unknown transport ${JSON.stringify(spec.transport)}; known: stdio, http`);
  }
}

// An exception as data: the SDKs' errors carry the JSON-RPC code.
function describe(err) {
  return { code: typeof err?.code === "number" ? err.code : null, message: String(err?.message ?? err) };
}

// subscribe, read, or wait for update notifications; failures recorded like a tool's.
async function resourceStep(client, step, updated) {
  const uri = step.subscribe ?? step.read ?? null;
  const entry = { resource: uri, threw: false, error: null, text: null };
  try {
    if (step.subscribe !== undefined) {
      await client.subscribeResource({ uri });
    } else if (step.read !== undefined) {
      const result = await client.readResource({ uri });
      entry.text = (result.contents ?? []).map((c) => c.text ?? "").join("");
    } else if (step.awaitUpdates !== undefined) {
      const deadline = Date.now() + (step.ms ?? 10000);
      while (updated.length < step.awaitUpdates && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      entry.text = JSON.stringify(updated);
    } else {
      throw new Error(`calls: a step needs "tool", "subscribe", "read" or "awaitUpdates": ${JSON.stringify(step)}`);
    }
  } catch (err) {
    entry.threw = true;
    entry.error = describe(err);
  }
  return entry;
}

async function main() {
  const spec = readSpec();
  const sdk = SDKS[spec.sdk ?? "1"];
  if (!sdk) throw new Error(`sdk: unknown SDK ${JSON.stringify(spec.sdk)}; known: ${Object.keys(SDKS).join(", ")}`);
  const { Client } = await import(sdk.client);
  const client = new Client({ name: "memloci-conformance", version: "1.0.0" });
  const transport = await makeTransport(spec, sdk);
  await client.connect(transport);
  const out = {
    sdk: `${sdk.package}@${packageVersion(sdk.package)}`,
    protocol: transport.protocolVersion ?? client.getNegotiatedProtocolVersion?.() ?? null,
    instructions: client.getInstructions?.() ?? null,
    tools: null,
    list_error: null,
    results: [],
    updated: [],
  };
  // Both SDK lines hand notifications without a handler of their own to this one.
  client.fallbackNotificationHandler = async (n) => {
    if (n.method === "notifications/resources/updated") out.updated.push(n.params?.uri ?? null);
  };
  try {
    // listTools also caches the output-schema validators that callTool applies.
    try {
      out.tools = (await client.listTools()).tools;
    } catch (err) {
      out.list_error = describe(err);
    }
    for (const call of spec.calls ?? []) {
      if (call.tool === undefined) {
        out.results.push(await resourceStep(client, call, out.updated));
        continue;
      }
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
