from adapters.sources.obsidian.adapter import ObsidianAdapter

__all__ = ["ObsidianAdapter"]
