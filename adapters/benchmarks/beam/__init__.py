"""BEAM (Tavakoli et al., "Beyond a Million Tokens", ICLR 2026): one item per chat of 128K to 10M tokens, every
message a doc, twenty probing questions in ten abilities asked after the whole chat.

`layout` finds the chats a `--dataset` names (the `chats/` folder, a size folder or a chat folder; a 10M chat's
`plan-<k>/` parts); `reader` builds each chat's messages and its questions' message-level gold, strips the
`->-> b,t` markers, and names every bad input; `known` holds the development files' checksums.
"""

from adapters.benchmarks import register
from adapters.benchmarks.beam.reader import Beam
from adapters.benchmarks.contract import Benchmark, Kind

BENCHMARK = register(Benchmark(
    "beam", "BEAM", "chats/<size>/<n>/ of mohammadtavakoli78/BEAM (commit b2a3ee8b): the chats/ folder, a size "
    "folder or a chat folder", "chat", Kind.WHOLE_HISTORY, Beam, reads_folders=True,
    group_key="question_type,category,item_id", headline="turn:recall_any@10",
    unit_names=("batch", "message"), memoria_weights="beam.json",
    rendering="each message's content as-is, its trailing '->-> batch,bullet' marker removed; every message of "
              "both roles a doc, its batch its session"))
