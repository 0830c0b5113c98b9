"""RET-LLM (Modarressi et al., 2023): the synthetic people–company data (§3.3, Tables 1–2) and its evaluation."""
