"""How samples are stored (files, WebDataset shards) and read back (DataLoader and DALI backends)."""
