from adapters.sources.git_repository.adapter import GitRepositoryAdapter

__all__ = ["GitRepositoryAdapter"]
