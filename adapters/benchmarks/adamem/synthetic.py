"""The deterministic four-failure-mode suite: the episodes of the `adamem-synthetic` benchmark."""

from __future__ import annotations


def synthetic_suite() -> list[dict]:
    """Four deterministic episodes, one per failure mode of similarity-only memory."""
    return [
        {"id": "stale-fact", "observations": [
            {"label": "region-old", "content": "We deploy the production service to the us-east-1 region.",
             "importance": 0.5, "metadata": {"memory_key": "deploy.region"}},
            {"label": "lunch", "content": "The team lunch moved to Thursday.", "importance": 0.2},
            {"label": "region-new", "content": "Migration finished: production now runs in eu-west-2.",
             "importance": 0.5, "metadata": {"memory_key": "deploy.region"}},
        ], "queries": [{"id": "q1", "query": "Which region do we deploy the production service to?",
                        "expected_substrings": ["eu-west-2"], "forbidden_substrings": ["us-east-1"], "top_k": 1}]},
        {"id": "resolved-incident", "observations": [
            {"label": "cause", "content": "The TX91 token was missing from the build runner.", "importance": 0.6},
            {"label": "incident", "content": "The release build failed with error E401 during signing.",
             "importance": 0.6, "cause_labels": ["cause"]},
            {"label": "noise", "content": "Last month a release build failed because of flaky tests.", "importance": 0.3},
            {"label": "fix", "content": "Added the token to the runner secrets; the release is green again.",
             "importance": 0.5, "cause_labels": ["incident"]},
        ], "queries": [{"id": "q1", "query": "Why did the release build fail with E401?",
                        "expected_substrings": ["TX91"], "top_k": 2}]},
        {"id": "changed-code", "observations": [
            {"label": "code-old", "content": "The office door code is 4512.", "importance": 0.5,
             "valid_to": "2026-03-01T00:00:00+00:00"},
            {"label": "code-new", "content": "Since March the keypad at the office entrance opens with 9981.",
             "importance": 0.5, "valid_from": "2026-03-01T00:00:00+00:00"},
        ], "queries": [{"id": "q1", "query": "What is the office door code?", "expected_substrings": ["9981"],
                        "forbidden_substrings": ["4512"], "top_k": 1, "now": "2026-05-28T00:00:00+00:00"}]},
        {"id": "safety-rule", "observations": [
            {"label": f"routine-{i}", "content": text, "importance": 0.2} for i, text in enumerate([
                "The database migration script was updated to version 12.",
                "Nightly database backup finished in 14 minutes.",
                "Reviewed the database migration checklist with Priya.",
                "Database disk usage is at 61 percent.",
            ])] + [
            {"label": "rule", "content": "Safety rule: never migrate the primary database during business hours.",
             "importance": 1.0},
        ], "queries": [{"id": "q1", "query": "Anything to keep in mind before the database migration?",
                        "expected_substrings": ["never migrate the primary"], "top_k": 1}]},
    ]
