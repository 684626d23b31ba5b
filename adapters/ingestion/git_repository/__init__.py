from adapters.ingestion.git_repository.adapter import GitRepositoryAdapter

__all__ = ["GitRepositoryAdapter"]
