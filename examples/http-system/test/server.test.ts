import { strict as assert } from "node:assert";
import { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import * as http from "node:http";

import { createServer, ServerOptions } from "../src/server";
import { parseArgs } from "../src/main";

async function start(options: ServerOptions): Promise<{ server: http.Server; base: string }> {
  const server = createServer(options);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return { server, base: `http://127.0.0.1:${port}${options.prefix ?? ""}` };
}

async function call(base: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(base + path, {
    method: body === undefined ? "GET" : "POST",
    headers: { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: response.status, json: (await response.json()) as Record<string, any> };
}

describe("the contract", () => {
  let server: http.Server;
  let base: string;
  before(async () => ({ server, base } = await start({ prefix: "/v1" })));
  after(() => server.close());

  test("info names the server and its configuration", async () => {
    const { status, json } = await call(base, "/info");
    assert.equal(status, 200);
    assert.equal(typeof json.name, "string");
    assert.equal(typeof json.version, "string");
    assert.equal(json.config.wire_version, 1);
  });

  test("reset, ingest, retrieve", async () => {
    assert.deepEqual((await call(base, "/reset", { label: "L" })).json, {});
    const docs = [{ external_id: "L-1", text: "Melanie painted a sunrise", props: { speaker: "Melanie" } },
                  { external_id: "L-2", text: "Caroline went to a support group", props: {} }];
    assert.deepEqual((await call(base, "/ingest", { label: "L", docs })).json, {});
    const { status, json } = await call(base, "/retrieve", { label: "L", query: "who painted the sunrise?", top_k: 5 });
    assert.equal(status, 200);
    assert.deepEqual(json.hits.map((h: { external_id: string }) => h.external_id), ["L-1"]);
    assert.equal(typeof json.hits[0].score, "number");
    await call(base, "/reset", { label: "L" });
    assert.deepEqual((await call(base, "/retrieve", { label: "L", query: "sunrise", top_k: 5 })).json, { hits: [] });
  });

  test("bad requests are answered with an error naming the field", async () => {
    const cases: [string, unknown, number, string][] = [
      ["/retrieve", { label: "L", query: "x", top_k: 0 }, 400, "field top_k"],
      ["/retrieve", { label: "L", query: 3, top_k: 1 }, 400, "field query"],
      ["/ingest", { label: "L", docs: [{ external_id: "", text: "t" }] }, 400, "field docs[0].external_id"],
      ["/ingest", { label: "L", docs: [{ external_id: "x", text: "t", props: [] }] }, 400, "field docs[0].props"],
      ["/reset", {}, 400, "field label"],
      ["/reset", "{not json", 400, "not JSON"],
      ["/nowhere", { label: "L" }, 404, "no route"],
    ];
    for (const [path, body, status, message] of cases) {
      const answer = await call(base, path, body);
      assert.equal(answer.status, status, path);
      assert.ok(String(answer.json.error).includes(message), `${path}: ${answer.json.error}`);
    }
    assert.equal((await call(base, "/info", { label: "L" })).status, 405);
    assert.equal((await fetch(base.replace("/v1", "") + "/info")).status, 404);
  });
});

describe("a bearer token", () => {
  let server: http.Server;
  let base: string;
  before(async () => ({ server, base } = await start({ token: "t0ken" })));
  after(() => server.close());

  test("is required when the server has one", async () => {
    assert.equal((await call(base, "/info")).status, 401);
    assert.equal((await call(base, "/info", undefined, { authorization: "Bearer wrong" })).status, 401);
    assert.equal((await call(base, "/info", undefined, { authorization: "Bearer t0ken" })).status, 200);
  });
});

describe("the leaky variant", () => {
  let server: http.Server;
  let base: string;
  before(async () => ({ server, base } = await start({ leaky: true })));
  after(() => server.close());

  test("forgets nothing on reset", async () => {
    await call(base, "/ingest", { label: "L", docs: [{ external_id: "old", text: "kept forever", props: {} }] });
    await call(base, "/reset", { label: "L" });
    const { json } = await call(base, "/retrieve", { label: "L", query: "forever", top_k: 3 });
    assert.deepEqual(json.hits.map((h: { external_id: string }) => h.external_id), ["old"]);
  });
});

test("the command line reads host, port, prefix and leaky, and refuses anything else", () => {
  assert.deepEqual(parseArgs(["--port", "0", "--prefix", "/v1", "--leaky"]),
                   { host: "127.0.0.1", port: 0, prefix: "/v1", leaky: true });
  assert.throws(() => parseArgs(["--token", "x"]), /unknown option --token/);
  assert.throws(() => parseArgs(["--port", "99999"]), /--port/);
});
