from adapters.ingestion.obsidian.adapter import ObsidianAdapter

__all__ = ["ObsidianAdapter"]
