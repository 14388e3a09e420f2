"""Parsers of benchmark outputs: our kernels, IMB, OSU."""
