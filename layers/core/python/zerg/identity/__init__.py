"""Who is calling: owners' devices, their sessions and one-time pairing codes (one module per table)."""
