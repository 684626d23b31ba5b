"""Memoria: a retrieval engine over raw text (SQLite + FAISS + BM25 + fusion)."""

from memoria.engine import MemoryInterface
from memoria.loader import BatchLoader

__all__ = ["MemoryInterface", "BatchLoader"]
__version__ = "0.1.0"
