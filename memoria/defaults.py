"""Named defaults of the engine, in one place.

Every number that changes a retrieval result lives here with the reason for its
value, so a harness can snapshot them and a reader can find them. The engine's settings
take their defaults from here (memoria.settings.MemoriaSettings).
"""

#: Which model embeds unless a run names another: `minilm` (all-MiniLM-L6-v2); `mpnet` and a local
#: sentence-transformers folder are the others (memoria.model_files). Part of the embedding signature.
DEFAULT_EMBEDDER = "minilm"

#: How the model is run: `torch` (sentence-transformers), `onnx` (ONNX Runtime, the same vectors, faster) or
#: `onnx-int8` (dynamically quantised: faster still, at a small quality cost). Part of the signature.
EMBEDDER_BACKENDS = ("torch", "onnx", "onnx-int8")
DEFAULT_EMBEDDER_BACKEND = "torch"

#: Reciprocal Rank Fusion constant (Cormack, Clarke and Buettcher, SIGIR 2009).
DEFAULT_RRF_K = 60

#: How many candidates each source contributes before fusion or merging.
DEFAULT_CANDIDATE_POOL = 100

#: How many candidates a recall returns unless asked otherwise.
DEFAULT_RECALL_LIMIT = 50

#: Texts per call to the embedding model. 32 is as fast as 64 on 2 CPU cores and keeps the
#: peak memory of a cold run lower (at 64 a 50-question full-scale run peaked at 1.43 GiB).
DEFAULT_BATCH_SIZE = 32

#: Every text is padded to the next multiple of this many tokens and batched only with texts of that
#: width, so its vector never depends on its batch (memoria.canonical_batches). A step of 16 gave a short
#: text up to 15 padding tokens; 4 gives it at most 3 (`memfarm bench floor`, docs/cost.md).
CANONICAL_PAD_STEP = 4
#: ... and every batch the model runs at a width has the same number of rows, this many tokens over the width
#: (at least one), filled with copies where texts run out, so that a threaded matrix product splits its work the
#: same way for every batch of a width. A forward pass has a fixed cost whatever it holds (reading the model's
#: weights), so a batch of much fewer tokens is mostly that cost; and the rows a width's last batch fills with
#: copies cost at most this many tokens, where a fixed 8 rows cost up to 7 texts of the width.
CANONICAL_BATCH_TOKENS = 128

#: Ranking compares scores rounded to this many decimals and orders equal ones by id (memoria.ties):
#: float noise in a cosine is about 1e-7, while scores that mean something differ by far more than 1e-6.
TIE_DECIMALS = 6

#: Worker threads for parallel extraction at insert time.
DEFAULT_MAX_WORKERS = 4

#: BM25 (Okapi) parameters, the usual values from Robertson and Zaragoza.
DEFAULT_BM25_K1 = 1.5
DEFAULT_BM25_B = 0.75
DEFAULT_BM25_EPSILON = 0.25

#: Retrieval modes the engine offers, and the sources each submits.
MODE_SOURCES = {
    "dense": ("faiss",),
    "bm25": ("bm25",),
    "raw": ("faiss", "bm25"),
    "fusion": ("fusion",),
    "full": ("faiss", "bm25", "graph", "phrase", "attribute", "window"),
}
#: Modes whose candidates go through the ranking pipeline.
RANKED_MODES = ("full",)
#: Sources that read vectors (the question's against the turns' or the windows'). A mode that submits none of
#: them and ranks nothing reads no vector, so its memory encodes none: neither its turns nor its questions.
VECTOR_SOURCES = ("faiss", "fusion", "window")
#: Ranking parts of a ranked mode that can be switched off by name (their weight set to 0), beside its sources.
RANKING_SWITCHES = ("sentence", "session", "feedback", "name", "quoted", "date", "temporal",
                    "session_bm25", "session_centroid", "session_recency", "standing", "user_said")

#: Query parts of a ranked mode that can be switched off by name; they are on by default and weigh nothing.
QUERY_SWITCHES = ("speaker_strip", "frame_strip")
#: `speaker_strip`: a ranked mode encodes the question without the names of the memory's speakers
#: (memoria.boosts.without_names); every turn opens with its speaker's name, so the name otherwise draws the
#: question's vector toward that speaker's emptiest turns. BM25 and the boosts still read the names.
DEFAULT_SPEAKER_STRIP = True
#: `frame_strip`: a ranked mode searches the question without the phrases that frame it by the conversation ("the
#: order in which I brought up ... throughout our conversations? Mention ONLY and ONLY five items",
#: memoria.discourse.without_frame): they name no message, and as words they match whichever messages say "order" or
#: "items". The `user_said` signal still reads the question as asked. A question without such a phrase is unchanged.
DEFAULT_FRAME_STRIP = True
#: Every part of a ranked mode that `without` can switch off.
SWITCHES = RANKING_SWITCHES + QUERY_SWITCHES

#: Scheduler: how long a recall waits for its sources, and the default policy.
DEFAULT_SOURCE_BUDGET_MS = 5000.0
DEFAULT_SCHEDULER_POLICY = "all"

#: Ranking weights of the `full` mode, one per signal. Tuned on the development data only
#: (the five LoCoMo conversations in shared/data and generated LongMemEval-S files); see docs/full-mode.md.
#: `session` (the mean of a session's best turns), `date`, `temporal` and `quoted` are each
#: set from a few values on LoCoMo dev5 (session 0.2 / 0.3 / 0.5 / 0.8, date 0.05 / 0.1 / 0.2,
#: temporal 0.05 / 0.1); `name` and `window` lowered session R@5 there at every weight tried, so they
#: weigh 0 (their parts stay available: `--weights`, and the ablation bench shows each switched on).
#: `feedback` (BM25 of words from the best first-stage turn) is set from 0.02 / 0.035 / 0.05 / 0.1 on LoCoMo
#: dev5 and the ablation bench's generated LongMemEval-S file: 0.035 is the largest that lowers no metric on dev5.
#: With `speaker_strip` on, `semantic`, `token` and `date` are set from a grid on both files (semantic
#: 0.45 / 0.5 / 0.55 / 0.6, token 0.3 / 0.35, date 0.1 / 0.15 / 0.2): 0.55 / 0.3 / 0.15 is inside the region
#: where neither file loses (dev5 session R@5 0.934 to 0.936 there by a one-off re-ranking; `memfarm bench ablation`
#: gives 0.934 and the generated file's nDCG@10 0.845).
#: `sentence` (a turn's best sentence, memoria.pieces) takes part of `semantic`'s weight. Set with stemmed BM25 on
#: LoCoMo dev5, the LongMemEval-format file made from it (`memfarm convert locomo-longmemeval`) and two generated
#: LongMemEval-S files at once (`python -m devtools lab`), from semantic / sentence 0.55 / 0, 0.45 / 0.1,
#: 0.35 / 0.2, 0.25 / 0.3, token 0.3 / 0.2 and session 0.5 / 0.7 / 1.0: 0.35 / 0.2 gains on both dev5 formats and
#: loses no generated question; a heavier session gains on the converted file but costs the generated files'
#: nDCG@10 (their fillers hold several loosely related turns), so it stays 0.5 (docs/full-mode.md,
#: "Tuning, and whether it carries").
DEFAULT_WEIGHTS = {
    "semantic": 0.35,
    "sentence": 0.2,
    "token": 0.3,
    "phrase": 0.10,
    "graph": 0.05,
    "attribute_boost": 0.05,
    "importance": 0.0,
    "recency": 0.0,
    "window": 0.0,
    "session_bm25": 0.0,
    "session_centroid": 0.0,
    "session_recency": 0.0,
    "feedback": 0.035,
    "session": 0.5,
    "name": 0.0,
    "quoted": 0.1,
    "date": 0.15,
    "temporal": 0.05,
    "standing": 0.0,
    "user_said": 0.0,
}

#: The `full` weights of each embedder (memoria.model_files), by its name: a model's scores are spread
#: differently, so weights tuned with one are not assumed to carry over to another; each entry says how its
#: weights were set, and a run's manifest records it. A local folder takes MiniLM's, labelled untuned.
EMBEDDER_WEIGHTS = {
    "minilm": (DEFAULT_WEIGHTS, "minilm: tuned on the development data (see DEFAULT_WEIGHTS)"),
    # Set the same way as MiniLM's (`python -m devtools lab --embedder mpnet`, the same grid on LoCoMo dev5 and its
    # LongMemEval-format copy): no semantic / sentence pair or token weight beat MiniLM's on both formats; session 0.7
    # gained on the converted file alone, which the generated files argue against as for MiniLM. MiniLM's stay.
    "mpnet": (dict(DEFAULT_WEIGHTS), "mpnet: MiniLM's weights, kept after tuning on the development data "
                                     "(both formats) gave no gain on both"),
}


def weights_for(embedder: str | None) -> dict:
    """The `full` weights of `embedder` (None: MiniLM, the default model); a copy."""
    return dict(EMBEDDER_WEIGHTS.get(embedder or DEFAULT_EMBEDDER, EMBEDDER_WEIGHTS[DEFAULT_EMBEDDER])[0])


def weights_label(embedder: str | None) -> str:
    """How the default `full` weights of `embedder` were set (what a manifest records)."""
    if (embedder or DEFAULT_EMBEDDER) in EMBEDDER_WEIGHTS:
        return EMBEDDER_WEIGHTS[embedder or DEFAULT_EMBEDDER][1]
    return f"{embedder}: untuned, MiniLM's weights carried over"


#: Turn windows (memoria.windows): turns per window and turns shared by neighbouring windows
#: (about six with one of overlap, as the published systems that use windows do). 0 turns = no windows.
DEFAULT_WINDOW_SIZE = 6
DEFAULT_WINDOW_OVERLAP = 1
#: Characters of each turn written into a window: six turns of 200 characters plus a date line
#: fill about the 256 tokens MiniLM reads, so a long turn cannot push its neighbours out.
DEFAULT_WINDOW_TURN_CHARS = 200
#: Sentence vectors (memoria.pieces, signal `sentence`): a turn keeps at most this many. LoCoMo turns hold two to
#: four sentences, so nearly every sentence of them gets its own; a long LongMemEval turn is cut into this many runs.
DEFAULT_MAX_PIECES = 8
#: The sentence signal is read for the head of a first ranking, not for every candidate: the candidates are ranked by
#: every other signal of the first stage, and only the best `DEFAULT_SENTENCE_HEAD` of them have their pieces split,
#: encoded and read (the rest keep their whole cosine, as a turn of one sentence does). 0 reads every candidate.
#: The sources together reach nearly every turn of a LongMemEval haystack, so pieces for every candidate cost a cold
#: run nearly every turn's pieces; the head bounds that by the question (see docs/cost.md for how it was set).
DEFAULT_SENTENCE_HEAD = 30
#: The `session_recency` signal halves about every 0.7 x this many sessions (exp(-n / this), n sessions newer). Chosen
#: with RealMem's weights on its development personas (adapters/weights/realmem.json); `memfarm optimize` tunes
#: weights, not this, and no other value of it is measured in the manual.
RECENCY_SESSIONS = 30
#: Session aggregation: a session scores the mean of its best `n` turn scores.
DEFAULT_SESSION_TOP_N = 3
#: Lexical feedback (memoria.ranking.feedback_terms): how many of the best first-stage turns give words, and how
#: many words. With 3 turns the generated LongMemEval-S file gained more but LoCoMo dev5 lost nDCG@10; 5 or 10 words
#: did about the same.
DEFAULT_FEEDBACK_TURNS = 1
DEFAULT_FEEDBACK_TERMS = 10
#: MMR trade-off (1.0 = relevance only) and how many top candidates it may reorder.
DEFAULT_MMR_LAMBDA = 0.9
DEFAULT_MMR_WINDOW = 20
#: How many seeds the graph source expands from.
DEFAULT_GRAPH_SEEDS = 10
#: The retrieval mode of a recall, and of a run, that names none.
DEFAULT_MODE = "fusion"
#: Every retrieval mode, the default first: what a harness offers (the engine itself asks `MODE_SOURCES`).
MODES = (DEFAULT_MODE, *sorted(mode for mode in MODE_SOURCES if mode != DEFAULT_MODE))
