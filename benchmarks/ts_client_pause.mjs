// The real TypeScript MCP SDK client against `agent-memory serve --http`: connect over
// streamable HTTP, call a tool, pause, call again on the same client. Against uvicorn's old
// 5 s keep-alive the second call failed with "other side closed" when the client's event
// loop had been blocked for 7 s (undici had no chance to drop the socket the server had
// closed); with a 75 s keep-alive announced as `Keep-Alive: timeout=75` it must not.
//
//   npm install --prefix .ci/node @modelcontextprotocol/sdk@1.32.2   (CI does this)
//   node benchmarks/ts_client_pause.mjs URL [SECONDS=10] [block|sleep]
//
// `block` (the default) busy-waits, as an agent busy in synchronous work does; `sleep`
// awaits a timer. The bearer token, if any, comes from AGENT_MEMORY_TOKEN. Prints one JSON
// line; exits 0 when both calls succeed, 1 when one fails, 2 when the SDK is not installed.

import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const [url, seconds = "10", mode = "block"] = process.argv.slice(2);
if (!url || !["block", "sleep"].includes(mode) || !(Number(seconds) >= 0)) {
  console.error("usage: node benchmarks/ts_client_pause.mjs URL [SECONDS=10] [block|sleep]");
  process.exit(2);
}

async function sdk(path) {
  const require = createRequire(join(here, "..", ".ci", "node", "package.json"));
  try {
    return await import(pathToFileURL(require.resolve(`@modelcontextprotocol/sdk/${path}`)).href);
  } catch (error) {
    console.error(`The TypeScript MCP SDK is not installed: npm install --prefix .ci/node @modelcontextprotocol/sdk@1.32.2 (${error.message})`);
    process.exit(2);
  }
}

const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

const headers = process.env.AGENT_MEMORY_TOKEN ? { Authorization: `Bearer ${process.env.AGENT_MEMORY_TOKEN}` } : {};
const client = new Client({ name: "ts-pause-check", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const result = { url, pause_s: Number(seconds), mode, first: null, second: null, ok: false };

async function call() {
  const started = performance.now();
  try {
    const answer = await client.callTool({ name: "memory_stats", arguments: {} });
    return { ok: !answer.isError, ms: Math.round(performance.now() - started) };
  } catch (error) {
    return { ok: false, ms: Math.round(performance.now() - started), error: `${error.message} ${error.cause?.message ?? ""}`.trim() };
  }
}

try {
  await client.connect(transport);
  result.first = await call();
  if (mode === "block") {
    const until = Date.now() + Number(seconds) * 1000;
    while (Date.now() < until) { /* the event loop is blocked: no timer, no socket event runs */ }
  } else {
    await new Promise((resolve) => setTimeout(resolve, Number(seconds) * 1000));
  }
  result.second = await call();
  result.ok = result.first.ok && result.second.ok;
} catch (error) {
  result.error = `${error.message} ${error.cause?.message ?? ""}`.trim();
} finally {
  await client.close().catch(() => {});
}
console.log(JSON.stringify(result));
process.exit(result.ok ? 0 : 1);
