// A lexical memory: BM25 over the documents of one label at a time.
//
// Each label is its own isolated store; nothing of one label is ever scored for another.
// Ranking is deterministic: score first, then the external id, never insertion order.

export interface Doc {
  external_id: string;
  text: string;
  props: Record<string, unknown>;
}

export interface Hit {
  external_id: string;
  score: number;
}

interface Stored {
  id: string;
  terms: Map<string, number>;
  length: number;
}

interface Label {
  docs: Map<string, Stored>;
  // In how many documents of the label each term occurs.
  documentFrequency: Map<string, number>;
  totalLength: number;
}

/** BM25's term-frequency saturation and length normalisation (Robertson and Zaragoza, 2009). */
export const K1 = 1.2;
export const B = 0.75;

/** Lower-cased runs of letters and digits, in any script. */
export function tokenize(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

function counts(tokens: string[]): Map<string, number> {
  const found = new Map<string, number>();
  for (const token of tokens) {
    found.set(token, (found.get(token) ?? 0) + 1);
  }
  return found;
}

export class LexicalMemory {
  private labels = new Map<string, Label>();

  /** Forget everything stored under `label` (other labels are untouched). */
  reset(label: string): void {
    this.labels.delete(label);
  }

  /** Store documents under `label`; a document whose id is already stored there replaces it. */
  ingest(label: string, docs: Doc[]): void {
    let store = this.labels.get(label);
    if (store === undefined) {
      store = { docs: new Map(), documentFrequency: new Map(), totalLength: 0 };
      this.labels.set(label, store);
    }
    for (const doc of docs) {
      const old = store.docs.get(doc.external_id);
      if (old !== undefined) {
        this.unindex(store, old);
      }
      const tokens = tokenize(doc.text);
      const stored: Stored = { id: doc.external_id, terms: counts(tokens), length: tokens.length };
      store.docs.set(stored.id, stored);
      store.totalLength += stored.length;
      for (const term of stored.terms.keys()) {
        store.documentFrequency.set(term, (store.documentFrequency.get(term) ?? 0) + 1);
      }
    }
  }

  /** At most `topK` documents of `label` sharing a term with `query`, best first. */
  retrieve(label: string, query: string, topK: number): Hit[] {
    const store = this.labels.get(label);
    if (store === undefined || store.docs.size === 0) {
      return [];
    }
    const n = store.docs.size;
    const averageLength = store.totalLength / n || 1;
    const queryTerms = [...new Set(tokenize(query))];
    const hits: Hit[] = [];
    for (const doc of store.docs.values()) {
      let score = 0;
      for (const term of queryTerms) {
        const tf = doc.terms.get(term);
        if (tf === undefined) {
          continue;
        }
        const df = store.documentFrequency.get(term) ?? 0;
        const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5));
        score += (idf * tf * (K1 + 1)) / (tf + K1 * (1 - B + (B * doc.length) / averageLength));
      }
      if (score > 0) {
        hits.push({ external_id: doc.id, score });
      }
    }
    hits.sort((a, b) => b.score - a.score || (a.external_id < b.external_id ? -1 : a.external_id > b.external_id ? 1 : 0));
    return hits.slice(0, topK);
  }

  /** How many labels and documents are held (for /info). */
  size(): { labels: number; docs: number } {
    let docs = 0;
    for (const store of this.labels.values()) {
      docs += store.docs.size;
    }
    return { labels: this.labels.size, docs };
  }

  private unindex(store: Label, doc: Stored): void {
    store.totalLength -= doc.length;
    for (const term of doc.terms.keys()) {
      const left = (store.documentFrequency.get(term) ?? 1) - 1;
      if (left > 0) {
        store.documentFrequency.set(term, left);
      } else {
        store.documentFrequency.delete(term);
      }
    }
    store.docs.delete(doc.id);
  }
}
