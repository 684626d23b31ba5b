from adapters.sources.github.adapter import GitRepositoryAdapter

__all__ = ["GitRepositoryAdapter"]
