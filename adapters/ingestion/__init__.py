"""Source ingestion adapters: external sources -> normalised `{text, metadata}` records.

They translate; they do not store, embed or rank. The caller supplies the
insertion function (`load(insert)`), which keeps Memoria out of the adapters.
"""
