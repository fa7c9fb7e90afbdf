"""What a request may hold and how a bad one is refused: validation, limits, the wire guard."""
