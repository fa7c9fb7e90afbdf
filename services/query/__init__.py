"""What a search is made of: its legs and its efforts, one table each."""
