"""hpcnet: the library and CLI shared by the checks and tools of the interconnect acceptance suite."""
