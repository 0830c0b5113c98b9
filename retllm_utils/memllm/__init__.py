"""MemLLM (Modarressi et al., 2024): Re-DocRED write/read data, write/read generation, Table 1 and Table 4."""
