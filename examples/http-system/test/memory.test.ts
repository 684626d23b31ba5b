import { strict as assert } from "node:assert";
import { test } from "node:test";

import { LexicalMemory, tokenize } from "../src/memory";

const doc = (external_id: string, text: string) => ({ external_id, text, props: {} });

test("tokens are lower-cased letters and digits of any script", () => {
  assert.deepEqual(tokenize("Caroline's LGBTQ group, 7 May — Café!"), ["caroline", "s", "lgbtq", "group", "7", "may", "café"]);
});

test("the document sharing the rarest term ranks first", () => {
  const memory = new LexicalMemory();
  memory.ingest("a", [doc("1", "we went camping by the lake"), doc("2", "the lake was cold"), doc("3", "pottery class")]);
  const hits = memory.retrieve("a", "camping at the lake", 10);
  assert.deepEqual(hits.map((h) => h.external_id), ["1", "2"]);
  assert.ok(hits[0].score > hits[1].score && hits[1].score > 0);
});

test("labels are isolated and reset forgets only its own label", () => {
  const memory = new LexicalMemory();
  memory.ingest("a", [doc("a1", "violin lessons")]);
  memory.ingest("b", [doc("b1", "violin concert")]);
  assert.deepEqual(memory.retrieve("a", "violin", 5).map((h) => h.external_id), ["a1"]);
  memory.reset("a");
  assert.deepEqual(memory.retrieve("a", "violin", 5), []);
  assert.deepEqual(memory.retrieve("b", "violin", 5).map((h) => h.external_id), ["b1"]);
});

test("top_k bounds the hits and ties are broken by id", () => {
  const memory = new LexicalMemory();
  memory.ingest("a", [doc("z", "same words"), doc("m", "same words"), doc("b", "same words")]);
  assert.deepEqual(memory.retrieve("a", "same", 2).map((h) => h.external_id), ["b", "m"]);
});

test("a document ingested again under its id replaces the old text", () => {
  const memory = new LexicalMemory();
  memory.ingest("a", [doc("1", "old text about horses")]);
  memory.ingest("a", [doc("1", "new text about boats")]);
  assert.deepEqual(memory.retrieve("a", "horses", 5), []);
  assert.equal(memory.retrieve("a", "boats", 5)[0].external_id, "1");
  assert.deepEqual(memory.size(), { labels: 1, docs: 1 });
});
