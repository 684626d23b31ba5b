"""Files made rather than read: generated stand-ins of benchmarks, and converters between formats."""
