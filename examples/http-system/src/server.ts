// memoria-farm's HTTP system contract, JSON wire format v1, on Node's own http module.
//
//   GET  {base}/info      -> {"name", "version", "config"}
//   POST {base}/reset     {"label"} -> {}
//   POST {base}/ingest    {"label", "docs": [{"external_id", "text", "props"}]} -> {}
//   POST {base}/retrieve  {"label", "query", "top_k"} -> {"hits": [{"external_id", "score"}]}
//
// Any other answer is non-2xx with {"error": "..."}. With a token, every call needs
// `Authorization: Bearer TOKEN`.

import { timingSafeEqual } from "node:crypto";
import * as http from "node:http";

import { B, Doc, K1, LexicalMemory } from "./memory";

export const WIRE_VERSION = 1;
export const NAME = "memfarm-reference-lexical";
export const VERSION = "1.0.0";

export interface ServerOptions {
  // Path every route sits under ("" or "/something"), as in http://host:port/something/info.
  prefix?: string;
  // When set, a call without `Authorization: Bearer <token>` is refused (401).
  token?: string;
  // Deliberately broken: reset forgets nothing (a conformance check must catch it).
  leaky?: boolean;
  // Largest request body read, in bytes.
  maxBodyBytes?: number;
}

export const DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024;

class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

function send(response: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  response.end(text);
}

function readBody(request: http.IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        reject(new HttpError(413, `request body over ${limit} bytes`));
        request.destroy();
        return;
      }
      chunks.push(chunk);
    });
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.on("error", reject);
  });
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function field<T>(body: Record<string, unknown>, name: string, check: (v: unknown) => v is T, what: string): T {
  const value = body[name];
  if (!check(value)) {
    throw new HttpError(400, `field ${name}: expected ${what}`);
  }
  return value;
}

const isLabel = (v: unknown): v is string => typeof v === "string" && v.length > 0;
const isString = (v: unknown): v is string => typeof v === "string";
const isTopK = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= 1;
const isArray = (v: unknown): v is unknown[] => Array.isArray(v);

function docs(body: Record<string, unknown>): Doc[] {
  return field(body, "docs", isArray, "a list of documents").map((doc, position) => {
    if (!isObject(doc)) {
      throw new HttpError(400, `field docs[${position}]: expected an object`);
    }
    const where = `docs[${position}]`;
    if (!isLabel(doc.external_id)) {
      throw new HttpError(400, `field ${where}.external_id: expected a non-empty string`);
    }
    if (!isString(doc.text)) {
      throw new HttpError(400, `field ${where}.text: expected a string`);
    }
    const props = doc.props ?? {};
    if (!isObject(props)) {
      throw new HttpError(400, `field ${where}.props: expected an object`);
    }
    return { external_id: doc.external_id, text: doc.text, props };
  });
}

function authorised(request: http.IncomingMessage, token: string): boolean {
  const given = Buffer.from(request.headers.authorization ?? "");
  const wanted = Buffer.from(`Bearer ${token}`);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

/** A server answering the contract (not yet listening). */
export function createServer(options: ServerOptions = {}): http.Server {
  const memory = new LexicalMemory();
  const prefix = (options.prefix ?? "").replace(/\/+$/, "");
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;

  async function handle(request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
    const path = (request.url ?? "").split("?")[0];
    if (!path.startsWith(prefix + "/")) {
      throw new HttpError(404, `no route ${path}`);
    }
    const route = path.slice(prefix.length);
    if (options.token && !authorised(request, options.token)) {
      throw new HttpError(401, "missing or wrong bearer token");
    }
    if (route === "/info") {
      if (request.method !== "GET") {
        throw new HttpError(405, "info takes GET");
      }
      send(response, 200, {
        name: NAME,
        version: VERSION,
        config: { wire_version: WIRE_VERSION, ranking: "bm25", k1: K1, b: B, tokenizer: "lowercase letters and digits",
                  reset: options.leaky ? "ignored (leaky variant)" : "forgets the label" },
      });
      return;
    }
    if (!["/reset", "/ingest", "/retrieve"].includes(route)) {
      throw new HttpError(404, `no route ${path}`);
    }
    if (request.method !== "POST") {
      throw new HttpError(405, `${route.slice(1)} takes POST`);
    }
    let body: unknown;
    try {
      body = JSON.parse(await readBody(request, limit));
    } catch (error) {
      if (error instanceof HttpError) {
        throw error;
      }
      throw new HttpError(400, "body is not JSON");
    }
    if (!isObject(body)) {
      throw new HttpError(400, "body: expected an object");
    }
    const label = field(body, "label", isLabel, "a non-empty string");
    if (route === "/reset") {
      if (!options.leaky) {
        memory.reset(label);
      }
      send(response, 200, {});
    } else if (route === "/ingest") {
      memory.ingest(label, docs(body));
      send(response, 200, {});
    } else {
      const query = field(body, "query", isString, "a string");
      const topK = field(body, "top_k", isTopK, "a whole number of at least 1");
      send(response, 200, { hits: memory.retrieve(label, query, topK) });
    }
  }

  return http.createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (response.headersSent) {
        response.destroy();
        return;
      }
      if (error instanceof HttpError) {
        send(response, error.status, { error: error.message });
      } else {
        send(response, 500, { error: error instanceof Error ? error.message : String(error) });
      }
    });
  });
}
