// Drives a memloci server's prompts (prompts/list, prompts/get) through the official TypeScript
// MCP SDK client, which validates every reply against the protocol's schemas and throws when one
// does not match. Same spec as client.mjs, with prompt calls instead of tool calls:
//
// Usage: node prompts.mjs < spec.json
// spec: {"sdk": "1" | "2", "command": "...", "args": [...], "env": {...}, "cwd": "...",
//        "calls": [{"prompt": "session_start", "args": {"token_budget": "500"}}, ...]}
// Prints one JSON object on stdout:
//   {"sdk": "package@version", "prompts": [...] | null, "list_error": {code, message} | null,
//    "results": [{"prompt", "threw", "error": {code, message} | null, "description", "messages"}]}

import { readFileSync } from "node:fs";

const SDKS = {
  1: {
    package: "@modelcontextprotocol/sdk",
    client: "@modelcontextprotocol/sdk/client/index.js",
    stdio: "@modelcontextprotocol/sdk/client/stdio.js",
  },
  2: {
    package: "@modelcontextprotocol/client",
    client: "@modelcontextprotocol/client",
    stdio: "@modelcontextprotocol/client/stdio",
  },
};

function packageVersion(name) {
  const url = new URL(`./node_modules/${name}/package.json`, import.meta.url);
  return JSON.parse(readFileSync(url, "utf8")).version;
}

function describe(err) {
  return { code: typeof err?.code === "number" ? err.code : null, message: String(err?.message ?? err) };
}

async function main() {
  const spec = JSON.parse(readFileSync(0, "utf8"));
  const sdk = SDKS[spec.sdk ?? "1"];
  if (!sdk) throw new Error(`sdk: unknown SDK ${JSON.stringify(spec.sdk)}; known: ${Object.keys(SDKS).join(", ")}`);
  const { Client } = await import(sdk.client);
  const { StdioClientTransport } = await import(sdk.stdio);
  const client = new Client({ name: "memloci-prompts", version: "1.0.0" });
  const transport = new StdioClientTransport({
    command: spec.command,
    args: spec.args ?? [],
    env: spec.env,
    cwd: spec.cwd,
    stderr: "inherit",
  });
  await client.connect(transport);
  const out = { sdk: `${sdk.package}@${packageVersion(sdk.package)}`, prompts: null, list_error: null, results: [] };
  try {
    try {
      out.prompts = (await client.listPrompts()).prompts;
    } catch (err) {
      out.list_error = describe(err);
    }
    for (const call of spec.calls ?? []) {
      const entry = { prompt: call.prompt, threw: false, error: null, description: null, messages: null };
      try {
        const result = await client.getPrompt({ name: call.prompt, arguments: call.args ?? {} });
        entry.description = result.description ?? null;
        entry.messages = result.messages;
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
  process.stderr.write(`prompts client failed: ${err?.stack ?? err}\n`);
  process.exit(2);
});
