"""What the two store services share: the engine contract, the store servicer, per-collection gates, holds."""
