"""SSH hosts per owner: what may be registered (spec), the table (store), the rules (registry)."""
